// Bad parameters and bad inputs: a clear Status naming what is wrong and the value, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "onnx_genai/sampling.h"

namespace onnx_genai {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::string create_error(const std::function<void(SamplingParams&)>& edit, int32_t vocab_size = 10) {
  SamplingParams params;
  edit(params);
  auto sampler = Sampler::create(params, vocab_size);
  return sampler.is_ok() ? std::string("(no error)") : sampler.status().message();
}

TEST(SamplingParams, DefaultsAreValid) { EXPECT_TRUE(SamplingParams{}.validate().is_ok()); }

TEST(SamplingParams, EachInvalidValueIsNamed) {
  EXPECT_EQ(create_error([](SamplingParams& p) { p.temperature = -0.5f; }),
            "sampling parameter temperature must be a finite number >= 0, got -0.5");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.temperature = kNaN; }),
            "sampling parameter temperature must be a finite number >= 0, got nan");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.temperature = kInf; }),
            "sampling parameter temperature must be a finite number >= 0, got inf");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.top_k = -1; }),
            "sampling parameter top_k must be >= 0 (0 disables it), got -1");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.top_p = 0.0f; }), "sampling parameter top_p must be in (0, 1], got 0");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.top_p = 1.5f; }),
            "sampling parameter top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.top_p = kNaN; }),
            "sampling parameter top_p must be in (0, 1], got nan");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.min_p = -0.1f; }),
            "sampling parameter min_p must be in [0, 1], got -0.1");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.min_p = 1.01f; }),
            "sampling parameter min_p must be in [0, 1], got 1.01");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.min_p = kNaN; }), "sampling parameter min_p must be in [0, 1], got nan");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.typical_p = 0.0f; }),
            "sampling parameter typical_p must be in (0, 1], got 0");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.repetition_penalty = 0.0f; }),
            "sampling parameter repetition_penalty must be a finite number > 0, got 0");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.frequency_penalty = kNaN; }),
            "sampling parameter frequency_penalty must be finite, got nan");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.presence_penalty = -kInf; }),
            "sampling parameter presence_penalty must be finite, got -inf");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.no_repeat_ngram_size = -2; }),
            "sampling parameter no_repeat_ngram_size must be >= 0 (0 disables it), got -2");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.logit_bias = {{3, kNaN}}; }),
            "sampling parameter logit_bias for token 3 must be finite or -inf, got nan");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.top_logprobs = -1; }),
            "sampling parameter top_logprobs must be >= 0, got -1");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.top_logprobs = 5; }),
            "sampling parameter top_logprobs=5 needs logprobs=true");
}

TEST(SamplingParams, BoundaryValuesAreAccepted) {
  EXPECT_EQ(create_error([](SamplingParams& p) {
              p.temperature = 0.0f;
              p.top_p = 1.0f;
              p.min_p = 1.0f;
              p.typical_p = 1.0f;
              p.logit_bias = {{0, -kInf}};
            }),
            "(no error)");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.min_p = 0.0f; }), "(no error)");
}

// Dividing logits by a temperature below ~1e-38 overflows to inf; below 1e-5 the argmax is taken
// instead, whatever the seed.
TEST(SamplingParams, TinyTemperaturesTakeTheArgmax) {
  const std::vector<float> logits = {0.5f, 3.0f, 2.9f, -1.0f};
  for (const float temperature : {1e-45f, 1e-30f, 9e-6f}) {
    SamplingParams params;
    params.temperature = temperature;
    EXPECT_TRUE(params.is_greedy()) << temperature;
    for (uint64_t seed = 0; seed < 20; ++seed) {
      params.seed = seed;
      Sampler sampler = std::move(Sampler::create(params, 4)).value();
      auto picked = sampler.sample(logits, {});
      ASSERT_TRUE(picked.is_ok()) << picked.status().message();
      EXPECT_EQ(picked->token, 1) << "temperature " << temperature << " seed " << seed;
    }
  }
  SamplingParams warm;
  warm.temperature = 1e-5f;
  EXPECT_FALSE(warm.is_greedy());
}

TEST(SamplingParams, VocabularyDependentChecks) {
  EXPECT_EQ(create_error([](SamplingParams& p) { p.logit_bias = {{10, 1.0f}}; }),
            "sampling parameter logit_bias names token 10, outside the vocabulary [0, 10)");
  EXPECT_EQ(create_error([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }),
            "sampling parameter logit_bias names token -1, outside the vocabulary [0, 10)");
  EXPECT_EQ(create_error([](SamplingParams&) {}, 0), "sampling: vocabulary size must be in [1, 1048576], got 0");
  EXPECT_EQ(create_error([](SamplingParams&) {}, 1048577),
            "sampling: vocabulary size must be in [1, 1048576], got 1048577");
  LogitProcessorChain chain;
  chain.push_back(nullptr);
  auto sampler = Sampler::create(SamplingParams{}, 4, std::move(chain));
  ASSERT_FALSE(sampler.is_ok());
  EXPECT_EQ(sampler.status().message(), "sampling: logit processor 0 of the chain is null");
}

class BadInput : public ::testing::Test {
 protected:
  std::string error(const std::vector<float>& logits, const TokenHistory& history = {}) {
    auto result = sampler_.sample(logits, history);
    return result.is_ok() ? std::string("(no error)") : result.status().message();
  }
  Sampler sampler_ = std::move(Sampler::create(SamplingParams{}, 4)).value();
};

TEST_F(BadInput, RowSizeMustMatchTheVocabulary) {
  EXPECT_EQ(error({0.0f, 1.0f, 2.0f}), "sampling: logits row has 3 entries, expected the vocabulary size 4");
}

TEST_F(BadInput, NaNAndPositiveInfinityAreRejected) {
  EXPECT_EQ(error({0.0f, kNaN, 2.0f, 1.0f}), "sampling: logit of token 1 is nan (logits must be finite or -inf)");
  EXPECT_EQ(error({0.0f, 1.0f, 2.0f, kInf}), "sampling: logit of token 3 is inf (logits must be finite or -inf)");
  EXPECT_EQ(error({-kInf, 1.0f, 2.0f, 0.0f}), "(no error)");
}

TEST_F(BadInput, HistoryIdsAndPromptLength) {
  const std::vector<float> row = {0.0f, 1.0f, 2.0f, 3.0f};
  const std::vector<int32_t> history = {1, 2, 4};
  EXPECT_EQ(error(row, {history, 0}), "sampling: history token at position 2 is 4, outside the vocabulary [0, 4)");
  const std::vector<int32_t> negative = {-7};
  EXPECT_EQ(error(row, {negative, 0}), "sampling: history token at position 0 is -7, outside the vocabulary [0, 4)");
  const std::vector<int32_t> fine = {1, 2};
  EXPECT_EQ(error(row, {fine, 3}), "sampling: prompt_length 3 exceeds the history's 2 tokens");
}

TEST_F(BadInput, EverythingFilteredOut) {
  EXPECT_EQ(error({-kInf, -kInf, -kInf, -kInf}), "sampling: every token has been filtered out (all logits are -inf)");
  SamplingParams params;
  params.greedy = true;
  params.no_repeat_ngram_size = 1;
  Sampler greedy = std::move(Sampler::create(params, 2)).value();
  const std::vector<int32_t> history = {0, 1};
  auto result = greedy.sample(std::vector<float>{0.0f, 1.0f}, {history, 2});
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().message(), "sampling: every token has been filtered out (all logits are -inf)");
}

}  // namespace
}  // namespace onnx_genai
