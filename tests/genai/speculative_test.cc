// Speculative decoding (GeneratorParams::speculative, src/genai/speculative.h):
//   - greedy: the tokens, text and finish reason equal plain greedy decoding's, for prompt lookup
//     and a draft model, several draft lengths, the package's processors (repetition penalty,
//     no-repeat n-grams) or none, length limits and stop strings, on the default model (shared
//     KV buffer) and a standard-op model (concatenated KV cache, rewound by copying);
//   - rollback: after a speculative run the cache gives the next step the logits a plain run's
//     cache gives;
//   - sampling: Sampler::sample_given_draft's tokens follow the processed distribution whatever
//     the draft, certain or sampled from another distribution (chi-square), and the test has the
//     power to see the wrong residual; a draft model sampling as the model samples has its drafts
//     accepted and repeats its tokens for a seed;
//   - parameter errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using genai::SpeculativeMethod;

const fs::path kPackage = fs::path(testing::source_dir()) / "models" / "debian-prose-11m";

// One thread: with more, a plain decode step splits long key ranges across threads (flash
// decoding) while a verify step of several rows does not, and the two round differently, so a
// near-tie can go either way (as it can between runs with 1 and 2 threads).
std::unique_ptr<genai::Model> load_or_fail(const fs::path& dir) {
  genai::ModelOptions options;
  options.num_threads = 1;
  auto model = genai::Model::load(dir.string(), options);
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  return model.is_ok() ? std::move(*model) : nullptr;
}

// Paragraphs of the default model's validation text, cut to their first `words` words.
std::vector<std::string> validation_prompts(size_t count, size_t words) {
  std::ifstream in(kPackage / "valid.txt");
  std::vector<std::string> prompts;
  std::string line;
  while (prompts.size() < count && std::getline(in, line)) {
    std::istringstream split(line);
    std::string word, prompt;
    for (size_t w = 0; w < words && split >> word; ++w) prompt += (w ? " " : "") + word;
    if (!prompt.empty()) prompts.push_back(prompt);
  }
  return prompts;
}

using testing::generate;
using Outcome = testing::GenerationOutcome;

class SpeculativeGreedy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = load_or_fail(kPackage).release(); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_NE(model_, nullptr); }

  // Every prompt with and without `speculative`: the same tokens, text and finish reason.
  static void expect_same_as_plain(genai::GeneratorParams params, const genai::SpeculativeParams& speculative,
                                   const std::vector<std::string>& prompts, int64_t* accepted = nullptr,
                                   bool drafts_expected = true) {
    int64_t steps = 0;
    for (const std::string& prompt : prompts) {
      auto ids = model_->encode(prompt);
      ASSERT_TRUE(ids.is_ok()) << ids.status().message();
      params.prompts = {*ids};
      params.speculative = {};
      const Outcome plain = generate(*model_, params);
      params.speculative = speculative;
      const Outcome fast = generate(*model_, params);
      EXPECT_EQ(fast.tokens, plain.tokens) << prompt;
      EXPECT_EQ(fast.text, plain.text) << prompt;
      EXPECT_EQ(fast.reason, plain.reason) << prompt;
      EXPECT_EQ(fast.stats.decode_tokens, plain.stats.decode_tokens) << prompt;
      steps += fast.stats.speculative_steps;
      if (accepted != nullptr) *accepted += fast.stats.accepted_tokens;
    }
    EXPECT_TRUE(!drafts_expected || steps > 0) << "no draft was verified";
  }

  static genai::Model* model_;
};

genai::Model* SpeculativeGreedy::model_ = nullptr;

genai::SpeculativeParams ngram(int32_t k) {
  genai::SpeculativeParams p;
  p.method = SpeculativeMethod::kNgram;
  p.draft_tokens = k;
  return p;
}

TEST_F(SpeculativeGreedy, PromptLookupGivesThePlainTokensAtEveryDraftLength) {
  genai::GeneratorParams params = model_->default_params();  // repetition penalty 1.2, no repeated 3-grams
  params.sampling.greedy = true;
  params.max_new_tokens = 48;
  int64_t accepted = 0;
  for (const int32_t k : {1, 3, 8}) expect_same_as_plain(params, ngram(k), validation_prompts(6, 40), &accepted);
  // Without the package's processors the model repeats itself, and the lookup pays.
  params.sampling = SamplingParams{};
  params.sampling.greedy = true;
  genai::SpeculativeParams fixed = ngram(4);
  fixed.adaptive = false;
  expect_same_as_plain(params, fixed, validation_prompts(6, 40), &accepted);
  EXPECT_GT(accepted, 0);
}

TEST_F(SpeculativeGreedy, ADraftModelGivesThePlainTokens) {
  // The model as its own draft: most drafts hold, and the rest are rejected where its single-row
  // and multi-row kernels round differently, which exercises the rollback.
  genai::SpeculativeParams draft;
  draft.method = SpeculativeMethod::kDraftModel;
  draft.draft_model = model_;
  genai::GeneratorParams params = model_->default_params();
  params.sampling.greedy = true;
  params.max_new_tokens = 40;
  int64_t accepted = 0;
  for (const int32_t k : {2, 6}) {
    draft.draft_tokens = k;
    expect_same_as_plain(params, draft, validation_prompts(5, 30), &accepted);
  }
  EXPECT_GT(accepted, 0);
}

TEST_F(SpeculativeGreedy, UnderAConstraintTheTokensStay) {
  // The grammar masks every verified position, so a draft it refuses is rejected there.
  genai::GeneratorParams params = model_->default_params();
  params.sampling.greedy = true;
  params.max_new_tokens = 48;
  params.constraint = ConstraintSpec{ConstraintKind::kJsonSchema,
                                     R"({"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array",)"
                                     R"("items":{"type":"string"}}},"required":["name","tags"]})"};
  genai::SpeculativeParams draft;
  draft.method = SpeculativeMethod::kDraftModel;
  draft.draft_model = model_;
  draft.draft_tokens = 4;
  int64_t accepted = 0;
  expect_same_as_plain(params, ngram(4), validation_prompts(4, 20), &accepted);
  expect_same_as_plain(params, draft, validation_prompts(4, 20), &accepted);
  EXPECT_GT(accepted, 0);
}

TEST_F(SpeculativeGreedy, LimitsAndStopStringsEndWhereThePlainRunEnds) {
  genai::GeneratorParams params = model_->default_params();
  params.sampling.greedy = true;
  for (const int64_t limit : {1, 2, 7, 33}) {
    params.max_new_tokens = limit;
    expect_same_as_plain(params, ngram(8), validation_prompts(3, 25), nullptr, limit > 2);
  }
  // A stop string from the plain continuation itself, met in the middle of a draft.
  params.max_new_tokens = 60;
  auto ids = model_->encode("And God said unto Moses");
  ASSERT_TRUE(ids.is_ok());
  params.prompts = {*ids};
  const Outcome plain = generate(*model_, params);
  ASSERT_GT(plain.text.size(), 12u);
  params.stop_strings = {plain.text.substr(8, 4)};
  expect_same_as_plain(params, ngram(8), {"And God said unto Moses"});
  params.max_length = static_cast<int64_t>(ids->size()) + 5;
  params.stop_strings.clear();
  params.max_new_tokens = 0;
  expect_same_as_plain(params, ngram(8), {"And God said unto Moses"});
}

// Logits the sampler is given, captured through SamplingParams::first_processor.
class CaptureLogits final : public LogitProcessor {
 public:
  explicit CaptureLogits(std::vector<std::vector<float>>* rows) : rows_(rows) {}
  std::string_view name() const override { return "capture"; }
  Status apply(const TokenHistory&, Candidates& candidates) override {
    rows_->emplace_back(candidates.logits().begin(), candidates.logits().end());
    return Status::ok();
  }

 private:
  std::vector<std::vector<float>>* rows_;
};

TEST_F(SpeculativeGreedy, TheRewoundCacheGivesThePlainCachesNextLogits) {
  auto ids = model_->encode("It were not best that we should all think alike; it is difference of opinion");
  ASSERT_TRUE(ids.is_ok());
  std::vector<std::vector<float>> next[2];
  int64_t rejected = 0;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::vector<float>> rows;
    genai::GeneratorParams params;
    params.sampling.greedy = true;
    params.sampling.first_processor = [&rows] { return std::make_unique<CaptureLogits>(&rows); };
    params.max_new_tokens = 40;
    params.prompts = {*ids};
    if (i == 1) params.speculative = ngram(8);
    auto g = genai::Generator::create(*model_, params);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    ASSERT_TRUE((*g)->generate(nullptr).is_ok());
    rejected = (*g)->stats().drafted_tokens - (*g)->stats().accepted_tokens;
    // Two tokens of the prompt again: a plain two-token step over what the cache holds.
    ASSERT_TRUE((*g)->append_tokens(std::span(*ids).first(2)).is_ok());
    rows.clear();
    ASSERT_TRUE((*g)->generate_next().is_ok());
    next[i] = rows;
  }
  EXPECT_GT(rejected, 0) << "no draft token was rejected: nothing was rolled back";
  ASSERT_EQ(next[0].size(), 1u);
  ASSERT_EQ(next[1].size(), 1u);
  EXPECT_EQ(next[0][0], next[1][0]);
}

TEST(SpeculativeStandardOps, AConcatenatedCacheIsRewoundByCopying) {
  testing::ScopedTempDir scratch;
  const testing::ParityFixture fixture{
      "llama300_standard", {"--preset", "llama", "--style", "standard", "--set", "vocab_size=300"}, {}, 0, ""};
  const fs::path dir = testing::build_model_or_fail(fixture, scratch.path());
  ASSERT_FALSE(dir.empty());
  auto model = load_or_fail(dir);
  ASSERT_TRUE(model);
  genai::GeneratorParams params;
  params.sampling.greedy = true;
  params.max_new_tokens = 40;
  params.ignore_eos = true;
  for (const std::vector<int32_t>& prompt : {std::vector<int32_t>{5, 17, 250, 3, 99, 17, 250}, std::vector<int32_t>{1}}) {
    params.prompts = {prompt};
    params.speculative = {};
    const Outcome plain = generate(*model, params);
    for (const bool draft_model : {false, true}) {
      params.speculative = ngram(5);
      if (draft_model) {
        params.speculative.method = SpeculativeMethod::kDraftModel;
        params.speculative.draft_model = model.get();
      }
      const Outcome fast = generate(*model, params);
      EXPECT_EQ(fast.tokens, plain.tokens) << "draft model " << draft_model;
      EXPECT_GT(fast.stats.speculative_steps, 0);
    }
  }
}

// Pearson's chi-square of `counts` against probabilities `expected` (cells with none expected
// must be empty: they count as infinite).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& expected, int64_t draws) {
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * static_cast<double>(draws);
    if (e == 0) {
      if (counts[i] != 0) return INFINITY;
      continue;
    }
    chi2 += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return chi2;
}

// The distribution temperature 0.8 and top-k 6 leave of `logits`, in double.
std::vector<double> top6_at_0_8(const std::vector<float>& logits) {
  std::vector<float> sorted = logits;
  std::sort(sorted.rbegin(), sorted.rend());
  std::vector<double> p(logits.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] >= sorted[5]) total += p[i] = std::exp(static_cast<double>(logits[i]) / 0.8);
  }
  for (double& x : p) x /= total;
  return p;
}

TEST(SpeculativeSampling, TokensGivenADraftFollowTheProcessedDistribution) {
  // Eight tokens; temperature 0.8 and top-k 6 leave six in play with known probabilities.
  const std::vector<float> logits = {1.0f, 2.5f, 0.2f, 1.7f, -1.0f, 2.0f, 0.9f, -3.0f};
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 6;
  params.seed = 7;
  const std::vector<double> p = top6_at_0_8(logits);
  constexpr int64_t kDraws = 60000;
  // 7 degrees of freedom (empty cells add nothing): P(chi2 > 24.3) = 0.001.
  constexpr double kCritical = 24.3;
  const std::vector<int32_t> history_tokens = {1, 2};
  for (const int32_t draft : {1, 3, 4, 7}) {  // likely, middling, filtered out by top-k, and the least
    auto sampler = Sampler::create(params, static_cast<int32_t>(logits.size()));
    ASSERT_TRUE(sampler.is_ok()) << sampler.status().message();
    std::vector<int64_t> counts(logits.size(), 0);
    for (int64_t n = 0; n < kDraws; ++n) {
      auto token = sampler->sample_given_draft(logits, TokenHistory{history_tokens, 1}, draft);
      ASSERT_TRUE(token.is_ok()) << token.status().message();
      ++counts[static_cast<size_t>(token->token)];
    }
    EXPECT_LT(chi_square(counts, p, kDraws), kCritical) << "draft " << draft;
    // Power: had a rejection drawn from p itself rather than the residual, the draft would come
    // out with probability p + (1 - p) p; the counts must be far from that.
    std::vector<double> wrong = p;
    const auto d = static_cast<size_t>(draft);
    for (size_t i = 0; i < wrong.size(); ++i) wrong[i] = (i == d ? p[d] : 0.0) + (1 - p[d]) * p[i];
    if (p[d] > 0.01) {
      EXPECT_GT(chi_square(counts, wrong, kDraws), 10 * kCritical) << "draft " << draft;
    }
  }
}

TEST(SpeculativeSampling, TokensGivenASampledDraftFollowTheProcessedDistribution) {
  const std::vector<float> logits = {1.0f, 2.5f, 0.2f, 1.7f, -1.0f, 2.0f, 0.9f, -3.0f};
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 6;
  params.seed = 11;
  const std::vector<double> p = top6_at_0_8(logits);
  // Draft distributions: flat over every token (mass where top-k left p none), peaked away from
  // p's mode, and p itself (every draft kept).
  const std::vector<std::vector<float>> drafts = {
      {0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f},
      {0.02f, 0.05f, 0.6f, 0.03f, 0.2f, 0.05f, 0.03f, 0.02f},
      std::vector<float>(p.begin(), p.end())};
  constexpr int64_t kDraws = 60000;
  constexpr double kCritical = 24.3;  // 7 degrees of freedom: P(chi2 > 24.3) = 0.001
  const std::vector<int32_t> history_tokens = {1, 2};
  for (size_t d = 0; d < drafts.size(); ++d) {
    const std::vector<float>& q = drafts[d];
    auto sampler = Sampler::create(params, static_cast<int32_t>(logits.size()));
    ASSERT_TRUE(sampler.is_ok()) << sampler.status().message();
    std::mt19937_64 rng(1234 + d);
    std::discrete_distribution<int32_t> draw_q(q.begin(), q.end());
    std::vector<int64_t> counts(logits.size(), 0);
    int64_t kept = 0;
    for (int64_t n = 0; n < kDraws; ++n) {
      const int32_t draft = draw_q(rng);
      auto token = sampler->sample_given_draft(logits, TokenHistory{history_tokens, 1}, draft, q);
      ASSERT_TRUE(token.is_ok()) << token.status().message();
      ++counts[static_cast<size_t>(token->token)];
      kept += token->token == draft;
    }
    EXPECT_LT(chi_square(counts, p, kDraws), kCritical) << "draft distribution " << d;
    // A draft is kept with probability sum(min(p, q)) (a rejection never redraws it: the residual
    // is zero there), within five standard deviations.
    double overlap = 0;
    for (size_t i = 0; i < p.size(); ++i) overlap += std::min(p[i], static_cast<double>(q[i]));
    const double sd = std::sqrt(overlap * (1 - overlap) / kDraws);
    EXPECT_NEAR(static_cast<double>(kept) / kDraws, overlap, 5 * sd + 1e-6) << "draft distribution " << d;
    // Power: a rejection that drew from p instead of the residual gives q min(1, p/q) + (1 - overlap) p.
    std::vector<double> wrong(p.size());
    for (size_t i = 0; i < p.size(); ++i) wrong[i] = std::min(p[i], static_cast<double>(q[i])) + (1 - overlap) * p[i];
    if (overlap < 0.95) {
      EXPECT_GT(chi_square(counts, wrong, kDraws), 10 * kCritical) << "draft distribution " << d;
    }
  }
}

TEST(SpeculativeSampling, ASampledDraftOutsideItsDistributionIsAnError) {
  const std::vector<float> logits = {0.5f, 1.0f, 2.0f, -1.0f};
  SamplingParams params;
  params.seed = 3;
  auto sampler = Sampler::create(params, 4);
  ASSERT_TRUE(sampler.is_ok());
  const std::vector<int32_t> none;
  const std::vector<float> q = {0.5f, 0.5f, 0.0f, 0.0f};
  const auto error = [&](int32_t draft, std::span<const float> distribution) {
    auto token = sampler->sample_given_draft(logits, TokenHistory{none, 0}, draft, distribution);
    return token.is_ok() ? std::string() : token.status().message();
  };
  EXPECT_NE(error(2, q).find("drafted token 2 has no probability in the draft's distribution"), std::string::npos)
      << error(2, q);
  EXPECT_NE(error(0, std::span(q).first(3)).find("the draft's distribution has 3 entries, expected the vocabulary size 4"),
            std::string::npos);
  EXPECT_NE(error(4, {}).find("drafted token 4 is outside the vocabulary [0, 4)"), std::string::npos) << error(4, {});
}

TEST_F(SpeculativeGreedy, ASampledDraftModelIsAcceptedAndRepeatsForASeed) {
  // The model as its own draft, sampling as the model samples: q is p up to the rounding of its
  // single-row steps, so nearly every draft is kept, and a seed gives the same tokens every run.
  genai::SpeculativeParams draft;
  draft.method = SpeculativeMethod::kDraftModel;
  draft.draft_model = model_;
  draft.draft_tokens = 4;
  genai::GeneratorParams params = model_->default_params();
  params.sampling.greedy = false;
  params.sampling.temperature = 0.9f;
  params.sampling.top_k = 50;
  params.sampling.seed = 42;
  params.max_new_tokens = 40;
  params.ignore_eos = true;
  params.speculative = draft;
  int64_t drafted = 0, accepted = 0;
  for (const std::string& prompt : validation_prompts(4, 30)) {
    auto ids = model_->encode(prompt);
    ASSERT_TRUE(ids.is_ok()) << ids.status().message();
    params.prompts = {*ids};
    const Outcome first = generate(*model_, params);
    const Outcome again = generate(*model_, params);
    EXPECT_EQ(first.tokens, again.tokens) << prompt;
    EXPECT_EQ(first.tokens.size(), ids->size() + 40) << prompt;
    drafted += first.stats.drafted_tokens;
    accepted += first.stats.accepted_tokens;
  }
  ASSERT_GT(drafted, 0);
  EXPECT_GT(static_cast<double>(accepted), 0.9 * static_cast<double>(drafted));
}

TEST(SpeculativeSampling, GreedyGivenADraftIsTheArgmax) {
  const std::vector<float> logits = {0.5f, 3.0f, 3.0f, -1.0f};
  SamplingParams params;
  params.greedy = true;
  auto sampler = Sampler::create(params, 4);
  ASSERT_TRUE(sampler.is_ok());
  const std::vector<int32_t> none;
  for (const int32_t draft : {0, 1, 2, 3}) {
    auto token = sampler->sample_given_draft(logits, TokenHistory{none, 0}, draft);
    ASSERT_TRUE(token.is_ok());
    EXPECT_EQ(token->token, 1);  // ties to the lowest id, the draft notwithstanding
  }
}

TEST_F(SpeculativeGreedy, BadParametersAreErrorsNamingWhatIsWrong) {
  auto ids = model_->encode("Hello");
  ASSERT_TRUE(ids.is_ok());
  const auto error = [&](genai::GeneratorParams params) {
    if (params.prompts.empty()) params.prompts = {*ids};
    auto g = genai::Generator::create(*model_, params);
    return g.is_ok() ? std::string() : g.status().message();
  };
  genai::GeneratorParams params;
  params.speculative = ngram(0);
  EXPECT_NE(error(params).find("draft_tokens must be in [1, 15], got 0"), std::string::npos) << error(params);
  params.speculative = ngram(16);
  EXPECT_NE(error(params).find("got 16"), std::string::npos);
  params.speculative = ngram(4);
  params.speculative.ngram_min = 3;
  params.speculative.ngram_max = 2;
  EXPECT_NE(error(params).find("ngram_min <= ngram_max"), std::string::npos) << error(params);
  params.speculative = ngram(4);
  params.prompts = {*ids, *ids};
  EXPECT_NE(error(params).find("speculative decoding takes one prompt"), std::string::npos) << error(params);
  params.prompts = {};
  params.sampling.greedy = true;
  params.beam.num_beams = 2;
  EXPECT_NE(error(params).find("without beam search"), std::string::npos) << error(params);
  params.beam = {};
  params.speculative.method = SpeculativeMethod::kDraftModel;
  EXPECT_NE(error(params).find("needs a draft model"), std::string::npos) << error(params);
  testing::ScopedTempDir scratch;
  const testing::ParityFixture fixture{"llama300", {"--preset", "llama", "--style", "genai", "--set", "vocab_size=300"}, {}, 0, ""};
  const fs::path dir = testing::build_model_or_fail(fixture, scratch.path());
  auto other = load_or_fail(dir);
  ASSERT_TRUE(other);
  params.speculative.draft_model = other.get();
  EXPECT_NE(error(params).find("the draft model's vocabulary has 300 tokens, the model's 8192"), std::string::npos)
      << error(params);
}

}  // namespace
}  // namespace onnx_genai

namespace onnx_genai {
namespace {

// `generate --speculative`, as a user runs it: the text of a plain run, the drafting numbers on
// stderr with --stats, and one-line errors for a bad proposer or draft length.
TEST(SpeculativeCli, GenerateSpeculatesAndReportsItsDrafts) {
  testing::ScopedTempDir scratch;
  const std::string model = testing::shell_quote(kPackage.string());
  const std::string args = "generate " + model + " --prompt 'And God said unto Moses' --max-new-tokens 40 --threads 1";
  const testing::CommandResult plain = testing::run_cli(args, "", scratch.path());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const std::string& proposer : {std::string("ngram"), model}) {
    const testing::CommandResult fast =
        testing::run_cli(args + " --stats --speculative " + proposer + " --draft-tokens 5", "", scratch.path());
    ASSERT_EQ(fast.exit_code, 0) << fast.err;
    EXPECT_EQ(fast.out, plain.out) << proposer;
    EXPECT_NE(fast.err.find("verify steps"), std::string::npos) << fast.err;
    EXPECT_NE(fast.err.find("mean accepted length"), std::string::npos) << fast.err;
  }
  testing::expect_bad_input_result(testing::run_cli(args + " --speculative /no/such/draft", "", scratch.path()),
                                   "--speculative /no/such/draft", "--speculative draft model");
  testing::expect_bad_input_result(testing::run_cli(args + " --speculative ngram --draft-tokens 0", "", scratch.path()),
                                   "--draft-tokens 0", "--draft-tokens wants an integer in [1, 15]");
  testing::expect_bad_input_result(
      testing::run_cli(args + " --speculative ngram --num-beams 2", "", scratch.path()), "--num-beams 2",
      "speculative decoding takes one prompt, without beam search");
}

}  // namespace
}  // namespace onnx_genai
