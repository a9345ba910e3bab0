// Tokens a Lark grammar names (<|im_end|>, <tool_call>, <[151645]>) over qwen3's real vocabulary:
// such a token is matched by its id where the grammar takes it and nowhere else, and never by its
// bytes (ordinary tokens spelling "<tool_call>" do not satisfy it). Masks equal the naive
// per-token check extended to named tokens; a token the vocabulary lacks fails to compile naming
// it and its line:column. Python's Lark has no such tokens, so lark_corpus.json has none.
#include <gtest/gtest.h>

#include <variant>

#include "constraint_test_util.h"

namespace onnx_genai::testing {
namespace {

// qwen3's tokens, from its tokenizer.json: <|im_end|> is special and the test vocabulary's stop
// token, <|endoftext|> and <|im_start|> are special, <tool_call> is an added token with bytes.
constexpr int32_t kEndOfText = 151643;
constexpr int32_t kImStart = 151644;
constexpr int32_t kImEnd = 151645;
constexpr int32_t kToolCall = 151657;
constexpr int32_t kToolCallEnd = 151658;

const std::string kToolGrammar =
    "start: TEXT | TEXT? call+\n"
    "TEXT: /[^<]+/\n"
    "call: <tool_call> \"\\n\" %json {\"type\": \"object\", \"properties\": {\"name\": {\"const\": \"get_weather\"},\n"
    "  \"arguments\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}},\n"
    "  \"required\": [\"name\", \"arguments\"]} \"\\n\" </tool_call>\n";
const std::string kCallBody = "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n";

std::shared_ptr<CompiledConstraint> compile_lark(const std::string& grammar) {
  auto compiled = CompiledConstraint::compile({ConstraintKind::kLarkGrammar, grammar}, test_vocabulary("qwen3").vocabulary);
  EXPECT_TRUE(compiled.is_ok()) << compiled.status().message();
  return compiled.is_ok() ? *compiled : nullptr;
}

// Text spelled with the vocabulary's ordinary tokens, or a token taken by its id.
using Piece = std::variant<std::string, int32_t>;

std::vector<int32_t> tokens_of(const std::vector<Piece>& pieces) {
  std::vector<int32_t> out;
  for (const Piece& p : pieces) {
    if (const int32_t* id = std::get_if<int32_t>(&p)) {
      out.push_back(*id);
      continue;
    }
    const std::vector<int32_t> spelled = spell(test_vocabulary("qwen3"), std::get<std::string>(p));
    EXPECT_FALSE(spelled.empty()) << std::get<std::string>(p);
    out.insert(out.end(), spelled.begin(), spelled.end());
  }
  return out;
}

size_t popcount(const std::vector<uint64_t>& mask) {
  size_t n = 0;
  for (const uint64_t word : mask) n += static_cast<size_t>(__builtin_popcountll(word));
  return n;
}

// The mask after `prefix` against the naive definition, token by token: a token in `named` iff
// accept_token takes it (never by its bytes), another token with bytes iff its bytes fed one by
// one keep the text viable, a stop token iff the text is complete, any other token never.
// Returns how many tokens are allowed.
size_t expect_exact_mask(const std::shared_ptr<CompiledConstraint>& compiled, const std::vector<Piece>& prefix,
                         const std::vector<int32_t>& named) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  const std::vector<int32_t> ids = tokens_of(prefix);
  SCOPED_TRACE("after " + ::testing::PrintToString(ids));
  ConstraintMatcher probe(compiled);
  for (const int32_t id : ids) EXPECT_TRUE(probe.accept_token(id).is_ok()) << "prefix token " << id;
  std::vector<uint64_t> mask(probe.mask_words());
  EXPECT_TRUE(probe.compute_mask(mask).is_ok());
  size_t allowed = 0;
  for (int32_t id = 0; id < v.vocabulary->vocab_size(); ++id) {
    const std::string& bytes = v.vocabulary->token_bytes(id);
    const bool is_named = std::find(named.begin(), named.end(), id) != named.end();
    bool viable = false;
    if (is_named || !bytes.empty()) {
      viable = (is_named ? probe.accept_token(id) : probe.accept_bytes(bytes)).is_ok();
      if (viable) {
        EXPECT_TRUE(probe.rollback(1).is_ok());
      }
    } else {
      viable = id == v.eos && probe.is_complete();
    }
    allowed += viable;
    EXPECT_EQ(mask_has(mask, id), viable) << "token " << id << " '" << bytes << "'";
    if (mask_has(mask, id) != viable) return allowed;  // one report is enough
  }
  EXPECT_EQ(popcount(mask), allowed);
  return allowed;
}

TEST(SpecialTokens, MaskIsTheNaiveCheckExtendedToNamedTokens) {
  auto tool = compile_lark(kToolGrammar);
  ASSERT_NE(tool, nullptr);
  const std::vector<int32_t> tool_named = {kToolCall, kToolCallEnd};
  EXPECT_GT(expect_exact_mask(tool, {}, tool_named), 1000u);
  EXPECT_GT(expect_exact_mask(tool, {"I will look it up"}, tool_named), 1000u);
  EXPECT_GT(expect_exact_mask(tool, {"Sure", kToolCall}, tool_named), 0u);
  EXPECT_GT(expect_exact_mask(tool, {kToolCall, "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Os"}, tool_named), 1000u);
  EXPECT_EQ(expect_exact_mask(tool, {kToolCall, kCallBody}, tool_named), 1u);  // only </tool_call>
  EXPECT_EQ(expect_exact_mask(tool, {kToolCall, kCallBody, kToolCallEnd}, tool_named), 2u);  // another call or the stop

  // Where text may spell "<tool_call>" but the grammar takes no token, the added token's bytes
  // do not stand in for the text.
  auto lines = compile_lark("start: LINE <tool_call> LINE\nLINE: /[^\\n]+/\n");
  ASSERT_NE(lines, nullptr);
  EXPECT_GT(expect_exact_mask(lines, {"a"}, {kToolCall}), 1000u);
  EXPECT_GT(expect_exact_mask(lines, {"a", kToolCall, "b"}, {kToolCall}), 1000u);

  // A stop token the grammar names (<|im_end|>) is the grammar's where it takes it; a lexeme
  // (WORD) before a token ends there.
  auto chat = compile_lark("start: \"a\" <|im_end|> \"b\" | WORD <[151643]> <|im_end|>?\nWORD: /[a-z]+/\n");
  ASSERT_NE(chat, nullptr);
  const std::vector<int32_t> chat_named = {kImEnd, kEndOfText};
  EXPECT_GT(expect_exact_mask(chat, {}, chat_named), 1000u);
  EXPECT_GT(expect_exact_mask(chat, {"a"}, chat_named), 1000u);  // <|im_end|>, <|endoftext|> or more letters
  EXPECT_EQ(expect_exact_mask(chat, {"a", kImEnd}, chat_named), 1u);
  EXPECT_EQ(expect_exact_mask(chat, {"a", kImEnd, "b"}, chat_named), 1u);  // the stop token
  EXPECT_EQ(expect_exact_mask(chat, {"word", kEndOfText}, chat_named), 1u);  // <|im_end|>: the grammar's or the stop
}

TEST(SpecialTokens, NamedTokensMatchByIdOnlyAndOnlyWhereTheGrammarTakesThem) {
  auto compiled = compile_lark("start: <tool_call> \"x\" <|endoftext|>\n");
  ASSERT_NE(compiled, nullptr);
  ConstraintMatcher m(compiled);
  std::vector<uint64_t> mask(m.mask_words());
  ASSERT_TRUE(m.compute_mask(mask).is_ok());
  EXPECT_EQ(popcount(mask), 1u);
  EXPECT_TRUE(mask_has(mask, kToolCall));
  // The same text in bytes (so in ordinary tokens) is not the token.
  EXPECT_FALSE(m.accept_bytes("<tool_call>").is_ok());
  EXPECT_FALSE(m.accept_token(kEndOfText).is_ok());
  EXPECT_FALSE(m.accept_token(kImStart).is_ok());
  ASSERT_TRUE(m.accept_token(kToolCall).is_ok());
  ASSERT_TRUE(m.compute_mask(mask).is_ok());
  EXPECT_FALSE(mask_has(mask, kToolCall));
  EXPECT_FALSE(mask_has(mask, kEndOfText));
  ASSERT_TRUE(m.accept_bytes("x").is_ok());
  EXPECT_FALSE(m.is_complete());
  ASSERT_TRUE(m.compute_mask(mask).is_ok());
  EXPECT_EQ(popcount(mask), 1u);
  EXPECT_TRUE(mask_has(mask, kEndOfText));
  ASSERT_TRUE(m.accept_token(kEndOfText).is_ok());
  EXPECT_TRUE(m.is_complete());
  EXPECT_FALSE(m.is_terminated());
  ASSERT_TRUE(m.rollback(2).is_ok());  // back before "x"
  EXPECT_FALSE(m.accept_token(kEndOfText).is_ok());
  ASSERT_TRUE(m.accept_bytes("x").is_ok());
  ASSERT_TRUE(m.accept_token(kEndOfText).is_ok());
  ASSERT_TRUE(m.accept_token(kImEnd).is_ok());  // the stop token, now that the text is complete
  EXPECT_TRUE(m.is_terminated());
}

TEST(SpecialTokens, ByIdByNameRepeatedAndAfterIgnoredText) {
  const auto verdict = [](const std::shared_ptr<CompiledConstraint>& compiled, const std::vector<Piece>& pieces) {
    ConstraintMatcher m(compiled);
    for (const int32_t id : tokens_of(pieces)) {
      if (!m.accept_token(id).is_ok()) return std::string("rejected");
    }
    return std::string(m.is_complete() ? "complete" : "prefix");
  };
  auto by_id = compile_lark("start: \"a\" <[151643]>{2,3}\n");
  auto by_name = compile_lark("start: \"a\" <|endoftext|> <|endoftext|> <[151643]>?\n");
  ASSERT_TRUE(by_id && by_name);
  for (const auto& compiled : {by_id, by_name}) {
    EXPECT_EQ(verdict(compiled, {"a"}), "prefix");
    EXPECT_EQ(verdict(compiled, {"a", kEndOfText}), "prefix");
    EXPECT_EQ(verdict(compiled, {"a", kEndOfText, kEndOfText}), "complete");
    EXPECT_EQ(verdict(compiled, {"a", kEndOfText, kEndOfText, kEndOfText}), "complete");
    EXPECT_EQ(verdict(compiled, {"a", kEndOfText, kEndOfText, kEndOfText, kEndOfText}), "rejected");
    EXPECT_EQ(verdict(compiled, {"a", "<|endoftext|>"}), "rejected");
  }
  // %ignore may come before a token as before a terminal.
  auto spaced = compile_lark("start: \"a\" <|endoftext|> \"b\"\n%ignore \" \"\n");
  ASSERT_NE(spaced, nullptr);
  EXPECT_EQ(verdict(spaced, {"a  ", kEndOfText, " b "}), "complete");
  EXPECT_EQ(verdict(spaced, {"a", kEndOfText, "b"}), "complete");
}

TEST(SpecialTokens, RefusalsNameTheTokenAndWhere) {
  const std::string size = std::to_string(test_vocabulary("qwen3").vocabulary->vocab_size());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"start: \"a\" <|nope|>\n", "lark grammar:1:12: token <|nope|> is not in the vocabulary"},
      {"start: \"a\"\n  | <[" + size + "]>\n", "lark grammar:2:5: token <[" + size + "]> is outside the vocabulary (" + size + " tokens)"},
      {"start: <[x]>\n", "lark grammar:1:8: bad token id \"x\" in <[x]> (expected ID or FIRST-LAST, numbers of up to 9 digits)"},
      {"start: <[1234567890]>\n",
       "lark grammar:1:8: bad token id \"1234567890\" in <[1234567890]> (expected ID or FIRST-LAST, numbers of up to 9 digits)"},
      {"start: \"a\" <|im_end\n", "lark grammar:1:12: unterminated token reference <...>"},
      {"start: <>\n", "lark grammar:1:8: empty token reference <>"},
      {"start: A\nA: \"a\" <|im_end|>\n", "lark grammar:2:8: token <|im_end|> inside terminal A (tokens may come only in rules)"},
      {"start: \"a\"\n%ignore <|im_end|>\n", "lark grammar:2:9: token <|im_end|> inside %ignore (tokens may come only in rules)"},
  };
  for (const auto& [grammar, message] : cases) {
    auto compiled = CompiledConstraint::compile({ConstraintKind::kLarkGrammar, grammar}, test_vocabulary("qwen3").vocabulary);
    EXPECT_EQ(compiled.is_ok() ? "" : compiled.status().message(), message) << grammar;
  }
}

}  // namespace
}  // namespace onnx_genai::testing
