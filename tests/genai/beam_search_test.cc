// Beam search (src/genai/beam_search.h) against Hugging Face transformers' algorithm as
// tests/oracle/beam_search_reference.mjs restates it, run over ONNX Runtime by
// tests/oracle/ort_beam_search.mjs: the same returned beams (tokens) in the same order, and the
// same scores within float tolerance, on
//   - the embedded default model (GroupQueryAttention, shared KV buffer, right padding; eos 0),
//     with its repetition penalty and no-repeat n-grams, and min_new_tokens;
//   - a tiny standard-op model (concatenated KV cache, left padding) given two eos ids;
// across num_beams 1/2/4, length_penalty != 1, early_stopping true/false/never,
// num_return_sequences 1 and > 1, and a batch of two prompts. num_beams 1 is greedy search (as in
// transformers), and transformers' algorithm run with one beam and no eos gives greedy's tokens.
// Also: parameter errors, and the calls refused during beam search.
#include <gtest/gtest.h>

#include <cmath>

#include "genai/beam_search.h"
#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ParityFixture;

const fs::path kPackage = fs::path(testing::source_dir()) / "models" / "debian-prose-11m";

struct Returned {
  std::vector<int32_t> tokens;  // generated
  double score = 0;
};

genai::GeneratorParams params_for(const json& c) {
  genai::GeneratorParams params;
  params.sampling.greedy = true;
  params.beam.num_beams = c.value("num_beams", 1);
  params.beam.length_penalty = c.value("length_penalty", 1.0f);
  params.beam.num_return_sequences = c.value("num_return_sequences", 1);
  const json early = c.value("early_stopping", json(false));
  params.beam.early_stopping = early.is_string() ? genai::EarlyStopping::kNever
                               : early.get<bool>() ? genai::EarlyStopping::kTrue
                                                   : genai::EarlyStopping::kHeuristic;
  params.max_new_tokens = c.at("max_new_tokens").get<int64_t>();
  params.min_new_tokens = c.value("min_new_tokens", 0);
  params.sampling.repetition_penalty = c.value("repetition_penalty", 1.0f);
  params.sampling.no_repeat_ngram_size = c.value("no_repeat_ngram_size", 0);
  params.ignore_eos = c.contains("eos") && c["eos"].empty();
  params.prompts = c.at("prompts").get<std::vector<std::vector<int32_t>>>();
  return params;
}

// Our returned sequences per prompt.
Result<std::vector<std::vector<Returned>>> run_ours(const genai::Model& model, const genai::GeneratorParams& params) {
  OG_ASSIGN_OR_RETURN(auto generator, genai::Generator::create(model, params));
  OG_RETURN_IF_ERROR(generator->generate(nullptr));
  const size_t per_prompt = generator->batch_size() / params.prompts.size();
  std::vector<std::vector<Returned>> out(params.prompts.size());
  for (size_t s = 0; s < generator->batch_size(); ++s) {
    const auto tokens = generator->tokens(s);
    out[s / per_prompt].push_back(
        {{tokens.begin() + static_cast<std::ptrdiff_t>(generator->prompt_length(s)), tokens.end()},
         generator->beam_score(s)});
  }
  return out;
}

// The oracle's results for `cases`, one node run.
Result<json> run_oracle(const fs::path& model_dir, const json& cases, const fs::path& scratch) {
  const std::string command = "node " + testing::shell_quote(testing::source_dir() + "/tests/oracle/ort_beam_search.mjs") +
                              " " + testing::shell_quote(model_dir.string()) + " --cases " +
                              testing::shell_quote(cases.dump());
  OG_ASSIGN_OR_RETURN(testing::CommandResult run, testing::run_command(command, scratch));
  if (run.exit_code != 0) return OG_ERROR("ort_beam_search.mjs failed: ", run.err);
  return json::parse(run.out).at("cases");
}

// Every case's beams equal, in order, and scores within `tolerance` (relative above 1).
void expect_oracle_beams(const genai::Model& model, const fs::path& dir, const json& cases, double tolerance) {
  testing::ScopedTempDir scratch;
  auto oracle = run_oracle(dir, cases, scratch.path());
  ASSERT_TRUE(oracle.is_ok()) << oracle.status().message();
  ASSERT_EQ(oracle->size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + cases[i].dump());
    genai::GeneratorParams params = params_for(cases[i]);
    auto ours = run_ours(model, params);
    ASSERT_TRUE(ours.is_ok()) << ours.status().message();
    const json& want = (*oracle)[i].at("sequences");
    ASSERT_EQ(want.size(), ours->size());
    for (size_t p = 0; p < ours->size(); ++p) {
      ASSERT_EQ(want[p].size(), (*ours)[p].size()) << "prompt " << p;
      for (size_t k = 0; k < want[p].size(); ++k) {
        const Returned& got = (*ours)[p][k];
        EXPECT_EQ(got.tokens, want[p][k].at("tokens").get<std::vector<int32_t>>()) << "prompt " << p << " beam " << k;
        // num_beams 1 is greedy search, which has no beam score.
        if (params.beam.num_beams == 1) continue;
        const double score = want[p][k].at("score").get<double>();
        EXPECT_NEAR(got.score, score, tolerance * std::max(1.0, std::abs(score))) << "prompt " << p << " beam " << k;
      }
    }
  }
}

// The default model's MatMulNBits run at accuracy level 4: this runtime and ONNX Runtime both
// quantize activations to int8, not identically, so logits differ in the third decimal and a
// sum of ten log-probs by up to ~0.5%. The cases are ones whose beams no near tie decides.
TEST(BeamSearchOracle, DefaultModel) {
  auto model = genai::Model::load(kPackage.string());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const auto encode = [&](const char* text) { return (*model)->encode(text).value(); };
  const std::vector<std::vector<int32_t>> batch = {encode("The Lord is my shepherd"), encode("In the beginning")};
  const json cases = json::array({
      {{"prompts", batch}, {"num_beams", 4}, {"max_new_tokens", 10}, {"num_return_sequences", 2},
       {"repetition_penalty", 1.2}, {"no_repeat_ngram_size", 3}},
      // transformers' beam loop with one beam and nothing ending early is greedy search; ours
      // runs num_beams 1 as greedy search. (Without a repetition penalty: greedy search applies
      // it to logits, beam search to log-probs.)
      {{"prompts", batch}, {"num_beams", 1}, {"max_new_tokens", 6}, {"eos", json::array()}, {"no_repeat_ngram_size", 3}},
  });
  expect_oracle_beams(**model, kPackage, cases, 1e-2);
}

// Float weights: the two runtimes' logits agree to float rounding, so everything must match.
TEST(BeamSearchOracle, TinyStandardModel) {
  testing::ScopedTempDir scratch;
  const ParityFixture fixture{"llama300_standard", {"--preset", "llama", "--style", "standard", "--set", "vocab_size=300"}, {}, 0, ""};
  const fs::path dir = testing::build_model_or_fail(fixture, scratch.path());
  ASSERT_FALSE(dir.empty());
  // Two eos ids the random model picks often, so hypotheses end at many lengths (and
  // transformers keeps 3 * num_beams continuations).
  json config = json::parse(std::ifstream(dir / "genai_config.json"));
  config["model"]["eos_token_id"] = {96, 6};
  std::ofstream(dir / "genai_config.json") << config.dump();
  auto model = genai::Model::load(dir.string());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const json batch = {{40, 75, 108, 111, 3, 260, 270}, {5, 6, 7}};
  const json one = {{40, 75, 108, 111, 3, 260, 270}};
  const json cases = json::array({
      // The three stopping rules on the same search, which they end differently (checked below).
      {{"prompts", batch}, {"num_beams", 2}, {"max_new_tokens", 16}, {"early_stopping", true}, {"num_return_sequences", 2}},
      {{"prompts", batch}, {"num_beams", 2}, {"max_new_tokens", 16}, {"early_stopping", false}, {"num_return_sequences", 2}},
      {{"prompts", batch}, {"num_beams", 2}, {"max_new_tokens", 16}, {"early_stopping", "never"}, {"num_return_sequences", 2}},
      {{"prompts", batch}, {"num_beams", 4}, {"max_new_tokens", 16}, {"early_stopping", "never"}, {"length_penalty", 2.0},
       {"num_return_sequences", 4}},
      {{"prompts", batch}, {"num_beams", 4}, {"max_new_tokens", 8}, {"length_penalty", 1.5}, {"num_return_sequences", 3}},
      {{"prompts", one}, {"num_beams", 4}, {"max_new_tokens", 10}, {"early_stopping", "never"}, {"length_penalty", 2.0},
       {"num_return_sequences", 4}, {"min_new_tokens", 3}, {"repetition_penalty", 1.3}, {"no_repeat_ngram_size", 2}},
      {{"prompts", one}, {"num_beams", 3}, {"max_new_tokens", 8}, {"length_penalty", -0.5}, {"repetition_penalty", 0.8}},
      {{"prompts", batch}, {"num_beams", 1}, {"max_new_tokens", 6}, {"eos", json::array()}, {"no_repeat_ngram_size", 2}},
  });
  {
    testing::ScopedTempDir oracle_scratch;
    auto rules = run_oracle(dir, json::array({cases[0], cases[1], cases[2]}), oracle_scratch.path());
    ASSERT_TRUE(rules.is_ok()) << rules.status().message();
    EXPECT_NE((*rules)[0], (*rules)[1]);
    EXPECT_NE((*rules)[1], (*rules)[2]);
    EXPECT_NE((*rules)[0], (*rules)[2]);
  }
  expect_oracle_beams(**model, dir, cases, 1e-4);
}

// transformers keeps max(2, 1 + eos ids) * num_beams continuations, so num_beams of them go on
// even when every eos id ranks above the best token that does not end the hypothesis.
TEST(BeamSearchSteps, KeepsEnoughContinuationsWhenTheBestEnd) {
  genai::BeamSearchParams params;
  params.num_beams = 1;
  genai::BeamSearch search(params, 1, {0, 1}, 4);
  const std::vector<float> log_probs = {-0.5f, -1.0f, -2.0f, -3.0f};  // eos 0 and 1 first
  search.step(0, log_probs, 0);
  ASSERT_EQ(search.running(0, 0).size(), 1u);
  EXPECT_EQ(search.running(0, 0)[0], 2);
  ASSERT_EQ(search.hypotheses(0).size(), 1u);  // only the best num_beams may finish
  EXPECT_EQ(search.hypotheses(0)[0].tokens, std::vector<int32_t>{0});
  EXPECT_FLOAT_EQ(search.hypotheses(0)[0].score, -0.5f);
  EXPECT_TRUE(search.done(0));  // the running beam (-2) cannot beat -0.5 at any length
}

class BeamSearchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto model = genai::Model::load(kPackage.string());
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    model_ = model->release();
  }
  static void TearDownTestSuite() { delete model_; }

  static genai::GeneratorParams beams(int32_t num_beams) {
    genai::GeneratorParams params;
    params.sampling.greedy = true;
    params.beam.num_beams = num_beams;
    params.max_new_tokens = 6;
    params.prompts = {model_->encode("The Lord").value()};
    return params;
  }
  static std::string create_error(const genai::GeneratorParams& params) {
    auto generator = genai::Generator::create(*model_, params);
    return generator.is_ok() ? "" : generator.status().message();
  }

  static genai::Model* model_;
};

genai::Model* BeamSearchTest::model_ = nullptr;

TEST_F(BeamSearchTest, BadParametersAreOneLineErrors) {
  const auto expect_error = [](const genai::GeneratorParams& params, const std::string& needle) {
    const std::string message = create_error(params);
    EXPECT_NE(message.find(needle), std::string::npos) << "got: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  };
  expect_error(beams(0), "num_beams must be >= 1, got 0");
  genai::GeneratorParams params = beams(2);
  params.beam.num_return_sequences = 3;
  expect_error(params, "num_return_sequences must be in [1, num_beams 2], got 3");
  params = beams(1);
  params.beam.num_return_sequences = 2;
  expect_error(params, "num_return_sequences must be in [1, num_beams 1], got 2");
  params = beams(2);
  params.sampling.greedy = false;
  expect_error(params, "beam search (num_beams 2) cannot be combined with sampling");
  params = beams(2);
  params.stop_strings = {"."};
  expect_error(params, "cannot be combined with stop strings");
  params = beams(2);
  params.beam.length_penalty = std::nanf("");
  expect_error(params, "length_penalty must be finite");
}

TEST_F(BeamSearchTest, ReturnsTextOnceAndRefusesRewindAndAppend) {
  genai::GeneratorParams params = beams(3);
  params.beam.num_return_sequences = 2;
  auto generator = genai::Generator::create(*model_, params);
  ASSERT_TRUE(generator.is_ok()) << generator.status().message();
  genai::Generator& g = **generator;
  EXPECT_EQ(g.batch_size(), 2u);
  std::vector<std::string> texts(2);
  size_t pieces = 0;
  ASSERT_TRUE(g.generate([&](size_t s, std::string_view text) {
                 texts[s] += text;
                 ++pieces;
               }).is_ok());
  EXPECT_EQ(pieces, 2u);  // each hypothesis' whole text, once
  for (size_t s = 0; s < 2; ++s) {
    const auto tokens = g.tokens(s);
    const std::vector<int32_t> generated(tokens.begin() + static_cast<std::ptrdiff_t>(g.prompt_length(s)), tokens.end());
    EXPECT_EQ(texts[s], model_->tokenizer()->decode(generated, DecodeOptions{true, {}}).value());
    EXPECT_LT(g.beam_score(s), 0.0);
  }
  EXPECT_GE(g.beam_score(0), g.beam_score(1));
  EXPECT_NE(g.rewind(1).message().find("not available with beam search"), std::string::npos);
  const std::vector<int32_t> more = {5};
  EXPECT_NE(g.append_tokens(more).message().find("not available with beam search"), std::string::npos);
}

}  // namespace
}  // namespace onnx_genai
