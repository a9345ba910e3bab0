// Token sets in Lark grammars (llguidance's <[128000-128255]>, <[1,5-9,12]>, <[^7]>, <[*]>) over
// qwen3's real vocabulary. Where the grammar takes a set, the mask holds exactly its ids (special
// and stop tokens included: a set names them); an ordinary token of a set is taken there by id
// and, where text may come too, also by its bytes (both readings stay alive); elsewhere it spells
// text as any token does, unless the grammar names it alone (<[id]>). Each mask is checked token
// by token against a naive one: the set's ids, plus every token whose bytes continue some reading
// of the text (a grammar without tokens, after its text), plus the stop token on complete text;
// and accept_token must take exactly what the mask allows. Refusals name the set and line:column.
#include <gtest/gtest.h>

#include <variant>

#include "constraint_test_util.h"

namespace onnx_genai::testing {
namespace {

// qwen3's special tokens (tokenizer.json); <|im_end|> is the test vocabulary's stop token.
constexpr int32_t kEndOfText = 151643;
constexpr int32_t kImStart = 151644;
constexpr int32_t kImEnd = 151645;

using IdRanges = std::vector<std::pair<int32_t, int32_t>>;  // inclusive

const TestVocabulary& qwen() { return test_vocabulary("qwen3"); }
int32_t vocab_size() { return qwen().vocabulary->vocab_size(); }

std::shared_ptr<CompiledConstraint> compile_lark(const std::string& grammar) {
  auto compiled = CompiledConstraint::compile({ConstraintKind::kLarkGrammar, grammar}, qwen().vocabulary);
  EXPECT_TRUE(compiled.is_ok()) << grammar << ": " << compiled.status().message();
  return compiled.is_ok() ? *compiled : nullptr;
}

// The one ordinary token spelling `word`.
int32_t token_of(const std::string& word) {
  const std::vector<int32_t> ids = spell(qwen(), word);
  EXPECT_EQ(ids.size(), 1u) << word;
  return ids.size() == 1 ? ids[0] : -1;
}

// Text (fed as bytes) or a token (fed by id).
using Piece = std::variant<std::string, int32_t>;

Status advance(ConstraintMatcher& m, const std::vector<Piece>& pieces) {
  for (const Piece& p : pieces) {
    const int32_t* id = std::get_if<int32_t>(&p);
    OG_RETURN_IF_ERROR(id != nullptr ? m.accept_token(*id) : m.accept_bytes(std::get<std::string>(p)));
  }
  return Status::ok();
}

// One way the text may go on: `grammar` (no tokens) after `text`.
struct Reading {
  std::string grammar;
  std::string text;
};

struct Expected {
  IdRanges by_id;                // the sets the grammar takes here
  std::vector<Reading> readings;  // what text may come here
  std::vector<int32_t> alone;    // tokens the grammar names alone: never by their bytes
};

bool in(const IdRanges& ranges, int32_t id) {
  for (const auto& [lo, hi] : ranges) {
    if (lo <= id && id <= hi) return true;
  }
  return false;
}

// The mask after `prefix` against the naive one, token by token; accept_token must take exactly
// the tokens the mask allows. Returns how many it allows.
size_t expect_mask(const std::shared_ptr<CompiledConstraint>& compiled, const std::vector<Piece>& prefix, const Expected& expected) {
  SCOPED_TRACE("after " + ::testing::PrintToString(prefix.size()) + " pieces");
  ConstraintMatcher m(compiled);
  EXPECT_TRUE(advance(m, prefix).is_ok());
  std::vector<uint64_t> mask(m.mask_words());
  EXPECT_TRUE(m.compute_mask(mask).is_ok());
  std::vector<std::unique_ptr<ConstraintMatcher>> readings;
  for (const Reading& r : expected.readings) {
    auto reference = compile_lark(r.grammar);
    if (!reference) return 0;
    readings.push_back(std::make_unique<ConstraintMatcher>(reference));
    EXPECT_TRUE(readings.back()->accept_bytes(r.text).is_ok()) << r.grammar << " after '" << r.text << "'";
  }
  size_t allowed = 0;
  for (int32_t id = 0; id < vocab_size(); ++id) {
    const std::string& bytes = qwen().vocabulary->token_bytes(id);
    const bool alone = std::find(expected.alone.begin(), expected.alone.end(), id) != expected.alone.end();
    bool naive = in(expected.by_id, id) || (id == qwen().eos && m.is_complete());
    for (auto& r : readings) {
      if (naive || bytes.empty() || alone) break;
      naive = r->accept_bytes(bytes).is_ok();
      if (naive) {
        EXPECT_TRUE(r->rollback(1).is_ok());
      }
    }
    const bool taken = m.accept_token(id).is_ok();
    if (taken) {
      EXPECT_TRUE(m.rollback(1).is_ok());
    }
    allowed += mask_has(mask, id);
    EXPECT_EQ(mask_has(mask, id), naive) << "token " << id << " '" << bytes << "'";
    EXPECT_EQ(mask_has(mask, id), taken) << "mask and accept_token disagree on token " << id << " '" << bytes << "'";
    if (mask_has(mask, id) != naive || mask_has(mask, id) != taken) return allowed;  // one report is enough
  }
  return allowed;
}

// complete, prefix or rejected.
std::string verdict(const std::shared_ptr<CompiledConstraint>& compiled, const std::vector<Piece>& pieces) {
  ConstraintMatcher m(compiled);
  if (!advance(m, pieces).is_ok()) return "rejected";
  return m.is_complete() ? "complete" : "prefix";
}

TEST(TokenSets, RangesAndListsAllowExactlyTheirIds) {
  // Overlapping and repeated items are one set: {1, 5..12}.
  auto compiled = compile_lark("start: \"a\" <[151643-151650]> \"b\" | <[1,5-9,12,7-8,10-11]> \"x\"\n");
  ASSERT_NE(compiled, nullptr);
  EXPECT_EQ(expect_mask(compiled, {}, {.by_id = {{1, 1}, {5, 12}}, .readings = {{"start: \"a\"\n", ""}}}), 10u);  // and "a"
  EXPECT_EQ(expect_mask(compiled, {"a"}, {.by_id = {{kEndOfText, kEndOfText + 7}}}), 8u);
  // The stop token in a set is the grammar's where it takes it: the output goes on.
  EXPECT_EQ(expect_mask(compiled, {"a", kImEnd}, {.readings = {{"start: \"b\"\n", ""}}}), 1u);
  EXPECT_EQ(verdict(compiled, {"a", kImEnd, "b"}), "complete");
  EXPECT_EQ(verdict(compiled, {"a", kEndOfText + 8}), "rejected");
  EXPECT_EQ(verdict(compiled, {12, "x"}), "complete");
  EXPECT_EQ(verdict(compiled, {4}), "rejected");
  // The set is a token, not text: its tokens' bytes do not stand in for it.
  EXPECT_EQ(verdict(compiled, {qwen().vocabulary->token_bytes(12), "x"}), "rejected");
}

TEST(TokenSets, NegationAndWildcardTakeEveryOtherId) {
  const int32_t v = vocab_size();
  auto negated = compile_lark("start: \"a\" <[^151643-151645,9]> | \"b\" <[^7]>{2}\n");
  ASSERT_NE(negated, nullptr);
  const IdRanges but_specials = {{0, 8}, {10, kEndOfText - 1}, {kImEnd + 1, v - 1}};
  EXPECT_EQ(expect_mask(negated, {"a"}, {.by_id = but_specials}), static_cast<size_t>(v - 4));
  EXPECT_EQ(expect_mask(negated, {"b"}, {.by_id = {{0, 6}, {8, v - 1}}}), static_cast<size_t>(v - 1));
  EXPECT_EQ(expect_mask(negated, {"b", kImEnd}, {.by_id = {{0, 6}, {8, v - 1}}}), static_cast<size_t>(v - 1));
  EXPECT_EQ(expect_mask(negated, {"b", kImStart, 8}, {}), 1u);  // complete: only the stop token
  EXPECT_EQ(verdict(negated, {"a", kImEnd}), "rejected");
  EXPECT_EQ(verdict(negated, {"a", 10}), "complete");

  auto any = compile_lark("start: <[*]> \"!\"\n");
  ASSERT_NE(any, nullptr);
  EXPECT_EQ(expect_mask(any, {}, {.by_id = {{0, v - 1}}}), static_cast<size_t>(v));
  EXPECT_EQ(expect_mask(any, {kEndOfText}, {.readings = {{"start: \"!\"\n", ""}}}), 1u);
  EXPECT_EQ(verdict(any, {kImEnd, "!"}), "complete");
  EXPECT_EQ(verdict(any, {"!"}), "rejected");
}

TEST(TokenSets, OrdinaryTokensInASetMatchByIdThereAndByBytesElsewhere) {
  const int32_t hello = token_of("hello"), world = token_of("world");
  ASSERT_TRUE(hello >= 0 && world >= 0);
  const std::string set = "<[" + std::to_string(hello) + "," + std::to_string(world) + "]>";
  const std::string word = "WORD: /[a-z]+/\n";
  // At the start the set and text may both come; "hello" is both.
  auto both = compile_lark("start: " + set + " WORD \"!\" | WORD \"?\"\n" + word);
  ASSERT_NE(both, nullptr);
  const Reading question{"start: WORD \"?\"\n" + word, ""};
  EXPECT_GT(expect_mask(both, {}, {.by_id = {{hello, hello}, {world, world}}, .readings = {question}}), 1000u);
  // Both readings stay alive after it: by id a WORD and "!" follow, by bytes "hello" goes on.
  const std::vector<Reading> after_hello = {{"start: WORD \"!\"\n" + word, ""}, {"start: WORD \"?\"\n" + word, "hello"}};
  EXPECT_GT(expect_mask(both, {hello}, {.readings = after_hello}), 1000u);
  EXPECT_EQ(verdict(both, {hello, "?"}), "complete");
  EXPECT_EQ(verdict(both, {hello, "abc!"}), "complete");
  EXPECT_EQ(verdict(both, {hello, "!"}), "rejected");
  EXPECT_EQ(verdict(both, {"hello", "!"}), "rejected");  // as text, "hello" is no token of the set
  // Where only text may come, the set's tokens are text like any other.
  EXPECT_GT(expect_mask(both, {"abc"}, {.readings = {{question.grammar, "abc"}}}), 1000u);
  EXPECT_GT(expect_mask(both, {world}, {.readings = {{"start: WORD \"!\"\n" + word, ""}, {question.grammar, "world"}}}), 1000u);
  EXPECT_EQ(verdict(both, {world, hello, world, "!"}), "complete");

  // A token the grammar also names alone (<[id]>) is the grammar's only, never text.
  auto alone = compile_lark("start: " + set + " WORD | <[" + std::to_string(hello) + "]> \"!\"\n" + word);
  ASSERT_NE(alone, nullptr);
  EXPECT_EQ(expect_mask(alone, {}, {.by_id = {{hello, hello}, {world, world}}, .alone = {hello}}), 2u);
  EXPECT_GT(expect_mask(alone, {world}, {.readings = {{"start: WORD\n" + word, ""}}, .alone = {hello}}), 1000u);
  EXPECT_GT(expect_mask(alone, {hello}, {.readings = {{"start: WORD | \"!\"\n" + word, ""}}, .alone = {hello}}), 1000u);
  EXPECT_EQ(verdict(alone, {world, "hello"}), "complete");
  EXPECT_EQ(verdict(alone, {world, hello}), "rejected");
}

TEST(TokenSets, SpecialTokensOnlyWhereASetHoldsThem) {
  // A set of ordinary tokens leaves the special ones out, as text does.
  auto ordinary = compile_lark("start: <[0-1000]>+ | \"a\"\n");
  ASSERT_NE(ordinary, nullptr);
  EXPECT_GT(expect_mask(ordinary, {}, {.by_id = {{0, 1000}}, .readings = {{"start: \"a\"\n", ""}}}), 1000u);
  EXPECT_GT(expect_mask(ordinary, {1000}, {.by_id = {{0, 1000}}}), 1000u);  // complete: the stop token too
  EXPECT_EQ(verdict(ordinary, {kEndOfText}), "rejected");
  // The stop token, taken by <[*]>, is the grammar's; then, the text complete, it stops.
  auto any = compile_lark("start: \"a\" <[*]>\n");
  ASSERT_NE(any, nullptr);
  ConstraintMatcher m(any);
  ASSERT_TRUE(advance(m, {"a", kImEnd}).is_ok());
  EXPECT_TRUE(m.is_complete());
  EXPECT_FALSE(m.is_terminated());
  EXPECT_EQ(expect_mask(any, {"a", kImEnd}, {}), 1u);
  ASSERT_TRUE(m.accept_token(kImEnd).is_ok());
  EXPECT_TRUE(m.is_terminated());
}

TEST(TokenSets, RepeatRollBackFollowIgnoredTextAndStopForcing) {
  auto compiled = compile_lark("start: \"a\" <[5-9]>{2,3} \"b\"?\n%ignore \" \"\n");
  ASSERT_NE(compiled, nullptr);
  EXPECT_EQ(verdict(compiled, {"a", 5}), "prefix");
  EXPECT_EQ(verdict(compiled, {"a ", 5, " ", 9}), "complete");
  EXPECT_EQ(verdict(compiled, {"a", 5, 6, 7, " b "}), "complete");
  EXPECT_EQ(verdict(compiled, {"a", 5, 6, 7, 8}), "rejected");
  ConstraintMatcher m(compiled);
  ASSERT_TRUE(advance(m, {"a", 5, 6}).is_ok());
  ASSERT_TRUE(m.rollback(2).is_ok());
  EXPECT_FALSE(m.accept_token(4).is_ok());
  EXPECT_TRUE(m.accept_token(9).is_ok());
  // Fast-forward stops where a set may come.
  auto forced = compile_lark("start: \"ab\" <[5-9]> \"cd\"\n");
  ASSERT_NE(forced, nullptr);
  ConstraintMatcher f(forced);
  Result<std::string> bytes = f.forced_bytes(64);
  EXPECT_EQ(bytes.is_ok() ? *bytes : bytes.status().message(), "ab");
  ASSERT_TRUE(advance(f, {"ab", 7}).is_ok());
  bytes = f.forced_bytes(64);
  EXPECT_EQ(bytes.is_ok() ? *bytes : bytes.status().message(), "cd");
}

TEST(TokenSets, RefusalsNameTheSetAndWhere) {
  const int32_t v = vocab_size();
  const std::string size = std::to_string(v), last = std::to_string(v - 1);
  const std::string bad = " (expected ID or FIRST-LAST, numbers of up to 9 digits)";
  const std::string excludes = " excludes every token of the vocabulary (" + size + ")";
  const std::string outside = " is outside the vocabulary (" + size + " tokens)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"start: <[1-]>\n", "lark grammar:1:8: bad token id \"1-\" in <[1-]>" + bad},
      {"start: <[-5]>\n", "lark grammar:1:8: bad token id \"-5\" in <[-5]>" + bad},
      {"start: <[1-2-3]>\n", "lark grammar:1:8: bad token id \"1-2-3\" in <[1-2-3]>" + bad},
      {"start: <[1, 2]>\n", "lark grammar:1:8: bad token id \" 2\" in <[1, 2]>" + bad},
      {"start: \"a\"\n  | <[^x]>\n", "lark grammar:2:5: bad token id \"x\" in <[^x]>" + bad},
      {"start: <[1,2>\n", "lark grammar:1:8: bad token reference <[1,2> (expected <[ID]>, <[FIRST-LAST,ID,...]>, <[^...]> or <[*]>)"},
      {"start: <[*,5]>\n", "lark grammar:1:8: the wildcard stands alone: <[*]> (in <[*,5]>)"},
      {"start: <[,]>\n", "lark grammar:1:8: no token id in <[,]>"},
      {"start: <[^]>\n", "lark grammar:1:8: no token id in <[^]>"},
      // Empty sets.
      {"start: \"a\" <[9-3]>\n", "lark grammar:1:12: empty token range \"9-3\" in <[9-3]> (its first id is above its last)"},
      {"start: <[^*]>\n", "lark grammar:1:8: <[^*]> excludes every token (llguidance refuses it too)"},
      {"start: <[^0-" + last + "]>\n", "lark grammar:1:8: token set <[^0-" + last + "]>" + excludes},
      {"start: <[^5-" + last + ",0-6]>\n", "lark grammar:1:8: token set <[^5-" + last + ",0-6]>" + excludes},
      // Ids outside the vocabulary, each where it was written.
      {"start: \"a\"\n  | <[5-" + size + "]>\n", "lark grammar:2:5: token id " + size + " in <[5-" + size + "]>" + outside},
      {"start: <[^1,999999999]>\n", "lark grammar:1:8: token id 999999999 in <[^1,999999999]>" + outside},
      {"start: A\nA: \"a\" <[1-5]>\n", "lark grammar:2:8: token <[1-5]> inside terminal A (tokens may come only in rules)"},
      {"start: \"a\"\n%ignore <[*]>\n", "lark grammar:2:9: token <[*]> inside %ignore (tokens may come only in rules)"},
  };
  for (const auto& [grammar, message] : cases) {
    auto compiled = CompiledConstraint::compile({ConstraintKind::kLarkGrammar, grammar}, qwen().vocabulary);
    EXPECT_EQ(compiled.is_ok() ? "" : compiled.status().message(), message) << grammar;
  }
}

}  // namespace
}  // namespace onnx_genai::testing
