// Lark grammars (ConstraintKind::kLarkGrammar) against Lark itself (Debian python3-lark, Earley
// with the dynamic lexer, the parser llguidance's dialect follows), over the grammars of
// tests/constraints/lark/: each text is classified by our matcher byte by byte (complete, a
// viable prefix, rejected) and by tests/constraints/lark_oracle.py; the two must agree. Texts:
// each grammar's `// example:` lines, random byte walks of our matcher (cut at random points),
// and byte mutations of both (near misses). Terminals take the longest match as Lark's lexer
// does; longest_match.lark and sizes.lark put terminals before text they could absorb. Then token masks with qwen3's vocabulary, the dialect's own syntax ({n,m}, #, %json),
// and refusals naming the construct and its line:column.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "constraint_test_util.h"
#include "tokenizer/unicode.h"

namespace onnx_genai::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kWalksPerGrammar = 150;
constexpr int kMutantsPerText = 2;
constexpr size_t kMaxWalkBytes = 48;

const fs::path kCorpus = fs::path(OG_SOURCE_DIR) / "tests/constraints/lark";

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::shared_ptr<CompiledConstraint> compile_lark(const std::string& grammar, const TestVocabulary& v) {
  auto compiled = CompiledConstraint::compile({ConstraintKind::kLarkGrammar, grammar}, v.vocabulary);
  EXPECT_TRUE(compiled.is_ok()) << compiled.status().message();
  return compiled.is_ok() ? *compiled : nullptr;
}

Status compile_error(const std::string& grammar) {
  auto compiled = CompiledConstraint::compile({ConstraintKind::kLarkGrammar, grammar}, test_vocabulary("llama2").vocabulary);
  return compiled.is_ok() ? Status::ok() : compiled.status();
}

// A random walk over the bytes the matcher allows, ending when complete (sometimes) or at a
// random length; the text may stop inside a UTF-8 character (the caller drops those).
std::string walk(const std::shared_ptr<CompiledConstraint>& compiled, std::mt19937_64& rng) {
  ConstraintMatcher m(compiled);
  std::string text;
  const size_t length = 1 + rng() % kMaxWalkBytes;
  while (text.size() < length) {
    if (m.is_complete() && rng() % 4 == 0) break;
    std::vector<char> allowed;
    for (int b = 0; b < 256; ++b) {
      const char c = static_cast<char>(b);
      if (!m.accept_bytes(std::string_view(&c, 1)).is_ok()) continue;
      allowed.push_back(c);
      EXPECT_TRUE(m.rollback(1).is_ok());
    }
    if (allowed.empty()) break;
    const char c = allowed[rng() % allowed.size()];
    EXPECT_TRUE(m.accept_bytes(std::string_view(&c, 1)).is_ok());
    text += c;
  }
  return text;
}

// A near miss: a byte deleted, duplicated, replaced by one from the text, or swapped with the next.
std::string mutate(std::string text, std::mt19937_64& rng) {
  if (text.empty()) return "x";
  const size_t at = rng() % text.size();
  switch (rng() % 4) {
    case 0: return text.erase(at, 1);
    case 1: return text.insert(at, 1, text[at]);
    case 2: text[at] = text[rng() % text.size()]; return text;
    default:
      if (at + 1 < text.size()) std::swap(text[at], text[at + 1]);
      return text;
  }
}

std::vector<std::string> examples(const std::string& grammar) {
  std::vector<std::string> out;
  std::istringstream lines(grammar);
  const std::string marker = "// example: ";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(marker, 0) == 0) out.push_back(json::parse(line.substr(marker.size())).get<std::string>());
  }
  return out;
}

TEST(LarkGrammar, AgreesWithLarkOnCompletePrefixAndRejected) {
  const TestVocabulary& v = test_vocabulary("llama2");
  const fs::path cases = fs::temp_directory_path() / ("og_lark_cases_" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream lines(cases);
  std::mt19937_64 rng(22);
  std::map<std::string, int> ours;
  int grammars = 0;
  for (const auto& file : fs::directory_iterator(kCorpus)) {
    const std::string grammar = read_file(file.path());
    auto compiled = compile_lark(grammar, v);
    ASSERT_NE(compiled, nullptr) << file.path();
    ++grammars;
    std::vector<std::string> texts = examples(grammar);
    ASSERT_GE(texts.size(), 4u) << file.path();
    for (int k = 0; k < kWalksPerGrammar; ++k) texts.push_back(walk(compiled, rng));
    const size_t seeds = texts.size();
    for (size_t i = 0; i < seeds; ++i) {
      for (int k = 0; k < kMutantsPerText; ++k) texts.push_back(mutate(texts[i], rng));
    }
    for (const std::string& text : texts) {
      if (unicode::find_invalid_utf8(text)) continue;  // Lark reads characters, not bytes
      const std::string ours_verdict = verdict(compiled, text);
      ++ours[ours_verdict];
      lines << json{{"grammar", file.path().string()}, {"text", text}, {"ours", ours_verdict}}.dump() << "\n";
    }
  }
  lines.close();
  EXPECT_GE(grammars, 10);
  // Every verdict must be exercised, or agreement would say little.
  for (const char* kind : {"complete", "prefix", "rejected"}) EXPECT_GE(ours[kind], 100) << kind;
  const auto [status, report] = run_checker("lark_oracle.py", cases.string());
  std::cout << report;
  EXPECT_EQ(status, 0) << report;
  EXPECT_NE(report.find(" 0 disagree"), std::string::npos) << report;
  fs::remove(cases);
}

TEST(LarkGrammar, MaskIsExactlyTheTokensThatKeepAViablePrefix) {
  // qwen3's 151k tokens, each checked byte by byte (the naive definition) at points of walks.
  const TestVocabulary& v = test_vocabulary("qwen3");
  std::mt19937_64 rng(7);
  for (const char* name : {"arithmetic.lark", "json_like.lark", "sql.lark"}) {
    auto compiled = compile_lark(read_file(kCorpus / name), v);
    ASSERT_NE(compiled, nullptr);
    for (int k = 0; k < 4; ++k) {
      const std::string prefix = k == 0 ? "" : walk(compiled, rng);
      EXPECT_GT(expect_exact_mask(v, compiled, prefix), 0u) << name << " '" << prefix << "'";
    }
  }
}

TEST(LarkGrammar, WalksByTokenStayInTheLanguage) {
  // Token walks with llama2 (SentencePiece, byte fallback) end in sentences Lark parses.
  const TestVocabulary& v = test_vocabulary("llama2");
  auto compiled = compile_lark(read_file(kCorpus / "calls.lark"), v);
  ASSERT_NE(compiled, nullptr);
  std::mt19937_64 rng(11);
  int finished = 0;
  for (int w = 0; w < 20; ++w) {
    ConstraintMatcher m(compiled);
    std::vector<uint64_t> mask(m.mask_words());
    std::string text;
    for (int step = 0; step < 60 && !m.is_terminated(); ++step) {
      ASSERT_TRUE(m.compute_mask(mask).is_ok());
      std::vector<int32_t> ids;
      for (int32_t id = 0; id < v.vocabulary->vocab_size(); ++id) {
        if (mask_has(mask, id) && (id == v.eos || v.vocabulary->token_bytes(id).size() <= 2)) ids.push_back(id);
      }
      ASSERT_FALSE(ids.empty()) << text;
      // Past a few tokens, end when allowed and prefer closing what is open.
      std::vector<int32_t> closers;
      for (const int32_t id : ids) {
        const std::string& bytes = v.vocabulary->token_bytes(id);
        if (bytes == ")" || bytes == "\"") closers.push_back(id);
      }
      int32_t id = ids[rng() % ids.size()];
      if (step > 10 && mask_has(mask, v.eos)) id = v.eos;
      else if (step > 20 && !closers.empty()) id = closers[rng() % closers.size()];
      ASSERT_TRUE(m.accept_token(id).is_ok());
      if (id != v.eos) text += v.vocabulary->token_bytes(id);
    }
    if (m.is_terminated()) {
      ++finished;
      EXPECT_EQ(verdict(compiled, text), "complete") << text;
    }
  }
  EXPECT_GT(finished, 5);
}

// The same verdicts on every text of `texts` under both grammars.
void expect_same_language(const std::string& a, const std::string& b, const std::vector<std::string>& texts) {
  const TestVocabulary& v = test_vocabulary("llama2");
  auto first = compile_lark(a, v), second = compile_lark(b, v);
  ASSERT_TRUE(first && second);
  for (const std::string& text : texts) EXPECT_EQ(verdict(first, text), verdict(second, text)) << "'" << text << "'\n" << a << "\n" << b;
}

TEST(LarkGrammar, LlguidanceSyntaxMeansWhatLarkSpellsOtherwise) {
  // {n,m} is llguidance's spelling of Lark's ~ n..m; # comments are llguidance's too.
  const std::vector<std::string> texts = {"", "a", "aa", "aaa", "aaaa", "aaaaa", "ab", "b"};
  expect_same_language("start: \"a\"{2,3}", "start: \"a\" ~ 2..3", texts);
  expect_same_language("start: \"a\"{2}", "start: \"a\" ~ 2", texts);
  expect_same_language("start: \"a\"{2,}", "start: \"a\" \"a\" \"a\"*", texts);
  expect_same_language("start: \"a\"{,2}  # at most two", "start: [\"a\" [\"a\"]]", texts);
  // A rule-level left recursion means the same language as the repetition.
  expect_same_language("start: start \"a\" | \"a\"", "start: \"a\"+", texts);
}

TEST(LarkGrammar, JsonEmbedsASchema) {
  const TestVocabulary& v = test_vocabulary("llama2");
  const std::string schema = R"({"type":"object","properties":{"city":{"type":"string"},"n":{"type":"integer","minimum":1}},)"
                             R"("required":["city"],"additionalProperties":false})";
  auto grammar = compile_lark("start: TEXT | call\nTEXT: /[^{<]+/\ncall: \"<call>\" %json " + schema + " \"</call>\"\n", v);
  auto alone = CompiledConstraint::compile({ConstraintKind::kJsonSchema, schema}, v.vocabulary);
  ASSERT_TRUE(grammar && alone.is_ok());
  for (const std::string instance : {R"({"city":"Oslo"})", R"({"city":"Oslo","n":3})", R"({"n":3})", R"({"city":"x","n":0})",
                                     R"({"city":"x","extra":1})", R"({"city": "x"})", "{}"}) {
    const bool valid = accepts_bytes(*alone, instance);
    EXPECT_EQ(verdict(grammar, "<call>" + instance + "</call>") == "complete", valid) << instance;
  }
  EXPECT_EQ(verdict(grammar, "no call here"), "complete");
  EXPECT_EQ(verdict(grammar, "<call>{\"city\":\"Oslo\"}"), "prefix");
}

TEST(LarkGrammar, ImportsMeanWhatTheirDefinitionsSay) {
  // The three spellings of %import bring in the same terminal as its definition written out.
  const std::vector<std::string> texts = {"", "1", "12", "-3", "1.5", "1.", ".5", "1e5", "1.5E-3", "e5", "1e", "+", "x"};
  const std::string number = "start: N\nN: /[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?/\n";
  expect_same_language("start: SIGNED_NUMBER\n%import common.SIGNED_NUMBER\n", number, texts);
  expect_same_language("start: N\n%import common.SIGNED_NUMBER -> N\n", number, texts);
  expect_same_language("start: SIGNED_NUMBER\n%import common (WS, SIGNED_NUMBER)\n", number, texts);
}

TEST(LarkGrammar, RulesThatMatchNothingOfferNoPrefix) {
  // b has no alternative that ends, so "a" can never be completed: it must not be a prefix.
  const TestVocabulary& v = test_vocabulary("llama2");
  auto compiled = compile_lark("start: \"a\" b | \"c\"\nb: b \"x\" | \"(\" b \")\"\n", v);
  ASSERT_NE(compiled, nullptr);
  EXPECT_FALSE(compiled->matches_nothing());
  EXPECT_EQ(verdict(compiled, "a"), "rejected");
  EXPECT_EQ(verdict(compiled, "c"), "complete");
  auto nothing = compile_lark("start: start \"x\"\n", v);
  ASSERT_NE(nothing, nullptr);
  EXPECT_TRUE(nothing->matches_nothing());
}

TEST(LarkGrammar, RefusalsNameTheConstructAndWhere) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"start: A\n%import unicode.A\n", "lark grammar:2:17: %import from \"unicode\" is not supported (only Lark's common terminals)"},
      {"start: A\n%import .grammar.A\n", "lark grammar:2:9: relative %import is not supported (only Lark's common terminals)"},
      {"start: A\n%import common.A\n", "lark grammar:2:16: common.A is not a supported terminal of Lark's common library"},
      {"start: X\n%import common (WS, _STRING_INNER)\n",
       "lark grammar:2:21: common._STRING_INNER is not a supported terminal of Lark's common library"},
      {"start: ws\n%import common.WS -> ws\n", "lark grammar:2:22: alias \"ws\" of WS must be uppercase"},
      {"start: A\n%import common\n", "lark grammar:2:1: expected %import MODULE.NAME or %import MODULE (NAMES)"},
      {"start: A\n%import common (A\n", "lark grammar:2:1: unterminated %import (...)"},
      {"start: INT\nINT: \"1\"\n%import common.INT\n", "lark grammar:3:16: \"INT\" is defined twice"},
      {"start: a\na.2: \"x\"\n", "lark grammar:2:2: priorities (a.N) are not supported"},
      {"start: _sep{\"a\", \",\"}\n", "lark grammar:1:12: templates (_sep{...}) are not supported"},
      {"start: x\n_sep{x, sep}: x (sep x)*\n", "lark grammar:2:5: templates (_sep{...}) are not supported"},
      {"start: \"a\" <|eot|>\n", "lark grammar:1:12: token <|eot|> is not in the vocabulary"},
      {"start: a\n", "lark grammar:1:8: \"a\" is not defined"},
      {"start: A\nA: \"x\" A?\n", "lark grammar:2:8: terminal A refers to itself (terminals are regular; use a rule)"},
      {"start: A\nA: a\na: \"x\"\n", "lark grammar:2:4: rule \"a\" inside terminal A (terminals are regular)"},
      {"start: \"a\"\nstart: \"b\"\n", "lark grammar:2:1: \"start\" is defined twice"},
      {"begin: \"a\"\n", "lark grammar: no rule \"start\""},
      {"start: /a/i\n", "lark grammar:1:8: regex flag 'i' is not supported"},
      {"start: /\\w+/\n",
       "lark grammar:1:8: in /\\w+/: regex: \\w in a Lark regex (Python's and Rust's Unicode word classes differ; write "
       "the class out) at offset 2"},
      {"start: /a+?/\n", "lark grammar:1:8: in /a+?/: regex: lazy quantifier in a Lark regex (llguidance refuses it) at offset 2"},
      {"start: \"a\" ~ 3..2\n", "lark grammar:1:12: repeat with its maximum below its minimum"},
      {"start: ~\"a\"\n", "lark grammar:1:8: the ~ (negation) operator is not supported"},
      {"start: A\nA: /a/ & /b/\n", "lark grammar:2:8: the & (intersection) operator is not supported"},
      {"start: a\na[max_tokens=3]: \"x\"\n",
       "lark grammar:2:3: rule option max_tokens is not supported (it limits the tokens sampled inside the rule: the sampler's "
       "work, not the grammar's)"},
      {"%llguidance {\"no_forcing\": true}\nstart: \"a\"\n", "lark grammar:1:1: %llguidance options are not supported"},
      {"start: \"a\"\n%declare X\n", "lark grammar:2:1: %declare is not supported"},
      {"start: \"\"\n", "lark grammar:1:8: empty string (Lark refuses empty terminals)"},
      {"start: (\"a\"\n", "lark grammar:2:1: unexpected end of grammar (expected ')')"},
      {"start: %json {\"uniqueItems\": true}\n", "lark grammar:1:8: in %json: json schema: unsupported keyword \"uniqueItems\" (only over items of at most 8 enum/const, boolean or null values) at /"},
      // Lark's dynamic lexer refuses terminals that can match nothing (GrammarError).
      {"start: A \"x\"\nA: /a*/\n", "lark grammar:2:1: terminal A matches the empty string (Lark's dynamic lexer refuses zero-width terminals)"},
      {"start: \"x\" /b?/\n", "lark grammar:1:12: /b?/ matches the empty string (Lark's dynamic lexer refuses zero-width terminals)"},
      {"start: \"x\"\n%ignore /[ ]*/\n",
       "lark grammar:2:9: %ignore operand matches the empty string (Lark's dynamic lexer refuses zero-width terminals)"},
  };
  for (const auto& [grammar, message] : cases) {
    const Status status = compile_error(grammar);
    EXPECT_EQ(status.message(), message) << grammar;
  }
  // Left recursion through another rule is refused (a rule's own is rewritten).
  const Status indirect = compile_error("start: a\na: b \"x\" | \"y\"\nb: a \"z\"\n");
  EXPECT_NE(indirect.message().find("left recursion"), std::string::npos) << indirect.message();
  EXPECT_TRUE(compile_error("%llguidance {}\nstart: \"a\"\n").is_ok());
}

}  // namespace
}  // namespace onnx_genai::testing
