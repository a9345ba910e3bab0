// Greedy decoding on the GPU with each token taken from the graph's argmax while the logits stay
// on the device (src/genai/greedy_output.h), against the same GPU session's host path (greedy
// with logprobs: the logits come down and the host sampler picks). Both see the same logits, so
// the tokens must be identical; the log shows both paths' time per decode step. Without a usable
// GPU the test skips with the reason.
#include <gtest/gtest.h>

#include <cstdio>

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

Result<Decoded> decode(const genai::Model& model, const std::vector<std::vector<int32_t>>& prompts, bool logprobs) {
  genai::GeneratorParams params;
  params.sampling.greedy = true;
  params.sampling.logprobs = logprobs;
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

TEST(CudaGreedyTokens, DefaultModelTokensFromTheGraphEqualTheHostSamplers) {
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
  auto host = decode(**model, prompts, /*logprobs=*/true);
  ASSERT_TRUE(host.is_ok()) << host.status().message();
  auto in_graph = decode(**model, prompts, /*logprobs=*/false);
  ASSERT_TRUE(in_graph.is_ok()) << in_graph.status().message();
  EXPECT_EQ(in_graph->tokens, host->tokens);
  std::printf("[ greedy   ] batch %zu: %.1f us per decode step with the argmax in the graph, %.1f us with the logits "
              "to the host\n",
              prompts.size(), 1e6 * in_graph->seconds_per_step, 1e6 * host->seconds_per_step);
}

}  // namespace
}  // namespace onnx_genai
