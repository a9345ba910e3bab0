// Regexes against libstdc++'s std::regex (ECMAScript grammar) as the independent reference:
// random strings over each pattern's alphabet, and strings the grammar itself generates, must be
// accepted by the engine exactly when std::regex_match accepts them. Patterns are ASCII, where
// std::regex's byte semantics and ECMAScript's code-unit semantics coincide.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "constraint_test_util.h"

namespace onnx_genai::testing {
namespace {

const std::vector<std::string> kPatterns = {
    "abc",          "a|b|cd",         "(ab)*c",      "a+b?",          "[a-c]{2,4}",     "x{3}",
    "(a|b){0,3}d",  "[^a]b",          "\\d+(\\.\\d+)?", "\\w+@\\w+\\.com", "(?:ab|a)(?:bc|c)", "[\\]a-]+",
    "a.c",          "\\s*x",          "(a*)*b",      "(a|)+c",        "[0-9a-fA-F]{2,}", "(?:\\d{4})-\\d\\d",
    "\\x41\\u0042", "[\\d\\-]+",      "a{2,}b",      "^ab$",          "a\\.b|c\\+",     "(((a)))b{0,2}",
};

std::string random_text(std::mt19937_64& rng, const std::string& alphabet, size_t max_length) {
  std::string out(std::uniform_int_distribution<size_t>(0, max_length)(rng), ' ');
  for (char& c : out) c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
  return out;
}

// A random walk over the bytes the automaton allows, stopping at a complete text with p = 1/3.
std::string generate(const std::shared_ptr<CompiledConstraint>& compiled, std::mt19937_64& rng) {
  ConstraintMatcher m(compiled);
  std::string out;
  for (int step = 0; step < 40; ++step) {
    if (m.is_complete() && rng() % 3 == 0) break;
    std::vector<char> next;
    for (int b = 0x20; b < 0x7F; ++b) {
      const char c = static_cast<char>(b);
      if (m.accept_bytes(std::string_view(&c, 1)).is_ok()) {
        next.push_back(c);
        EXPECT_TRUE(m.rollback(1).is_ok());
      }
    }
    if (next.empty()) break;
    const char c = next[rng() % next.size()];
    EXPECT_TRUE(m.accept_bytes(std::string_view(&c, 1)).is_ok());
    out += c;
  }
  return out;
}

TEST(Regex, AgreesWithStdRegex) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  std::mt19937_64 rng(7);
  for (const std::string& pattern : kPatterns) {
    auto compiled = CompiledConstraint::compile({ConstraintKind::kRegex, pattern}, v.vocabulary);
    ASSERT_TRUE(compiled.is_ok()) << pattern << ": " << compiled.status().message();
    const std::regex reference(pattern, std::regex::ECMAScript);
    std::string alphabet = "ab.@-_ 9Xx";
    for (const char c : pattern) {
      if (c >= 0x20 && c < 0x7F) alphabet += c;
    }
    for (int k = 0; k < 400; ++k) {
      const std::string text = k % 2 ? random_text(rng, alphabet, 8) : generate(*compiled, rng);
      EXPECT_EQ(accepts_bytes(*compiled, text), std::regex_match(text, reference)) << pattern << " on \"" << text << "\"";
    }
  }
}

TEST(Regex, TokensAgreeWithBytes) {
  for (const char* name : {"qwen3", "llama2"}) {
    const TestVocabulary& v = test_vocabulary(name);
    auto compiled = CompiledConstraint::compile({ConstraintKind::kRegex, "(yes|no), [0-9]{1,3} (apples|pears)\\."}, v.vocabulary);
    ASSERT_TRUE(compiled.is_ok());
    for (const std::string text : {"yes, 12 apples.", "no, 7 pears.", "no, 1234 pears.", "maybe, 1 apples.", "yes, 12 apples"}) {
      EXPECT_EQ(accepts_tokens(*compiled, spell(v, text), v.eos), accepts_bytes(*compiled, text)) << name << ": " << text;
    }
  }
}

TEST(Regex, RefusesWhatItCannotEnforce) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  for (const auto& [pattern, what] : std::vector<std::pair<std::string, std::string>>{
           {"a(?=b)", "lookaround"}, {"(a)\\1", "backreference"}, {"\\bword", "word boundary"},
           {"a^b", "anchor"}, {"\\p{L}", "property"}, {"a{20000}", "repeat count"}, {"(ab", "unterminated"},
           {"*a", "nothing to repeat"}, {"[b-a]", "out of order"}, {"a)", "unexpected ')'"}}) {
    auto compiled = CompiledConstraint::compile({ConstraintKind::kRegex, pattern}, v.vocabulary);
    ASSERT_FALSE(compiled.is_ok()) << pattern;
    EXPECT_NE(compiled.status().message().find(what), std::string::npos) << pattern << ": " << compiled.status().message();
    EXPECT_NE(compiled.status().message().find("offset"), std::string::npos) << compiled.status().message();
  }
}

TEST(Regex, UnicodeClassesMatchWholeCharacters) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  auto compiled = CompiledConstraint::compile({ConstraintKind::kRegex, "[^a]{2}"}, v.vocabulary);
  ASSERT_TRUE(compiled.is_ok());
  EXPECT_TRUE(accepts_bytes(*compiled, "\xC3\xA9\xF0\x9F\x98\x80"));  // é and an emoji: two characters
  EXPECT_FALSE(accepts_bytes(*compiled, "\xC3\xA9"));                 // one character
  EXPECT_FALSE(accepts_bytes(*compiled, "\xC3\x28z"));                // not UTF-8
}

}  // namespace
}  // namespace onnx_genai::testing
