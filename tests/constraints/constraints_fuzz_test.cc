// Fuzz tests of the schema, regex and Lark grammar compilers, meant to run under ASan/UBSan
// (-DOG_SANITIZE=ON) as well as in the normal build. Seeds: the schema corpus, the draft-07 suite's
// schemas, a list of regexes and the Lark grammars of tests/constraints/lark/; mutants: JSON-level
// edits (hostile values, removed and copied nodes), byte edits (tests/fuzz_mutations.h) and, for
// grammars, lines spliced in from other grammars. Every mutant must compile or fail with a Status naming the
// layer ("json schema:", "regex:", "grammar:"); one that compiles is driven with random bytes and,
// every few mutants, a mask over llama2's vocabulary. Then hand-made hostile inputs: nesting far
// past the limits, huge repeat counts, enormous enumerations.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "constraint_test_util.h"
#include "fuzz_mutations.h"

namespace onnx_genai::testing {
namespace {

constexpr uint64_t kSeed = 20261206;
constexpr int kSchemaMutants = 5000;
constexpr int kRegexMutants = 5000;
constexpr int kGrammarMutants = 4000;
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

// Compiles `count` mutants from `mutant`: each must compile or fail naming its layer, and one that
// compiles is driven. Returns how many compiled.
int fuzz_compile(ConstraintKind kind, uint64_t seed, int count, const char* what,
                 const std::function<std::string(FuzzRng&)>& mutant) {
  const TestVocabulary& v = test_vocabulary("llama2");
  FuzzRng rng(seed);
  int compiled = 0;
  for (int i = 0; i < count; ++i) {
    const std::string text = mutant(rng);
    auto result = CompiledConstraint::compile({kind, text}, v.vocabulary);
    if (!result) {
      EXPECT_TRUE(names_its_layer(result.status().message())) << text << " -> " << result.status().message();
      continue;
    }
    ++compiled;
    exercise(*result, rng, i % kMaskEvery == 0);
  }
  std::printf("seed %llu: %d %s mutants, %d compiled, %d refused\n", static_cast<unsigned long long>(seed), count, what,
              compiled, count - compiled);
  return compiled;
}

TEST(ConstraintsFuzz, SchemaMutantsCompileOrFailCleanly) {
  const std::vector<nlohmann::json> seeds = schema_seeds();
  fuzz_compile(ConstraintKind::kJsonSchema, kSeed, kSchemaMutants, "schema",
               [&](FuzzRng& rng) { return mutate_json(rng, fuzz_pick(rng, seeds)); });
}

TEST(ConstraintsFuzz, RegexMutantsCompileOrFailCleanly) {
  const std::vector<std::string> seeds = {
      "(ab|cd)*e{2,5}", "[^\\d\\s]+@[a-z]{1,8}\\.(com|org)", "^\\x41?\\u00e9.(?:x|y)+$", "[\\]\\-^a-c]{0,}",
      "(((a|b)c)*d){3}", "\\w+\\W*\\S\\D", "a{2,}?b+?c??", "(?<n>\\d{4})-[01]\\d"};
  fuzz_compile(ConstraintKind::kRegex, kSeed + 1, kRegexMutants, "regex",
               [&](FuzzRng& rng) { return mutate_bytes(rng, fuzz_pick(rng, seeds)); });
}

std::vector<std::string> grammar_seeds() {
  std::vector<std::string> seeds = {
      "start: x{2,3} | x{,2} y\nx: \"a\" # comment\ny: %json {\"type\":\"array\",\"items\":{\"type\":\"integer\"}}\n",
      "start: A (\",\" A)*\nA: /[^,\\]]{1,4}/s | \"\\u00e9\"i\n%ignore /[ \\t]+/\n",
      // llguidance's lexeme options, which the corpus (read by Python's Lark too) cannot hold.
      "start: (call | line)* TEXT?\nTEXT: /[a-z \\n]+/\nhd[lazy]: /[a-z ]*/ \"<f\"\ncall: hd \"=\" /[0-9]+/ \">\"\n"
      "line[stop=\"\\n\"]: /[a-z ]*/\nitem[suffix=/[;.]/, lazy]: /[a-z;.]+/\n%ignore \" \"\n"};
  for (const auto& file : std::filesystem::directory_iterator(OG_SOURCE_DIR "/tests/constraints/lark")) {
    std::ifstream in(file.path());
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return seeds;
}

// A byte edit, or a line of another grammar put in place of one of this one's.
std::string mutate_grammar(FuzzRng& rng, const std::vector<std::string>& seeds) {
  std::string text = fuzz_pick(rng, seeds);
  if (fuzz_pick(rng, 2)) return mutate_bytes(rng, std::move(text));
  const std::string& donor = fuzz_pick(rng, seeds);
  const size_t from = donor.find('\n', fuzz_pick(rng, donor.size()));
  const size_t at = text.find('\n', fuzz_pick(rng, text.size()));
  if (from == std::string::npos || at == std::string::npos) return text;
  const size_t from_end = donor.find('\n', from + 1), at_end = text.find('\n', at + 1);
  return text.replace(at, at_end == std::string::npos ? std::string::npos : at_end - at,
                      donor.substr(from, from_end == std::string::npos ? std::string::npos : from_end - from));
}

TEST(ConstraintsFuzz, LarkGrammarMutantsCompileOrFailCleanly) {
  const std::vector<std::string> seeds = grammar_seeds();
  const int compiled = fuzz_compile(ConstraintKind::kLarkGrammar, kSeed + 2, kGrammarMutants, "grammar",
                                    [&](FuzzRng& rng) { return mutate_grammar(rng, seeds); });
  EXPECT_GT(compiled, kGrammarMutants / 10);
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
  std::string deep_grammar = "start: ", deep_terminals = "start: T0\n";
  for (int i = 0; i < 5000; ++i) deep_grammar += "(";
  deep_grammar += "\"a\"";
  for (int i = 0; i < 5000; ++i) deep_grammar += ")";
  for (int i = 0; i < 5000; ++i) deep_terminals += "T" + std::to_string(i) + ": \"a\" T" + std::to_string(i + 1) + "\n";
  deep_terminals += "T5000: \"b\"\n";
  std::string wide_grammar = "start: ";
  for (int i = 0; i < 300; ++i) wide_grammar += "\"ab\"{10000} ";
  const std::vector<std::pair<ConstraintSpec, std::string>> cases = {
      {{ConstraintKind::kJsonSchema, deep_schema}, "nested deeper"},
      {{ConstraintKind::kRegex, deep_regex}, "nested deeper"},
      {{ConstraintKind::kRegex, wide_regex}, "more than"},
      {{ConstraintKind::kRegex, "a{99999999999999999999}"}, "repeat count"},
      {{ConstraintKind::kJsonSchema, R"({"type":"string","maxLength":1e300})"}, "maxLength"},
      {{ConstraintKind::kJsonSchema, R"({"type":"array","items":{"type":"string","minLength":10000},"minItems":10000})"}, ""},
      {{ConstraintKind::kJsonSchema, many_values}, "more than"},
      {{ConstraintKind::kJsonSchema, R"({"type":"integer","minimum":-1e300})"}, "64-bit"},
      {{ConstraintKind::kLarkGrammar, deep_grammar}, "nested deeper"},
      {{ConstraintKind::kLarkGrammar, deep_terminals}, "nested deeper"},
      {{ConstraintKind::kLarkGrammar, wide_grammar}, "more than"},
      {{ConstraintKind::kLarkGrammar, "start: \"a\"~99999999999999999999"}, "repeat count"},
      {{ConstraintKind::kLarkGrammar, "start: \"(\" start* \")\" | \"a\"+ \"a\"+ start?"}, ""},
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
