// Speculative decoding with the default model on the GPU: prompt lookup and the model as its own
// draft give plain greedy decoding's tokens on the device (the verify step of K + 1 rows runs the
// same GEMV and split-K attention kernels as a one-token step), and the argmax of every verified
// position comes from the graph. Without a usable GPU each test skips with the reason.
#include <gtest/gtest.h>

#include "genai_test_util.h"
#include "onnx_genai/genai.h"

#include "gpu_skip.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;

const fs::path kPackage = fs::path(testing::source_dir()) / "models" / "debian-prose-11m";

std::vector<int32_t> generate(const genai::Model& model, genai::GeneratorParams params,
                              const genai::SpeculativeParams& speculative, genai::GenerationStats& stats) {
  params.speculative = speculative;
  auto g = genai::Generator::create(model, params);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  if (!g.is_ok()) return {};
  const Status status = (*g)->generate(nullptr);
  EXPECT_TRUE(status.is_ok()) << status.message();
  stats = (*g)->stats();
  const std::span<const int32_t> tokens = (*g)->tokens(0);
  return {tokens.begin(), tokens.end()};
}

TEST(CudaSpeculative, GreedyTokensEqualPlainDecoding) {
  OG_SKIP_WITHOUT_GPU();
  genai::ModelOptions options;
  options.device = Device{DeviceType::kCuda, 0};
  auto model = genai::Model::load(kPackage.string(), options);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ASSERT_EQ((*model)->device(), options.device) << (*model)->device_fallback();
  genai::SpeculativeParams lookup;
  lookup.method = genai::SpeculativeMethod::kNgram;
  lookup.draft_tokens = 6;
  genai::SpeculativeParams draft;
  draft.method = genai::SpeculativeMethod::kDraftModel;
  draft.draft_model = model->get();
  draft.draft_tokens = 4;
  int64_t drafted = 0, accepted = 0;
  for (const char* prompt : {"And God said unto Moses", "It were not best that we should all think alike;",
                             "The quick brown fox jumps over the lazy dog. The quick brown"}) {
    auto ids = (*model)->encode(prompt);
    ASSERT_TRUE(ids.is_ok());
    genai::GeneratorParams params;  // no processors: the graph's argmax picks every token
    params.sampling.greedy = true;
    params.max_new_tokens = 64;
    params.prompts = {*ids};
    genai::GenerationStats stats;
    const std::vector<int32_t> plain = generate(**model, params, {}, stats);
    for (const genai::SpeculativeParams& speculative : {lookup, draft}) {
      EXPECT_EQ(generate(**model, params, speculative, stats), plain)
          << prompt << ", " << genai::speculative_method_name(speculative.method);
      drafted += stats.drafted_tokens;
      accepted += stats.accepted_tokens;
    }
  }
  std::printf("[ drafts   ] %lld drafted, %lld accepted on the device\n", static_cast<long long>(drafted),
              static_cast<long long>(accepted));
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace onnx_genai
