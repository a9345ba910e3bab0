// Seeded sampling on the GPU with each token drawn in the graph while the logits stay on the
// device (src/genai/device_sampling.h, onnx_genai SampleTokens), against the same GPU session's
// host path (logprobs on: the logits come down and the host Sampler draws). Both see the same
// logits and the same seeded uniforms, so the tokens must be identical, step for step, for a
// ragged batch and several settings; the log shows both paths' time per decode step. Without a
// usable GPU the test skips with the reason.
#include <gtest/gtest.h>

#include <cstdio>
#include <utility>

#include "genai_test_util.h"
#include "onnx_genai/genai.h"

#include "gpu_skip.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;

const fs::path kPackage = fs::path(testing::source_dir()) / "models" / "debian-prose-11m";
constexpr int kTokens = 64;

struct Decoded {
  std::vector<std::vector<int32_t>> tokens;
  double seconds_per_step = 0;
};

Result<Decoded> decode(const genai::Model& model, const std::vector<std::vector<int32_t>>& prompts,
                       SamplingParams sampling) {
  genai::GeneratorParams params;
  params.sampling = std::move(sampling);
  params.ignore_eos = true;
  params.max_new_tokens = kTokens;
  params.prompts = prompts;
  OG_ASSIGN_OR_RETURN(auto generator, genai::Generator::create(model, params));
  OG_RETURN_IF_ERROR(generator->generate(nullptr));
  Decoded out;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const auto tokens = generator->tokens(b);
    out.tokens.emplace_back(tokens.begin(), tokens.end());
  }
  const genai::GenerationStats& stats = generator->stats();
  out.seconds_per_step = stats.decode_steps > 0 ? stats.decode_seconds / static_cast<double>(stats.decode_steps) : 0;
  return out;
}

TEST(CudaSampledTokens, SeededDrawsInTheGraphEqualTheHostSamplers) {
  OG_SKIP_WITHOUT_GPU();
  genai::ModelOptions options;
  options.num_threads = 2;
  options.device = Device{DeviceType::kCuda, 0};
  auto model = genai::Model::load(kPackage.string(), options);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"And God said", "The quick brown fox jumps over", "In the beginning", "It was"}) {
    auto ids = (*model)->encode(text);
    ASSERT_TRUE(ids.is_ok()) << ids.status().message();
    prompts.push_back(*ids);
  }
  SamplingParams chat;
  chat.temperature = 0.7f;
  chat.top_k = 50;
  chat.top_p = 0.9f;
  chat.seed = 1234;
  SamplingParams wide;
  wide.temperature = 1.3f;
  wide.top_p = 0.95f;
  wide.min_p = 0.01f;
  wide.seed = 99;
  SamplingParams plain;
  plain.seed = 5;
  for (const auto& [what, sampling] : {std::pair{"temperature 0.7, top_k 50, top_p 0.9", chat},
                                       std::pair{"temperature 1.3, top_p 0.95, min_p 0.01", wide},
                                       std::pair{"temperature 1", plain}}) {
    SamplingParams on_host = sampling;
    on_host.logprobs = true;  // the logits come down and the host Sampler draws
    auto host = decode(**model, prompts, on_host);
    ASSERT_TRUE(host.is_ok()) << what << ": " << host.status().message();
    auto in_graph = decode(**model, prompts, sampling);
    ASSERT_TRUE(in_graph.is_ok()) << what << ": " << in_graph.status().message();
    EXPECT_EQ(in_graph->tokens, host->tokens) << what;
    std::printf("[ sampled  ] %s, batch %zu: %.1f us per decode step drawing in the graph, %.1f us with the logits "
                "to the host\n",
                what, prompts.size(), 1e6 * in_graph->seconds_per_step, 1e6 * host->seconds_per_step);
  }
}

}  // namespace
}  // namespace onnx_genai
