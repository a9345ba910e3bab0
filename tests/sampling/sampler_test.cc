// The Sampler end to end: greedy ties, seeded reproducibility, the draw against an inverse CDF
// computed here, empirical frequencies against the filtered distribution, logprobs, custom
// processors, and the platform-independent pieces (PRNG against published/numpy values, exp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sampling/random.h"
#include "sampling/softmax.h"
#include "sampling_test_util.h"

namespace onnx_genai {
namespace {

using testing_sampling::kNegInf;

Sampler make_sampler(const SamplingParams& params, int32_t vocab_size) {
  auto sampler = Sampler::create(params, vocab_size);
  EXPECT_TRUE(sampler.is_ok()) << sampler.status().message();
  return std::move(sampler).value();
}

int32_t sample_token(Sampler& sampler, const std::vector<float>& logits, const TokenHistory& history = {}) {
  auto result = sampler.sample(logits, history);
  EXPECT_TRUE(result.is_ok()) << result.status().message();
  return result.is_ok() ? result->token : -1;
}

TEST(Greedy, ArgmaxWithTiesToTheLowestId) {
  SamplingParams params;
  params.greedy = true;
  Sampler sampler = make_sampler(params, 5);
  EXPECT_EQ(sample_token(sampler, {1.0f, 5.0f, 5.0f, 2.0f, 5.0f}), 1);
  EXPECT_EQ(sample_token(sampler, {kNegInf, -3.0f, -3.0f, kNegInf, -4.0f}), 1);
}

TEST(Greedy, TemperatureZeroIsGreedyAndPenaltiesStillApply) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.top_k = 1;  // ignored when greedy, like transformers' warpers with do_sample=False
  params.repetition_penalty = 2.0f;
  Sampler sampler = make_sampler(params, 4);
  const std::vector<int32_t> history = {1};
  // Token 1's 5 becomes 2.5 after the penalty, so token 2 (3.0) wins.
  EXPECT_EQ(sample_token(sampler, {1.0f, 5.0f, 3.0f, 2.0f}, {history, 1}), 2);
}

std::vector<float> random_logits(std::mt19937& rng, size_t vocab) {
  std::normal_distribution<float> logit(0.0f, 2.0f);
  std::vector<float> row(vocab);
  for (float& l : row) l = logit(rng);
  return row;
}

// Generates `steps` tokens, feeding each back into the history.
std::vector<int32_t> generate(const SamplingParams& params, size_t vocab, size_t steps) {
  Sampler sampler = make_sampler(params, static_cast<int32_t>(vocab));
  std::mt19937 rng(7);
  std::vector<int32_t> tokens = {0, 1, 2};
  for (size_t i = 0; i < steps; ++i) tokens.push_back(sample_token(sampler, random_logits(rng, vocab), {tokens, 3}));
  return {tokens.begin() + 3, tokens.end()};
}

TEST(Seed, SameSeedSameTokensDifferentSeedDifferentTokens) {
  SamplingParams params;
  params.temperature = 0.9f;
  params.top_k = 50;
  params.top_p = 0.95f;
  params.repetition_penalty = 1.1f;
  params.seed = 1234;
  const std::vector<int32_t> first = generate(params, 1000, 200);
  EXPECT_EQ(first, generate(params, 1000, 200));
  params.seed = 1235;
  const std::vector<int32_t> other = generate(params, 1000, 200);
  size_t differing = 0;
  for (size_t i = 0; i < first.size(); ++i) differing += first[i] != other[i];
  EXPECT_GT(differing, 100u);  // the rows are wide; two seeds agree on a step only by chance
}

TEST(Seed, GeneratorMatchesPublishedValues) {
  // SplitMix64 from seed 1234567: the sequence listed on Rosetta Code's SplitMix64 task.
  uint64_t state = 1234567;
  for (const uint64_t expected : {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull,
                                  4593380528125082431ull, 16408922859458223821ull}) {
    EXPECT_EQ(sampling::splitmix64_next(state), expected);
  }
  // SFC64 against numpy 1.24's SFC64 with state [a, b, c, 1] from SplitMix64(seed) and 12 outputs
  // discarded (random_raw(12)): then random_raw(4), or, from a fresh state, Generator.random(3)
  // (numpy's double is also the top 53 bits times 2^-53).
  sampling::Sfc64State s = sampling::sfc64_seed(42);
  for (const uint64_t expected : {8377922125004573443ull, 14048946411119614406ull, 419170134982702187ull,
                                  5913407291108205701ull}) {
    EXPECT_EQ(sampling::sfc64_next(s), expected);
  }
  s = sampling::sfc64_seed(0);
  EXPECT_EQ(sampling::sfc64_next(s), 16931061118487593148ull);
  s = sampling::sfc64_seed(0);
  for (const double expected : {0x1.d5ee6cc3ebc30p-1, 0x1.79209c24c5bc2p-1, 0x1.94e2c1e0c2ba0p-6}) {
    EXPECT_EQ(sampling::sfc64_next_double(s), expected);
  }
}

TEST(Seed, ExpMatchesLibm) {
  // Float precision, like transformers' float32 softmax.
  double worst = 0;
  for (float x = -86.9f; x <= 0.0f; x += 0.000731f) {
    worst = std::max(worst, std::abs(sampling::exp_nonpositive(x) / std::exp(static_cast<double>(x)) - 1.0));
  }
  EXPECT_LT(worst, 4e-7);
  EXPECT_EQ(sampling::exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(sampling::exp_nonpositive(-100.0f), 0.0f);
  EXPECT_EQ(sampling::exp_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
}

TEST(Draw, IsTheInverseCdfOfTheSeededUniformInAscendingIdOrder) {
  // Replays the generator here and inverts the CDF with std::exp in double: every draw must land
  // where the uniform says (a boundary is within rounding only with probability ~1e-15).
  const std::vector<float> logits = {0.3f, -1.0f, 2.0f, kNegInf, 0.0f, 1.5f};
  SamplingParams params;
  params.seed = 99;
  Sampler sampler = make_sampler(params, static_cast<int32_t>(logits.size()));
  std::vector<double> probs = testing_sampling::softmax({0.3, -1.0, 2.0, -INFINITY, 0.0, 1.5});
  sampling::Sfc64State replay = sampling::sfc64_seed(99);
  for (int i = 0; i < 500; ++i) {
    const double u = sampling::sfc64_next_double(replay);
    int32_t expected = 0;
    double cumulative = 0;
    for (size_t id = 0; id < probs.size(); ++id) {
      cumulative += probs[id];
      if (probs[id] > 0) expected = static_cast<int32_t>(id);
      if (cumulative > u) break;
    }
    ASSERT_EQ(sample_token(sampler, logits), expected) << "draw " << i << " u " << u;
  }
}

// Pearson's chi-square over `draws` samples against `expected` probabilities; tokens with
// probability 0 must never be drawn.
double chi_square(const SamplingParams& params, const std::vector<float>& logits, const std::vector<double>& expected,
                  int draws) {
  Sampler sampler = make_sampler(params, static_cast<int32_t>(logits.size()));
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts[static_cast<size_t>(sample_token(sampler, logits))];
  double statistic = 0;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (expected[id] == 0) {
      EXPECT_EQ(counts[id], 0) << "token " << id << " was filtered out";
      continue;
    }
    const double mean = expected[id] * draws;
    statistic += (counts[id] - mean) * (counts[id] - mean) / mean;
  }
  return statistic;
}

// 99.9% quantile of chi-square with `df` degrees of freedom (standard tables). The seeds are fixed,
// so the tests are deterministic; a wrong distribution (say, temperature left out) scores in the
// hundreds over 20000 draws.
double chi_square_999(size_t df) {
  constexpr double kQuantiles[] = {10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};
  EXPECT_GE(df, 1u);
  EXPECT_LE(df, 9u);
  return kQuantiles[std::min<size_t>(std::max<size_t>(df, 1), 9) - 1];
}

// softmax over the tokens `keep` marks, 0 elsewhere.
std::vector<double> restricted_softmax(const std::vector<double>& logits, const std::vector<bool>& keep) {
  std::vector<double> masked;
  for (size_t i = 0; i < logits.size(); ++i) masked.push_back(keep[i] ? logits[i] : -INFINITY);
  return testing_sampling::softmax(masked);
}

size_t count_kept(const std::vector<bool>& keep) { return static_cast<size_t>(std::count(keep.begin(), keep.end(), true)); }

TEST(Draw, FrequenciesMatchTheFilteredDistribution) {
  const std::vector<float> logits = {1.0f, 2.5f, 0.2f, 2.0f, -1.0f, 1.8f, 0.0f, 3.0f, -0.5f, 1.2f};
  SamplingParams params;
  params.seed = 2024;
  params.temperature = 0.8f;
  params.top_k = 6;
  params.top_p = 0.9f;
  // Expected, worked out independently: logits / 0.8; top-6 keeps ids 7 1 3 5 9 0 (3.75 3.125 2.5
  // 2.25 1.5 1.25), whose probabilities are 0.45 0.24 0.13 0.10 0.05 0.04; top-p 0.9 stops after
  // the fourth (mass before the fifth is 0.92).
  std::vector<double> scaled;
  for (const float l : logits) scaled.push_back(static_cast<double>(l / 0.8f));
  const std::vector<bool> in_top_k = testing_sampling::hf_top_k(scaled, 6);
  std::vector<double> after_k;
  for (size_t i = 0; i < scaled.size(); ++i) after_k.push_back(in_top_k[i] ? scaled[i] : -INFINITY);
  const std::vector<bool> in_top_p = testing_sampling::hf_top_p(after_k, 0.9);
  std::vector<bool> keep;
  for (size_t i = 0; i < scaled.size(); ++i) keep.push_back(in_top_k[i] && in_top_p[i]);
  ASSERT_EQ(keep, (std::vector<bool>{false, true, false, true, false, true, false, true, false, false}));
  EXPECT_LT(chi_square(params, logits, restricted_softmax(scaled, keep), 20000), chi_square_999(3));
}

TEST(Draw, FrequenciesWithMinPAndTypicalP) {
  const std::vector<float> logits = {0.5f, 1.5f, -0.2f, 1.0f, 0.9f, -2.0f, 0.1f};
  const std::vector<double> wide(logits.begin(), logits.end());
  SamplingParams params;
  params.seed = 5;
  params.min_p = 0.3f;
  // p / p_max = exp(logit - 1.5): 0.37 1 0.18 0.61 0.55 0.03 0.25 -> ids 0 1 3 4 reach 0.3.
  const std::vector<bool> min_p_keep = testing_sampling::hf_min_p(wide, 0.3);
  ASSERT_EQ(min_p_keep, (std::vector<bool>{true, true, false, true, true, false, false}));
  EXPECT_LT(chi_square(params, logits, restricted_softmax(wide, min_p_keep), 20000), chi_square_999(3));

  params = SamplingParams{};
  params.seed = 6;
  params.typical_p = 0.6f;
  const std::vector<bool> typical_keep = testing_sampling::hf_typical_p(wide, 0.6);
  ASSERT_GE(count_kept(typical_keep), 2u);
  ASSERT_LT(count_kept(typical_keep), logits.size());
  EXPECT_LT(chi_square(params, logits, restricted_softmax(wide, typical_keep), 20000),
            chi_square_999(count_kept(typical_keep) - 1));
}

double log_softmax_of(const std::vector<double>& logits, size_t id) {
  double max = -INFINITY;
  for (const double l : logits) max = std::max(max, l);
  double total = 0;
  for (const double l : logits) total += std::exp(l - max);
  return logits[id] - max - std::log(total);
}

TEST(Logprobs, RawByDefault) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.5f};
  SamplingParams params;
  params.greedy = true;
  params.repetition_penalty = 10.0f;  // moves the argmax, but raw logprobs ignore it
  params.logprobs = true;
  params.top_logprobs = 2;
  Sampler sampler = make_sampler(params, 4);
  const std::vector<int32_t> history = {2};
  auto result = sampler.sample(logits, {history, 1});
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  EXPECT_EQ(result->token, 1);  // 3.0 / 10 = 0.3 < 2.0
  const std::vector<double> raw = {1.0, 2.0, 3.0, 0.5};
  ASSERT_TRUE(result->logprob.has_value());
  EXPECT_NEAR(*result->logprob, log_softmax_of(raw, 1), 1e-6);
  ASSERT_EQ(result->top_logprobs.size(), 2u);
  EXPECT_EQ(result->top_logprobs[0].token, 2);
  EXPECT_NEAR(result->top_logprobs[0].logprob, log_softmax_of(raw, 2), 1e-6);
  EXPECT_EQ(result->top_logprobs[1].token, 1);
  EXPECT_NEAR(result->top_logprobs[1].logprob, log_softmax_of(raw, 1), 1e-6);
}

TEST(Logprobs, ProcessedIsTheDistributionDrawnFrom) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 3.0f};
  SamplingParams params;
  params.seed = 3;
  params.temperature = 0.5f;
  params.top_k = 2;
  params.logprobs = true;
  params.top_logprobs = 4;
  params.logprob_source = LogprobSource::kProcessed;
  Sampler sampler = make_sampler(params, 4);
  auto result = sampler.sample(logits, {});
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  // Top-2 of {1,2,3,3} keeps the two 3s; after temperature both are 6: log(1/2) each.
  ASSERT_TRUE(result->token == 2 || result->token == 3);
  EXPECT_NEAR(*result->logprob, std::log(0.5), 1e-6);
  ASSERT_EQ(result->top_logprobs.size(), 4u);
  EXPECT_EQ(result->top_logprobs[0].token, 2);  // tie: lower id first
  EXPECT_EQ(result->top_logprobs[1].token, 3);
  EXPECT_EQ(result->top_logprobs[2].token, 0);  // filtered tokens: -inf, lower id first
  EXPECT_EQ(result->top_logprobs[2].logprob, kNegInf);
  EXPECT_EQ(result->top_logprobs[3].logprob, kNegInf);
}

TEST(Logprobs, TopLogprobsBeyondTheVocabularyAreClamped) {
  SamplingParams params;
  params.greedy = true;
  params.logprobs = true;
  params.top_logprobs = 20;
  Sampler sampler = make_sampler(params, 3);
  auto result = sampler.sample(std::vector<float>{0.0f, 1.0f, 2.0f}, {});
  ASSERT_TRUE(result.is_ok());
  EXPECT_EQ(result->top_logprobs.size(), 3u);
}

// A user processor: bans even tokens.
class BanEven final : public LogitProcessor {
 public:
  std::string_view name() const override { return "ban_even"; }
  Status apply(const TokenHistory&, Candidates& candidates) override {
    candidates.keep_if([](int32_t token, float) { return token % 2 == 1; });
    return Status::ok();
  }
};

class AlwaysFails final : public LogitProcessor {
 public:
  std::string_view name() const override { return "grammar"; }
  Status apply(const TokenHistory&, Candidates&) override { return OG_ERROR("no token fits the grammar"); }
};

TEST(CustomProcessor, RunsWhereItIsInserted) {
  SamplingParams params;
  params.seed = 11;
  params.top_k = 3;
  auto chain = make_logit_processors(params);
  ASSERT_TRUE(chain.is_ok());
  chain->insert(chain->begin(), std::make_unique<BanEven>());  // before top-k: top-3 of odd ids
  auto sampler = Sampler::create(params, 8, std::move(chain).value());
  ASSERT_TRUE(sampler.is_ok()) << sampler.status().message();
  // Odd ids 1 3 5 7 have logits 1 2 3 4, so top-3 after the ban keeps ids 7 5 3.
  const std::vector<float> logits = {9, 1, 8, 2, 7, 3, 6, 4};
  std::map<int32_t, int> seen;
  for (int i = 0; i < 300; ++i) ++seen[sample_token(*sampler, logits)];
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_TRUE(seen.count(7) && seen.count(5) && seen.count(3));
}

TEST(CustomProcessor, ErrorsNameTheProcessor) {
  SamplingParams params;
  LogitProcessorChain chain;
  chain.push_back(std::make_unique<AlwaysFails>());
  auto sampler = Sampler::create(params, 2, std::move(chain));
  ASSERT_TRUE(sampler.is_ok());
  auto result = sampler->sample(std::vector<float>{0.0f, 1.0f}, {});
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().message(), "sampling: grammar: no token fits the grammar");
}

TEST(LargeVocabulary, SamplesFrom152kRowsWithEveryProcessor) {
  // A Qwen-sized vocabulary through the full chain: the draw must respect every filter.
  constexpr size_t kVocab = 151936;
  std::mt19937 rng(1);
  std::vector<float> logits = random_logits(rng, kVocab);
  SamplingParams params;
  params.seed = 8;
  params.temperature = 0.7f;
  params.top_k = 40;
  params.top_p = 0.9f;
  params.min_p = 0.05f;
  params.repetition_penalty = 1.2f;
  params.frequency_penalty = 0.3f;
  params.no_repeat_ngram_size = 3;
  Sampler sampler = make_sampler(params, static_cast<int32_t>(kVocab));
  std::vector<int32_t> tokens(2000);
  for (int32_t& token : tokens) token = std::uniform_int_distribution<int32_t>(0, kVocab - 1)(rng);
  const std::vector<float> processed = testing_sampling::process(params, logits, {tokens, 1000});
  for (int i = 0; i < 50; ++i) {
    const int32_t token = sample_token(sampler, logits, {tokens, 1000});
    ASSERT_GE(token, 0);
    ASSERT_NE(processed[static_cast<size_t>(token)], kNegInf) << "drew filtered token " << token;
  }
}

TEST(RandomConfigurations, DrawOnlyTokensTheChainKept) {
  // Random parameters, rows with banned (-inf) entries and random histories: every draw must be a
  // token still in play after the same chain, and nothing may fail.
  std::mt19937 rng(77);
  const auto uniform = [&rng](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    const size_t vocab = std::uniform_int_distribution<size_t>(1, 3000)(rng);
    std::vector<float> logits = random_logits(rng, vocab);
    for (float& l : logits) {
      if (rng() % 10 == 0) l = kNegInf;
    }
    logits[rng() % vocab] = 1.0f;  // at least one token in play
    std::vector<int32_t> history(rng() % 64);
    for (int32_t& token : history) token = static_cast<int32_t>(rng() % vocab);
    SamplingParams params;
    params.seed = trial;
    params.temperature = rng() % 4 == 0 ? 0.0f : uniform(0.05f, 2.0f);
    params.top_k = rng() % 2 ? static_cast<int32_t>(rng() % 100) : 0;
    params.top_p = rng() % 2 ? uniform(0.05f, 1.0f) : 1.0f;
    params.min_p = rng() % 3 == 0 ? uniform(0.0f, 1.0f) : 0.0f;
    params.typical_p = rng() % 3 == 0 ? uniform(0.05f, 1.0f) : 1.0f;
    params.repetition_penalty = uniform(0.5f, 2.0f);
    params.frequency_penalty = uniform(-1.0f, 1.0f);
    params.presence_penalty = uniform(-1.0f, 1.0f);
    params.no_repeat_ngram_size = static_cast<int32_t>(rng() % 4);
    params.logprobs = rng() % 2;
    params.top_logprobs = params.logprobs ? static_cast<int32_t>(rng() % 25) : 0;
    const TokenHistory at = {history, history.size() / 2};
    const std::vector<float> processed = testing_sampling::process(params, logits, at);
    Sampler sampler = make_sampler(params, static_cast<int32_t>(vocab));
    auto result = sampler.sample(logits, at);
    if (std::all_of(processed.begin(), processed.end(), [](float l) { return l == kNegInf; })) {
      EXPECT_FALSE(result.is_ok()) << "trial " << trial;  // e.g. n-gram bans took every token
      continue;
    }
    ASSERT_TRUE(result.is_ok()) << "trial " << trial << ": " << result.status().message();
    ASSERT_NE(processed[static_cast<size_t>(result->token)], kNegInf) << "trial " << trial;
    EXPECT_EQ(result->top_logprobs.size(), std::min<size_t>(static_cast<size_t>(params.top_logprobs), vocab));
  }
}

}  // namespace
}  // namespace onnx_genai
