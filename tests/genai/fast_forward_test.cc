// Fast-forward (SpeculativeParams::fast_forward, src/genai/forced_text.h) on the default model
// (models/debian-prose-11m), one thread (a verify step and a plain step then round alike):
//   - greedy under JSON Schemas with long fixed keys: the tokens, text and finish reason of plain
//     constrained decoding, alone and with prompt lookup beside it; fewer decoder runs than tokens,
//     and forced drafts counted in the stats;
//   - seeded sampling: every output a whole sentence of the schema, the same tokens for a seed;
//   - errors: fast-forward without a constraint, or with a batch;
//   - the CLI: --fast-forward prints what a plain run prints and reports the forced drafts.
#include <gtest/gtest.h>

#include <fstream>

#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;

const fs::path kPackage = fs::path(testing::source_dir()) / "models" / "debian-prose-11m";

// Three properties in any order, no others: once a key's first letter picks it, the rest of the
// key is forced, and so are the commas, braces and quotes where no whitespace may come.
const char* const kLongKeys =
    R"({"type":"object","properties":{"customer_identification_number":{"type":"integer","minimum":0,"maximum":999},)"
    R"("shipping_address_first_line":{"type":"string","maxLength":12},"is_priority_delivery":{"type":"boolean"}},)"
    R"("required":["customer_identification_number","shipping_address_first_line","is_priority_delivery"],)"
    R"("additionalProperties":false})";
const char* const kNested =
    R"({"type":"object","properties":{"order":{"type":"object","properties":{"identifier":{"enum":["alpha-one","beta-two"]},)"
    R"("quantities":{"type":"array","items":{"type":"integer","minimum":1,"maximum":9},"maxItems":3}},)"
    R"("required":["identifier","quantities"],"additionalProperties":false}},"required":["order"],"additionalProperties":false})";

using testing::generate;
using Outcome = testing::GenerationOutcome;

class FastForward : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    genai::ModelOptions options;
    options.num_threads = 1;
    auto model = genai::Model::load(kPackage.string(), options);
    EXPECT_TRUE(model.is_ok()) << model.status().message();
    if (model.is_ok()) model_ = std::move(*model).release();
  }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_NE(model_, nullptr); }

  static genai::GeneratorParams params(const std::string& prompt, const char* schema) {
    genai::GeneratorParams p = model_->default_params();
    p.max_new_tokens = 96;
    p.constraint = ConstraintSpec{ConstraintKind::kJsonSchema, schema};
    auto ids = model_->encode(prompt);
    EXPECT_TRUE(ids.is_ok()) << ids.status().message();
    if (ids.is_ok()) p.prompts = {*ids};
    return p;
  }

  static genai::Model* model_;
};

genai::Model* FastForward::model_ = nullptr;

const std::vector<std::string> kPrompts = {"The order was", "And God said unto Moses", "Customer record:",
                                           "In the beginning"};

TEST_F(FastForward, GreedyGivesThePlainTokensInFewerSteps) {
  int64_t steps = 0, tokens = 0, forced = 0;
  for (const char* schema : {kLongKeys, kNested}) {
    for (const std::string& prompt : kPrompts) {
      genai::GeneratorParams p = params(prompt, schema);
      p.sampling.greedy = true;
      const Outcome plain = generate(*model_, p);
      p.speculative.fast_forward = true;
      const Outcome fast = generate(*model_, p);
      EXPECT_EQ(fast.tokens, plain.tokens) << prompt;
      EXPECT_EQ(fast.text, plain.text) << prompt;
      EXPECT_EQ(fast.reason, plain.reason) << prompt;
      EXPECT_EQ(plain.stats.decode_steps, plain.stats.decode_tokens) << prompt;
      EXPECT_EQ(fast.stats.decode_tokens, plain.stats.decode_tokens) << prompt;
      EXPECT_EQ(fast.stats.forced_drafted_tokens, fast.stats.drafted_tokens) << prompt;
      EXPECT_LE(fast.stats.forced_accepted_tokens, fast.stats.forced_drafted_tokens) << prompt;
      // Each verify step gives its accepted tokens and one of the model's own.
      EXPECT_EQ(fast.stats.decode_steps + fast.stats.accepted_tokens, fast.stats.decode_tokens) << prompt;
      steps += fast.stats.decode_steps;
      tokens += fast.stats.decode_tokens;
      forced += fast.stats.forced_accepted_tokens;
    }
  }
  // This small model spells keys in smaller pieces than its tokenizer's encoding (and pads with
  // whitespace), so only part of each forced draft is kept; still, a tenth of the tokens come free.
  EXPECT_GT(static_cast<double>(forced), 0.1 * static_cast<double>(tokens)) << steps << " steps for " << tokens << " tokens";
}

TEST_F(FastForward, BesidePromptLookupTheTokensStay) {
  for (const std::string& prompt : kPrompts) {
    genai::GeneratorParams p = params(prompt, kLongKeys);
    p.sampling.greedy = true;
    const Outcome plain = generate(*model_, p);
    p.speculative.method = genai::SpeculativeMethod::kNgram;
    p.speculative.draft_tokens = 4;
    p.speculative.fast_forward = true;
    const Outcome fast = generate(*model_, p);
    EXPECT_EQ(fast.tokens, plain.tokens) << prompt;
    EXPECT_GT(fast.stats.forced_accepted_tokens, 0) << prompt;
  }
}

TEST_F(FastForward, SeededSamplingRepeatsAndStaysInTheSchema) {
  int64_t forced = 0;
  for (const std::string& prompt : kPrompts) {
    genai::GeneratorParams p = params(prompt, kLongKeys);
    p.sampling.greedy = false;
    p.sampling.temperature = 1.0f;
    p.sampling.seed = 17;
    p.max_new_tokens = 200;
    p.speculative.fast_forward = true;
    const Outcome first = generate(*model_, p);
    const Outcome again = generate(*model_, p);
    EXPECT_EQ(first.tokens, again.tokens) << prompt;
    ASSERT_EQ(first.reason, genai::FinishReason::kEos) << prompt << ": " << first.text;
    const nlohmann::json value = nlohmann::json::parse(first.text, nullptr, false);
    ASSERT_TRUE(value.is_object()) << first.text;
    EXPECT_EQ(value.size(), 3u) << first.text;
    EXPECT_TRUE(value["is_priority_delivery"].is_boolean()) << first.text;
    EXPECT_TRUE(value["customer_identification_number"].is_number_integer()) << first.text;
    EXPECT_TRUE(value["shipping_address_first_line"].is_string()) << first.text;
    forced += first.stats.forced_accepted_tokens;
  }
  EXPECT_GT(forced, 0);
}

TEST_F(FastForward, WithoutAConstraintOrWithABatchItIsAnError) {
  genai::GeneratorParams p = params("Hello", kLongKeys);
  p.speculative.fast_forward = true;
  p.constraint.reset();
  auto g = genai::Generator::create(*model_, p);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("fast_forward drafts the text a constraint forces, and no constraint is set"),
            std::string::npos)
      << g.status().message();
  p = params("Hello", kLongKeys);
  p.speculative.fast_forward = true;
  p.prompts.push_back(p.prompts[0]);
  g = genai::Generator::create(*model_, p);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("takes one prompt"), std::string::npos) << g.status().message();
}

// `generate --fast-forward`, as a user runs it: the plain run's text, the forced drafts on stderr.
TEST(FastForwardCli, GenerateFastForwardsAndReportsIt) {
  testing::ScopedTempDir scratch;
  const fs::path schema = scratch.path() / "schema.json";
  std::ofstream(schema) << kLongKeys;
  const std::string args = "generate " + testing::shell_quote(kPackage.string()) +
                           " --prompt 'The order was' --greedy --max-new-tokens 80 --threads 1 --json-schema " +
                           testing::shell_quote(schema.string());
  const testing::CommandResult plain = testing::run_cli(args, "", scratch.path());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const testing::CommandResult fast = testing::run_cli(args + " --fast-forward --stats", "", scratch.path());
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  EXPECT_EQ(fast.out, plain.out);
  EXPECT_NE(fast.err.find("fast-forward: "), std::string::npos) << fast.err;
  EXPECT_NE(fast.err.find("forced text "), std::string::npos) << fast.err;
  const std::string no_constraint = "generate " + testing::shell_quote(kPackage.string()) + " --prompt Hi --fast-forward";
  testing::expect_bad_input_result(testing::run_cli(no_constraint, "", scratch.path()), no_constraint,
                                   "--fast-forward drafts the text a constraint forces: it needs --json-schema");
}

}  // namespace
}  // namespace onnx_genai
