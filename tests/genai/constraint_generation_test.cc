// GeneratorParams::constraint on the default model (models/debian-prose-11m): a ragged batch under
// one regex, seeded sampling. On a stand-in device (tests/runtime/stand_in_device.h) the
// constrained rows are drawn in the graph given each row's mask (device_sampling.h), so their
// logits stay on the device, and give the CPU session's tokens, sampled and greedy; every row's
// text matches the regex in full (std::regex) and ends in
// eos; a rewind in the middle rolls each row's matcher back and the continuation still matches. A
// Lark grammar that names the eos token (<|endoftext|>) ends each row with it.
#include <gtest/gtest.h>

#include <regex>

#include "genai/model_parts.h"
#include "genai_test_util.h"
#include "runtime/stand_in_device.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::StandInMemory;
using testing::StandInScope;

const fs::path kPackage = fs::path(OG_SOURCE_DIR) / "models/debian-prose-11m";
const Device kStandIn{DeviceType::kCuda, 0};
const std::string kPattern = "(red|green|blue) (cat|dog)s?, [1-9][0-9]{0,2} (kg|g)";

Result<std::unique_ptr<genai::Model>> load(Device device) {
  genai::ModelOptions options;
  options.num_threads = 2;
  options.device = device;
  return genai::Model::load(kPackage.string(), options);
}

struct Run {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::string> texts;
};

// Runs to the end; with `rewind_after` > 0, rewinds every row by 3 tokens after that many steps first.
Result<Run> generate(const genai::Model& model, int rewind_after,
                     const ConstraintSpec& constraint = {ConstraintKind::kRegex, kPattern}, bool greedy = false) {
  genai::GeneratorParams params;
  params.sampling.temperature = 1.0f;
  params.sampling.seed = 5;
  params.sampling.greedy = greedy;
  params.max_new_tokens = 64;
  params.constraint = constraint;
  for (const char* prompt : {"The animal:", "And God said unto the", "Weight"}) {
    OG_ASSIGN_OR_RETURN(std::vector<int32_t> ids, model.encode(prompt));
    params.prompts.push_back(std::move(ids));
  }
  OG_ASSIGN_OR_RETURN(auto generator, genai::Generator::create(model, params));
  for (int step = 0; step < rewind_after; ++step) OG_RETURN_IF_ERROR(generator->generate_next());
  if (rewind_after > 0) {
    size_t longest = 0;
    for (size_t b = 0; b < generator->batch_size(); ++b) longest = std::max(longest, generator->tokens(b).size());
    OG_RETURN_IF_ERROR(generator->rewind(longest - 3));
  }
  while (!generator->is_done()) OG_RETURN_IF_ERROR(generator->generate_next());
  Run run;
  for (size_t b = 0; b < generator->batch_size(); ++b) {
    const auto tokens = generator->tokens(b);
    std::vector<int32_t> generated(tokens.begin() + static_cast<std::ptrdiff_t>(generator->prompt_length(b)), tokens.end());
    if (generator->finish_reason(b) != genai::FinishReason::kEos) return OG_ERROR("row ", b, " did not end in eos");
    generated.pop_back();  // the eos
    DecodeOptions options;
    options.skip_special_tokens = true;
    OG_ASSIGN_OR_RETURN(std::string text, model.tokenizer()->decode(generated, options));
    run.tokens.emplace_back(tokens.begin(), tokens.end());
    run.texts.push_back(std::move(text));
  }
  return run;
}

TEST(ConstraintGeneration, MaskedRowsAreDrawnOnTheDeviceAndMatch) {
  auto cpu = load(Device::cpu());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  StandInMemory memory;
  StandInScope scope(memory);
  auto device = load(kStandIn);
  ASSERT_TRUE(device.is_ok()) << device.status().message();
  ASSERT_TRUE(genai::ModelAccess::parts(**device).io.sampled_tokens_output) << "the graph has no SampleTokens";
  for (const bool greedy : {false, true}) {
    auto want = generate(**cpu, 0, {ConstraintKind::kRegex, kPattern}, greedy);
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    for (const std::string& text : want->texts) EXPECT_TRUE(std::regex_match(text, std::regex(kPattern))) << text;
    const int64_t before = scope.device->downloaded_bytes;
    auto got = generate(**device, 0, {ConstraintKind::kRegex, kPattern}, greedy);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_EQ(got->tokens, want->tokens) << (greedy ? "greedy" : "sampled");
    // Three rows of ~10 tokens: one row of logits (vocab floats) alone would be more than this.
    EXPECT_LT(scope.device->downloaded_bytes - before, (*device)->info().vocab_size * 4) << "logits came to the host";
  }
}

TEST(ConstraintGeneration, RewindRollsTheMatchersBack) {
  auto model = load(Device::cpu());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  auto run = generate(**model, 5);
  ASSERT_TRUE(run.is_ok()) << run.status().message();
  for (const std::string& text : run->texts) EXPECT_TRUE(std::regex_match(text, std::regex(kPattern))) << text;
}

TEST(ConstraintGeneration, AGrammarThatNamesTheEosTokenEndsWithIt) {
  // <|endoftext|> is this model's only special token, and its eos: the text is never complete
  // before it, so only the grammar's token (not the stop-when-complete rule) lets a row end.
  auto model = load(Device::cpu());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const std::string words = "[a-z]{1,8}( [a-z]{1,8}){2,5}";
  auto run = generate(**model, 0, {ConstraintKind::kLarkGrammar, "start: WORDS <|endoftext|>\nWORDS: /" + words + "/\n"});
  ASSERT_TRUE(run.is_ok()) << run.status().message();
  for (size_t b = 0; b < run->texts.size(); ++b) {
    EXPECT_TRUE(std::regex_match(run->texts[b], std::regex(words))) << run->texts[b];
    EXPECT_EQ(run->tokens[b].back(), *(*model)->tokenizer()->token_to_id("<|endoftext|>"));
  }
}

}  // namespace
}  // namespace onnx_genai
