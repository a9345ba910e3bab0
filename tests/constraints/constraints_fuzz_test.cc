// Fuzz tests of the schema and regex compilers, meant to run under ASan/UBSan (-DOG_SANITIZE=ON)
// as well as in the normal build. Seeds: the schema corpus, the draft-07 suite's schemas and a
// list of regexes; mutants: JSON-level edits (hostile values, removed and copied nodes) and byte
// edits (tests/fuzz_mutations.h). Every mutant must compile or fail with a Status naming the
// layer ("json schema:", "regex:", "grammar:"); one that compiles is driven with random bytes and,
// every few mutants, a mask over llama2's vocabulary. Then hand-made hostile inputs: nesting far
// past the limits, huge repeat counts, enormous enumerations.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "constraint_test_util.h"
#include "fuzz_mutations.h"

namespace onnx_genai::testing {
namespace {

constexpr uint64_t kSeed = 20261206;
constexpr int kSchemaMutants = 5000;
constexpr int kRegexMutants = 5000;
constexpr int kMaskEvery = 50;

bool names_its_layer(const std::string& message) {
  for (const char* layer : {"json schema:", "regex:", "grammar:"}) {
    if (message.find(layer) != std::string::npos) return true;
  }
  return false;
}

// Drives a compiled constraint: random bytes (each either taken or refused) and sometimes a mask.
void exercise(const std::shared_ptr<CompiledConstraint>& compiled, FuzzRng& rng, bool mask) {
  ConstraintMatcher m(compiled);
  const std::string bytes = fuzz_bytes(rng, 24);
  for (const char c : bytes) (void)m.accept_bytes(std::string_view(&c, 1));
  if (!mask) return;
  std::vector<uint64_t> words(m.mask_words());
  const Status status = m.compute_mask(words);
  EXPECT_TRUE(status.is_ok() || names_its_layer(status.message())) << status.message();
}

std::vector<nlohmann::json> schema_seeds() {
  std::vector<nlohmann::json> seeds;
  std::ifstream corpus(OG_SOURCE_DIR "/tests/constraints/schema_corpus.json");
  for (const auto& entry : nlohmann::json::parse(corpus)) seeds.push_back(entry["schema"]);
  for (const auto& file : std::filesystem::directory_iterator(OG_JSON_SCHEMA_SUITE_DIR "/draft7")) {
    if (file.path().extension() != ".json") continue;
    std::ifstream in(file.path());
    for (const auto& group : nlohmann::json::parse(in)) seeds.push_back(group["schema"]);
  }
  return seeds;
}

TEST(ConstraintsFuzz, SchemaMutantsCompileOrFailCleanly) {
  const TestVocabulary& v = test_vocabulary("llama2");
  const std::vector<nlohmann::json> seeds = schema_seeds();
  FuzzRng rng(kSeed);
  int compiled = 0, refused = 0;
  for (int i = 0; i < kSchemaMutants; ++i) {
    const std::string text = mutate_json(rng, fuzz_pick(rng, seeds));
    auto result = CompiledConstraint::compile({ConstraintKind::kJsonSchema, text}, v.vocabulary);
    if (!result) {
      ++refused;
      EXPECT_TRUE(names_its_layer(result.status().message())) << text << " -> " << result.status().message();
      continue;
    }
    ++compiled;
    exercise(*result, rng, i % kMaskEvery == 0);
  }
  std::printf("seed %llu: %d schema mutants, %d compiled, %d refused\n", static_cast<unsigned long long>(kSeed),
              kSchemaMutants, compiled, refused);
}

TEST(ConstraintsFuzz, RegexMutantsCompileOrFailCleanly) {
  const TestVocabulary& v = test_vocabulary("llama2");
  const std::vector<std::string> seeds = {
      "(ab|cd)*e{2,5}", "[^\\d\\s]+@[a-z]{1,8}\\.(com|org)", "^\\x41?\\u00e9.(?:x|y)+$", "[\\]\\-^a-c]{0,}",
      "(((a|b)c)*d){3}", "\\w+\\W*\\S\\D", "a{2,}?b+?c??", "(?<n>\\d{4})-[01]\\d"};
  FuzzRng rng(kSeed + 1);
  int compiled = 0, refused = 0;
  for (int i = 0; i < kRegexMutants; ++i) {
    const std::string pattern = mutate_bytes(rng, fuzz_pick(rng, seeds));
    auto result = CompiledConstraint::compile({ConstraintKind::kRegex, pattern}, v.vocabulary);
    if (!result) {
      ++refused;
      EXPECT_TRUE(names_its_layer(result.status().message())) << pattern << " -> " << result.status().message();
      continue;
    }
    ++compiled;
    exercise(*result, rng, i % kMaskEvery == 0);
  }
  std::printf("seed %llu: %d regex mutants, %d compiled, %d refused\n", static_cast<unsigned long long>(kSeed + 1),
              kRegexMutants, compiled, refused);
}

TEST(ConstraintsFuzz, HostileInputsHitLimitsNotTheStack) {
  const TestVocabulary& v = test_vocabulary("llama2");
  std::string deep_schema, deep_regex;
  for (int i = 0; i < 5000; ++i) deep_schema += "{\"items\":";
  deep_schema += "true";
  for (int i = 0; i < 5000; ++i) deep_schema += "}";
  for (int i = 0; i < 5000; ++i) deep_regex += "(";
  deep_regex += "a";
  for (int i = 0; i < 5000; ++i) deep_regex += ")";
  std::string wide_regex;
  for (int i = 0; i < 300; ++i) wide_regex += "a{10000}";
  std::string many_values = "{\"enum\":[";
  for (int i = 0; i < 200000; ++i) many_values += (i ? "," : "") + std::to_string(i * 7919);
  many_values += "]}";
  const std::vector<std::pair<ConstraintSpec, std::string>> cases = {
      {{ConstraintKind::kJsonSchema, deep_schema}, "nested deeper"},
      {{ConstraintKind::kRegex, deep_regex}, "nested deeper"},
      {{ConstraintKind::kRegex, wide_regex}, "more than"},
      {{ConstraintKind::kRegex, "a{99999999999999999999}"}, "repeat count"},
      {{ConstraintKind::kJsonSchema, R"({"type":"string","maxLength":1e300})"}, "maxLength"},
      {{ConstraintKind::kJsonSchema, R"({"type":"array","items":{"type":"string","minLength":10000},"minItems":10000})"}, ""},
      {{ConstraintKind::kJsonSchema, many_values}, "more than"},
      {{ConstraintKind::kJsonSchema, R"({"type":"integer","minimum":-1e300})"}, "64-bit"},
  };
  for (const auto& [spec, needle] : cases) {
    auto result = CompiledConstraint::compile(spec, v.vocabulary);
    if (needle.empty()) {
      FuzzRng rng(1);
      if (result) exercise(*result, rng, true);
      continue;
    }
    ASSERT_FALSE(result.is_ok()) << spec.text.substr(0, 80);
    EXPECT_NE(result.status().message().find(needle), std::string::npos) << result.status().message();
  }
}

}  // namespace
}  // namespace onnx_genai::testing
