// Greedy token locks: the Generator's first 64 tokens equal those of the same greedy loop driven
// through ONNX Runtime (tests/oracle/ort_decode.mjs: one prefill of the padded batch, then one
// token per step, every present fed back as the next past).
//
// Fixtures are built at test time by tools/build_model.py in both graph styles:
//   genai      GroupQueryAttention over a shared past/present buffer, rows right-padded (int4
//              MatMulNBits and fp32 MatMul, rotary inside attention or from position_ids,
//              a sliding window reached during the decode; mixture-of-experts QMoE layers,
//              attention sinks)
//   standard   opset-17 Concat caches, rows left-padded
// with batch 1 and batch 3 (prompts of 7, 2 and 5 tokens), decode masks as wide as the KV cache
// (the default for these GroupQueryAttention graphs) or as the sequence (one fixture), and
// chunked prefills (prefill_chunk 3):
// a batch-1 prompt continued chunk by chunk, a GroupQueryAttention batch fed row by row, and a
// left-padded batch fed in aligned chunks. ONNX Runtime always prefills in one run, so those
// also check that chunking does not change the tokens.
//
// Tokens must match exactly. Logits agree to ~1e-5 (tests/runtime/model_parity_test.cc), so
// only a near tie in ONNX Runtime's own top two could flip a pick; the inputs are fixed, so a
// passing fixture stays passing.
#include <gtest/gtest.h>

#include <optional>

#include "genai_test_util.h"

namespace onnx_genai {
namespace {

using testing::ParityFixture;

constexpr int kLockedTokens = 64;

const std::vector<std::vector<int64_t>> kBatch3 = {{5, 17, 300, 42, 7, 99, 3}, {11, 12}, {800, 1, 2, 3, 4}};
const std::vector<std::vector<int64_t>> kBatch1 = {{9, 250, 31, 400, 2, 77}};
const std::vector<std::vector<int64_t>> kLongBatch1 = {{9, 250, 31, 400, 2, 77, 13, 14, 600, 5, 8}};

struct LockCase {
  ParityFixture fixture;
  int64_t prefill_chunk = 0;  // 0: the whole prompt in one run
  std::optional<bool> mask_at_capacity;  // ModelOptions::decode_mask_at_capacity (unset: automatic)
};

void PrintTo(const LockCase& c, std::ostream* os) { *os << c.fixture.name; }

LockCase lock_case(std::string name, std::vector<std::string> builder, const std::vector<std::vector<int64_t>>& prompts,
                   int64_t prefill_chunk = 0, std::optional<bool> mask_at_capacity = std::nullopt) {
  return {ParityFixture{std::move(name), std::move(builder), prompts, kLockedTokens - 1, ""}, prefill_chunk,
          mask_at_capacity};
}

const std::vector<std::string> kInt4 = {"--weights", "int4", "--block-size", "32"};

std::vector<LockCase> lock_cases() {
  const auto args = [](std::vector<std::string> base, const std::vector<std::string>& extra) {
    base.insert(base.end(), extra.begin(), extra.end());
    return base;
  };
  return {
      lock_case("genai_llama_int4_batch3", args({"--preset", "llama", "--style", "genai"}, kInt4), kBatch3),
      lock_case("genai_llama_int4_batch3_mask_per_step", args({"--preset", "llama", "--style", "genai"}, kInt4), kBatch3,
                0, false),
      lock_case("genai_qwen2_fp32_batch1", {"--preset", "qwen2", "--style", "genai"}, kBatch1),
      lock_case("genai_mistral_window_position_ids_fp32_batch3",
                {"--preset", "mistral", "--style", "genai", "--position-ids"}, kBatch3),
      lock_case("standard_llama_fp32_batch3", {"--preset", "llama", "--style", "standard"}, kBatch3),
      lock_case("standard_qwen3_fp32_batch1", {"--preset", "qwen3", "--style", "standard"}, kBatch1),
      // Final-logit softcap (Div, Tanh, Mul after the LM head): logit_rows.h's rewrite reaches
      // the head through them.
      lock_case("genai_gemma_softcap_fp32_batch3",
                {"--preset", "gemma", "--style", "genai", "--set", "final_logit_softcapping=30.0"}, kBatch3),
      lock_case("standard_gemma_softcap_fp32_batch3",
                {"--preset", "gemma", "--style", "standard", "--set", "final_logit_softcapping=30.0"}, kBatch3),
      lock_case("genai_llama_int4_batch1_chunked", args({"--preset", "llama", "--style", "genai"}, kInt4), kLongBatch1, 3),
      lock_case("genai_qwen2_fp32_batch3_chunked_by_row", {"--preset", "qwen2", "--style", "genai"}, kBatch3, 3),
      lock_case("standard_llama_fp32_batch3_chunked", {"--preset", "llama", "--style", "standard"}, kBatch3, 3),
      // Mixture-of-experts layers (QMoE int4 experts), gpt-oss's attention sinks and alternating windows.
      lock_case("genai_mixtral_qmoe_int4_batch3", args({"--preset", "mixtral", "--style", "genai"}, kInt4), kBatch3),
      lock_case("genai_gpt_oss_qmoe_int4_batch3_chunked", args({"--preset", "gpt_oss", "--style", "genai"}, kInt4),
                kBatch3, 3),
  };
}

class GreedyLock : public ::testing::TestWithParam<LockCase> {};

TEST_P(GreedyLock, First64TokensMatchOnnxRuntime) {
  const LockCase& param = GetParam();
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const auto dir = testing::build_model_or_fail(param.fixture, scratch.path());
  ASSERT_FALSE(dir.empty());
  auto ort = testing::ort_greedy_tokens(dir, param.fixture, kLockedTokens, scratch.path());
  ASSERT_TRUE(ort.is_ok()) << ort.status().message();

  genai::ModelOptions options;
  options.num_threads = 2;
  options.decode_mask_at_capacity = param.mask_at_capacity;
  auto model = genai::Model::load(dir.string(), options);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const bool genai_style = param.fixture.name.starts_with("genai");
  EXPECT_EQ((*model)->info().shared_kv_buffer, genai_style);
  EXPECT_EQ((*model)->info().right_padding, genai_style);

  auto ours =
      testing::generate_greedy(**model, testing::to_int32(param.fixture.prompts), kLockedTokens, param.prefill_chunk);
  ASSERT_TRUE(ours.is_ok()) << ours.status().message();
  ASSERT_EQ(ours->size(), ort->size());
  for (size_t b = 0; b < ours->size(); ++b) {
    EXPECT_EQ((*ours)[b], (*ort)[b]) << "sequence " << b;
  }
  const SessionStats stats = (*model)->session_stats();
  std::printf("[ plans    ] %s: %lld plans compiled, %lld cache hits, %lld runs\n", param.fixture.name.c_str(),
              static_cast<long long>(stats.plans_compiled), static_cast<long long>(stats.plan_cache_hits),
              static_cast<long long>(stats.runs));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GreedyLock, ::testing::ValuesIn(lock_cases()),
                         [](const ::testing::TestParamInfo<LockCase>& info) { return info.param.fixture.name; });

}  // namespace
}  // namespace onnx_genai
