// Each logit processor against a distribution worked out by hand, then the subtle ones against
// transformers' formulas on random rows (sampling_test_util.h).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "sampling_test_util.h"

namespace onnx_genai {
namespace {

using testing_sampling::kept;
using testing_sampling::kNegInf;
using testing_sampling::process;

std::vector<float> logs(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (const double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

TEST(RepetitionPenalty, DividesPositiveMultipliesNegativeOncePerToken) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  const std::vector<int32_t> history = {0, 1, 1, 4};
  // token 0: 2 / 2 = 1; token 1 (seen twice, penalized once): -1 * 2 = -2; token 4: 0 stays 0;
  // tokens 2 and 3 were not seen.
  EXPECT_EQ(process(params, {2.0f, -1.0f, 0.5f, 3.0f, 0.0f}, {history, 2}),
            (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f, 0.0f}));
  // A penalty below 1 rewards: 2 / 0.5 = 4, -1 * 0.5 = -0.5.
  params.repetition_penalty = 0.5f;
  EXPECT_EQ(process(params, {2.0f, -1.0f, 0.5f, 3.0f, 0.0f}, {history, 2}),
            (std::vector<float>{4.0f, -0.5f, 0.5f, 3.0f, 0.0f}));
}

TEST(RepetitionPenalty, LowersProbabilityWhateverTheSign) {
  // The reason for CTRL's sign rule: dividing a negative logit would raise it.
  SamplingParams params;
  params.repetition_penalty = 1.3f;
  const std::vector<int32_t> history = {0, 1};
  const std::vector<float> before = {1.5f, -1.5f, 0.0f};
  const std::vector<float> after = process(params, before, {history, 2});
  EXPECT_LT(after[0], before[0]);
  EXPECT_LT(after[1], before[1]);
  EXPECT_EQ(after[2], before[2]);
}

TEST(FrequencyPresencePenalty, CountsGeneratedTokensOnly) {
  SamplingParams params;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.25f;
  // Prompt {3}, generated {0, 0, 2}: token 0 count 2 -> 1 - 0.5*2 - 0.25 = -0.25;
  // token 2 count 1 -> 1 - 0.5 - 0.25 = 0.25; token 3 appears only in the prompt: untouched.
  const std::vector<int32_t> history = {3, 0, 0, 2};
  EXPECT_EQ(process(params, {1.0f, 1.0f, 1.0f, 1.0f}, {history, 1}),
            (std::vector<float>{-0.25f, 1.0f, 0.25f, 1.0f}));
  // Negative penalties encourage repetition: 1 + 1*2 + 1 = 4.
  params.frequency_penalty = -1.0f;
  params.presence_penalty = -1.0f;
  EXPECT_EQ(process(params, {1.0f, 1.0f, 1.0f, 1.0f}, {history, 1}),
            (std::vector<float>{4.0f, 1.0f, 3.0f, 1.0f}));
}

TEST(NoRepeatNGram, BansTokensThatWouldRepeatAnNGram) {
  SamplingParams params;
  params.no_repeat_ngram_size = 2;
  const std::vector<float> flat(5, 0.0f);
  // History 1 2 3 1 2 1: the next bigram starts with 1; (1, 2) occurred, so 2 is banned.
  const std::vector<int32_t> bigrams = {1, 2, 3, 1, 2, 1};
  EXPECT_EQ(kept(process(params, flat, {bigrams, 0})), (std::vector<bool>{true, true, false, true, true}));
  // Trigrams: history 1 2 3 1 2 -> next starts with (1, 2); (1, 2, 3) occurred, so 3 is banned.
  params.no_repeat_ngram_size = 3;
  const std::vector<int32_t> trigrams = {1, 2, 3, 1, 2};
  EXPECT_EQ(kept(process(params, flat, {trigrams, 0})), (std::vector<bool>{true, true, true, false, true}));
  // Fewer than n-1 tokens: nothing can repeat yet (transformers: cur_len + 1 < ngram_size).
  const std::vector<int32_t> short_history = {1};
  EXPECT_EQ(kept(process(params, flat, {short_history, 0})), std::vector<bool>(5, true));
  // n = 1 bans every token already seen, prompt included.
  params.no_repeat_ngram_size = 1;
  const std::vector<int32_t> seen = {4, 0};
  EXPECT_EQ(kept(process(params, flat, {seen, 1})), (std::vector<bool>{false, true, true, true, false}));
}

TEST(LogitBias, AddsAndBans) {
  SamplingParams params;
  params.logit_bias = {{1, 2.0f}, {3, kNegInf}};
  EXPECT_EQ(process(params, {0.0f, 0.5f, 0.0f, 7.0f}), (std::vector<float>{0.0f, 2.5f, 0.0f, kNegInf}));
}

TEST(Temperature, DividesLogits) {
  SamplingParams params;
  params.temperature = 0.5f;
  EXPECT_EQ(process(params, {1.0f, 2.0f, -3.0f}), (std::vector<float>{2.0f, 4.0f, -6.0f}));
  // A quotient past the float range saturates at the largest float instead of +inf (whose softmax
  // is NaN). Temperatures below kGreedyBelowTemperature take the argmax and never get here.
  params.temperature = SamplingParams::kGreedyBelowTemperature;
  EXPECT_EQ(process(params, {3e38f, 0.0f})[0], FLT_MAX);
}

TEST(TopK, KeepsTheKLargestAndTiesAtTheBoundary) {
  SamplingParams params;
  params.top_k = 2;
  EXPECT_EQ(kept(process(params, {1, 3, 3, 2, 0})), (std::vector<bool>{false, true, true, false, false}));
  params.top_k = 3;  // third largest is 2
  EXPECT_EQ(kept(process(params, {1, 3, 3, 2, 0})), (std::vector<bool>{false, true, true, true, false}));
  // transformers removes only scores < the k-th largest, so a tie at the boundary is kept whole.
  params.top_k = 2;
  EXPECT_EQ(kept(process(params, {3, 1, 1, 1})), std::vector<bool>(4, true));
  params.top_k = 10;  // more than the vocabulary: keeps everything
  EXPECT_EQ(kept(process(params, {3, 1})), std::vector<bool>(2, true));
}

TEST(TopP, KeepsTheSmallestPrefixReachingP) {
  SamplingParams params;
  // Probabilities 0.4 0.3 0.2 0.1. Mass before each token: 0, 0.4, 0.7, 0.9.
  const std::vector<float> logits = logs({0.4, 0.3, 0.2, 0.1});
  params.top_p = 0.65f;  // 0.4 < 0.65 keeps token 1; 0.7 >= 0.65 stops
  EXPECT_EQ(kept(process(params, logits)), (std::vector<bool>{true, true, false, false}));
  params.top_p = 0.75f;  // 0.7 < 0.75 keeps token 2 too
  EXPECT_EQ(kept(process(params, logits)), (std::vector<bool>{true, true, true, false}));
  params.top_p = 0.01f;  // always at least the most likely token
  EXPECT_EQ(kept(process(params, logits)), (std::vector<bool>{true, false, false, false}));
}

TEST(TopP, ExactBoundaryFollowsTransformers) {
  // Four equal logits: every probability is exactly 0.25 and every cumulative sum is exact.
  // transformers sorts ascending, cumsum = 0.25 0.5 0.75 1, removes cumsum <= 1 - top_p.
  // top_p = 0.5: removes cumsum <= 0.5, two tokens -> two kept (mass exactly 0.5 is enough).
  SamplingParams params;
  const std::vector<float> flat(4, 0.0f);
  params.top_p = 0.5f;
  EXPECT_EQ(kept(process(params, flat)), (std::vector<bool>{true, true, false, false}));  // ties: lower ids
  // Just above 0.5 the mass of two tokens no longer suffices.
  params.top_p = std::nextafter(0.5f, 1.0f);
  EXPECT_EQ(kept(process(params, flat)), (std::vector<bool>{true, true, true, false}));
  params.top_p = 0.25f;
  EXPECT_EQ(kept(process(params, flat)), (std::vector<bool>{true, false, false, false}));
}

TEST(MinP, KeepsTokensAboveAFractionOfTheTopProbability) {
  SamplingParams params;
  const std::vector<float> logits = logs({0.5, 0.3, 0.15, 0.05});
  params.min_p = 0.2f;  // threshold 0.2 * 0.5 = 0.1: drops 0.05
  EXPECT_EQ(kept(process(params, logits)), (std::vector<bool>{true, true, true, false}));
  params.min_p = 0.5f;  // threshold 0.25: keeps 0.5 and 0.3
  EXPECT_EQ(kept(process(params, logits)), (std::vector<bool>{true, true, false, false}));
  params.min_p = 1.0f;  // only the most likely token
  EXPECT_EQ(kept(process(params, logits)), (std::vector<bool>{true, false, false, false}));
}

TEST(TypicalP, KeepsTokensWhoseSurprisalIsNearTheEntropy) {
  // p = 1/2 1/4 1/8 1/8. Entropy H = (1/2*1 + 1/4*2 + 2*1/8*3) ln2 = 1.75 ln2 = 1.2130.
  // Surprisal -ln p = 0.693 1.386 2.079 2.079; distance to H = 0.520 0.173 0.866 0.866.
  // Order by distance: token 1 (p 0.25), token 0 (0.5), tokens 2 and 3 (0.125 each).
  // Inclusive running mass in that order: 0.25 0.75 0.875 1.
  SamplingParams params;
  const std::vector<float> logits = logs({0.5, 0.25, 0.125, 0.125});
  params.typical_p = 0.5f;  // last_ind = #(mass < 0.5) = 1: distances <= 0.520 -> tokens 1 and 0
  EXPECT_EQ(kept(process(params, logits)), (std::vector<bool>{true, true, false, false}));
  params.typical_p = 0.2f;  // last_ind = 0: only token 1; the most likely token is dropped
  EXPECT_EQ(kept(process(params, logits)), (std::vector<bool>{false, true, false, false}));
  params.typical_p = 0.8f;  // last_ind = 2: distance 0.866, shared by tokens 2 and 3, keeps all
  EXPECT_EQ(kept(process(params, logits)), std::vector<bool>(4, true));
}

TEST(Chain, RunsInTransformersOrder) {
  SamplingParams params;
  params.logit_bias = {{0, 1.0f}};
  params.repetition_penalty = 1.1f;
  params.presence_penalty = 0.5f;
  params.no_repeat_ngram_size = 3;
  params.temperature = 0.7f;
  params.top_k = 40;
  params.top_p = 0.9f;
  params.min_p = 0.05f;
  params.typical_p = 0.95f;
  auto chain = make_logit_processors(params);
  ASSERT_TRUE(chain.is_ok()) << chain.status().message();
  std::vector<std::string> names;
  for (const auto& processor : *chain) names.emplace_back(processor->name());
  EXPECT_EQ(names, (std::vector<std::string>{"logit_bias", "repetition_penalty", "frequency_presence_penalty",
                                             "no_repeat_ngram", "temperature", "top_k", "top_p", "min_p",
                                             "typical_p"}));
  // Greedy keeps the processors transformers applies with do_sample=False and drops the warpers.
  params.temperature = 0.0f;
  chain = make_logit_processors(params);
  ASSERT_TRUE(chain.is_ok());
  EXPECT_EQ(chain->size(), 4u);
  // Defaults do nothing, so the chain is empty.
  chain = make_logit_processors(SamplingParams{});
  ASSERT_TRUE(chain.is_ok());
  EXPECT_TRUE(chain->empty());
}

TEST(Chain, BiasComesBeforeThePenalty) {
  // transformers applies sequence_bias first, so the penalty divides the biased logit:
  // (1 + 3) / 2 = 2, not 1 / 2 + 3.
  SamplingParams params;
  params.logit_bias = {{0, 3.0f}};
  params.repetition_penalty = 2.0f;
  const std::vector<int32_t> history = {0};
  EXPECT_EQ(process(params, {1.0f, 0.0f}, {history, 1})[0], 2.0f);
}

TEST(Candidates, OutOfPlayIsFinal) {
  Candidates candidates;
  candidates.assign(std::vector<float>{1.0f, kNegInf, 2.0f});
  EXPECT_EQ(std::vector<int32_t>(candidates.ids().begin(), candidates.ids().end()), (std::vector<int32_t>{0, 2}));
  candidates.set_logit(1, 5.0f);  // cannot revive
  EXPECT_EQ(candidates.logit(1), kNegInf);
  candidates.set_logit(0, std::nanf(""));  // NaN takes a token out
  EXPECT_EQ(candidates.logit(0), kNegInf);
  candidates.set_logit(2, std::numeric_limits<float>::infinity());
  EXPECT_EQ(candidates.logit(2), FLT_MAX);
  candidates.set_logit(99, 1.0f);  // outside the vocabulary: ignored, never written
  EXPECT_EQ(candidates.logit(99), kNegInf);
  EXPECT_EQ(candidates.logit(-1), kNegInf);
  candidates.keep_if([](int32_t, float) { return true; });  // drops ids that went to -inf
  EXPECT_EQ(std::vector<int32_t>(candidates.ids().begin(), candidates.ids().end()), (std::vector<int32_t>{2}));
}

// A token mask keeps exactly the tokens keep_if would keep with the same bits, over vocabularies
// that end mid-word and masks shorter than the vocabulary (ids past them go).
TEST(Candidates, KeepAllowedIsKeepIfOnTheMasksBits) {
  std::mt19937_64 rng(7);
  for (const size_t vocab : {1, 63, 64, 65, 200, 1000}) {
    for (int round = 0; round < 8; ++round) {
      std::vector<float> row(vocab);
      for (size_t t = 0; t < vocab; ++t) row[t] = rng() % 5 == 0 ? kNegInf : static_cast<float>(rng() % 100);
      std::vector<uint64_t> mask((vocab + 63) / 64 - (round == 7 && vocab > 64 ? 1 : 0));
      for (uint64_t& word : mask) word = round == 0 ? ~uint64_t{0} : round == 1 ? 0 : rng() & rng();
      const auto allowed = [&](int32_t id) {
        const auto t = static_cast<size_t>(id);
        return t / 64 < mask.size() && ((mask[t / 64] >> (t % 64)) & 1);
      };
      Candidates masked, reference;
      masked.assign(row);
      reference.assign(row);
      masked.keep_allowed(mask);
      reference.keep_if([&](int32_t id, float) { return allowed(id); });
      EXPECT_EQ(std::vector<int32_t>(masked.ids().begin(), masked.ids().end()),
                std::vector<int32_t>(reference.ids().begin(), reference.ids().end()));
      EXPECT_EQ(std::vector<float>(masked.logits().begin(), masked.logits().end()),
                std::vector<float>(reference.logits().begin(), reference.logits().end()));
    }
  }
}

// Random rows against transformers' formulas: the library walks a partial selection in descending
// order, the references sort everything and use transformers' ascending cumulative sums.
class AgainstTransformers : public ::testing::Test {
 protected:
  std::vector<float> random_row() {
    std::uniform_int_distribution<int> vocab(2, 400);
    std::normal_distribution<float> logit(0.0f, 3.0f);
    std::vector<float> row(static_cast<size_t>(vocab(rng_)));
    for (float& l : row) l = logit(rng_);
    return row;
  }
  static std::vector<double> widen(const std::vector<float>& row) { return {row.begin(), row.end()}; }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }

  std::mt19937 rng_{20240611};
};

TEST_F(AgainstTransformers, TopK) {
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<float> row = random_row();
    SamplingParams params;
    params.top_k = std::uniform_int_distribution<int>(1, static_cast<int>(row.size()))(rng_);
    ASSERT_EQ(kept(process(params, row)), testing_sampling::hf_top_k(widen(row), static_cast<size_t>(params.top_k)))
        << "trial " << trial;
  }
}

TEST_F(AgainstTransformers, TopP) {
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<float> row = random_row();
    SamplingParams params;
    params.top_p = uniform(0.01f, 0.999f);
    ASSERT_EQ(kept(process(params, row)), testing_sampling::hf_top_p(widen(row), params.top_p))
        << "trial " << trial << " top_p " << params.top_p;
  }
}

TEST_F(AgainstTransformers, MinP) {
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<float> row = random_row();
    SamplingParams params;
    params.min_p = uniform(0.0f, 1.0f);
    ASSERT_EQ(kept(process(params, row)), testing_sampling::hf_min_p(widen(row), params.min_p))
        << "trial " << trial << " min_p " << params.min_p;
  }
}

TEST_F(AgainstTransformers, TypicalP) {
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<float> row = random_row();
    SamplingParams params;
    params.typical_p = uniform(0.01f, 0.999f);
    ASSERT_EQ(kept(process(params, row)), testing_sampling::hf_typical_p(widen(row), params.typical_p))
        << "trial " << trial << " typical_p " << params.typical_p;
  }
}

TEST_F(AgainstTransformers, RepetitionPenaltyGatherScatter) {
  // transformers: score = gather(scores, input_ids); score = where(score < 0, score * p, score / p);
  // scatter back. Duplicates scatter the same value, so each token is penalized once.
  for (int trial = 0; trial < 100; ++trial) {
    const std::vector<float> row = random_row();
    std::vector<int32_t> history(20);
    for (int32_t& token : history) {
      token = std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(row.size()) - 1)(rng_);
    }
    SamplingParams params;
    params.repetition_penalty = uniform(0.5f, 2.0f);
    std::vector<float> expected = row;
    for (const int32_t token : history) {
      const float score = row[static_cast<size_t>(token)];
      expected[static_cast<size_t>(token)] =
          score < 0 ? score * params.repetition_penalty : score / params.repetition_penalty;
    }
    ASSERT_EQ(process(params, row, {history, history.size()}), expected) << "trial " << trial;
  }
}

TEST_F(AgainstTransformers, LargeVocabularyNucleus) {
  // A flat-ish 50k row makes the nucleus thousands of tokens long, so the partial selection has
  // to grow its window several times.
  std::normal_distribution<float> logit(0.0f, 0.5f);
  std::vector<float> row(50000);
  for (float& l : row) l = logit(rng_);
  SamplingParams params;
  params.top_p = 0.9f;
  EXPECT_EQ(kept(process(params, row)), testing_sampling::hf_top_p(widen(row), params.top_p));
  params = SamplingParams{};
  params.typical_p = 0.9f;
  EXPECT_EQ(kept(process(params, row)), testing_sampling::hf_typical_p(widen(row), params.typical_p));
}

}  // namespace
}  // namespace onnx_genai
