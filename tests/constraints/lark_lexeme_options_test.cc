// llguidance's lexeme options on Lark rules (name[lazy], name[stop=S], name[suffix=S]) over
// qwen3's vocabulary. Python's Lark has no such options, so lark_oracle.py cannot judge them:
// each option grammar is held to a plain grammar that spells its language with ordinary
// terminals (derived by hand from llguidance's docs/syntax.md and lexer: a lazy lexeme ends at
// its first match, and what began beside it dies there; stop= and suffix= end it at the first
// match of the body then S; S stays in the text, and a stop of one string is read again by what
// follows when that must take exactly it first), text by text over every string of a small
// alphabet; then llguidance's tool-calling grammar, masks equal to the naive per-token check,
// accept_token taking exactly what the mask allows, and refusals naming the option and line:column.
#include <gtest/gtest.h>

#include "constraint_test_util.h"

namespace onnx_genai::testing {
namespace {

const TestVocabulary& qwen() { return test_vocabulary("qwen3"); }

std::shared_ptr<CompiledConstraint> compile_lark(const std::string& grammar) {
  auto compiled = CompiledConstraint::compile({ConstraintKind::kLarkGrammar, grammar}, qwen().vocabulary);
  EXPECT_TRUE(compiled.is_ok()) << grammar << ": " << compiled.status().message();
  return compiled.is_ok() ? *compiled : nullptr;
}

Status compile_error(const std::string& grammar) {
  auto compiled = CompiledConstraint::compile({ConstraintKind::kLarkGrammar, grammar}, qwen().vocabulary);
  return compiled.is_ok() ? Status::ok() : compiled.status();
}

// Every string over `alphabet` of at most `length` bytes.
std::vector<std::string> all_texts(const std::string& alphabet, size_t length) {
  std::vector<std::string> out{""};
  for (size_t begin = 0, n = 0; n < length; ++n) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i) {
      for (const char c : alphabet) out.push_back(out[i] + c);
    }
    begin = end;
  }
  return out;
}

// `options` and `plain` classify every text over `alphabet` (up to `length` bytes) alike; returns
// how many texts each verdict got, so that a test can see both languages are not trivial.
std::map<std::string, int> expect_same_language(const std::string& options, const std::string& plain, const std::string& alphabet,
                                                size_t length = 7) {
  std::map<std::string, int> counts;
  auto first = compile_lark(options), second = compile_lark(plain);
  if (!first || !second) return counts;
  for (const std::string& text : all_texts(alphabet, length)) {
    const std::string ours = verdict(first, text);
    ++counts[ours];
    EXPECT_EQ(ours, verdict(second, text)) << "'" << text << "'\n" << options << "\n" << plain;
    if (ours != verdict(second, text)) break;  // one report is enough
  }
  return counts;
}

void expect_nontrivial(const std::map<std::string, int>& counts) {
  for (const char* kind : {"complete", "prefix", "rejected"}) EXPECT_GT(counts.count(kind) ? counts.at(kind) : 0, 0) << kind;
}

TEST(LarkLexemeOptions, LazyEndsAtTheFirstMatch) {
  // Greedy, /a+/ swallows every "a", so nothing follows it; lazy, it is one "a".
  auto greedy = compile_lark("start: X \"a\"\nX: /a+/\n");
  auto lazy = compile_lark("start: x \"a\"\nx[lazy]: /a+/\n");
  ASSERT_TRUE(greedy && lazy);
  EXPECT_EQ(verdict(greedy, "aa"), "prefix");  // a dead end a later byte shows (constraints.md)
  EXPECT_EQ(verdict(greedy, "aab"), "rejected");
  EXPECT_EQ(verdict(lazy, "aa"), "complete");
  EXPECT_EQ(verdict(lazy, "aaa"), "rejected");
  expect_nontrivial(expect_same_language("start: x \"b\"\nx[lazy]: /a+/\n", "start: \"a\" \"b\"\n", "ab"));
  // A delimiter ends each lazy item at its first occurrence; greedy, the first item takes all.
  expect_nontrivial(expect_same_language("start: x x\nx[lazy]: /[a;]*;/\n", "start: X X\nX: /a*;/\n", "a;"));
  auto greedy_items = compile_lark("start: Y Y\nY: /[a;]*;/\n");
  ASSERT_NE(greedy_items, nullptr);
  for (const std::string& text : all_texts("a;", 7)) EXPECT_NE(verdict(greedy_items, text), "complete") << text;
}

TEST(LarkLexemeOptions, ALazyMatchCutsWhatBeganBesideIt) {
  // llguidance's lexer emits a lazy lexeme the moment it matches: a terminal, a string, and what
  // follows them, begun where it began, die there.
  expect_same_language("start: x | B\nx[lazy]: /a+/\nB: /a+b/\n", "start: \"a\"\n", "ab");
  expect_same_language("start: x | \"a\" \"b\"+\nx[lazy]: /ab+c/\n", "start: /ab+c/ | /ab+/\n", "abc");
  auto strings = compile_lark("start: x \"!\" | \"ab\" | \"ab\" \"cd\"\nx[lazy]: /abc/\n");
  ASSERT_NE(strings, nullptr);
  EXPECT_EQ(verdict(strings, "ab"), "complete");
  EXPECT_EQ(verdict(strings, "abc!"), "complete");
  EXPECT_EQ(verdict(strings, "abc"), "prefix");
  EXPECT_EQ(verdict(strings, "abcd"), "rejected");
  // Free text beside lazy headers, the shape of llguidance's tool calling: the text ends at the
  // first header's match, so items are (text then "ab") "!" and the text at the end has no "ab".
  expect_nontrivial(expect_same_language("start: (h \"!\")* T?\nh[lazy]: /[ab!]*ab/\nT: /[ab!]+/\n",
                                         "start: (H \"!\")* T?\nH: /([b!]|a+!)*a+b/\nT: /([b!]|a+!)+a*|a+/\n", "ab!"));
  // The same after a token, and after a character read whole (Automaton::whole_character_step).
  auto after_token = compile_lark("start: <|im_start|> (h \"!\" | T)\nh[lazy]: /[a-z]*ab/\nT: /[a-z]+/\n");
  ASSERT_NE(after_token, nullptr);
  const std::vector<std::pair<std::string, std::string>> after_token_texts = {{"a", "complete"}, {"ab", "prefix"}, {"ab!", "complete"}};
  for (const auto& [text, expected] : after_token_texts) {
    ConstraintMatcher m(after_token);
    ASSERT_TRUE(m.accept_token(151644).is_ok());  // qwen3's <|im_start|>
    const bool taken = m.accept_bytes(text).is_ok();
    EXPECT_EQ(!taken ? "rejected" : m.is_complete() ? "complete" : "prefix", expected) << text;
  }
  // Lazy lexemes begun together do not cut each other.
  expect_nontrivial(expect_same_language("start: x \"!\" | y\nx[lazy]: /[ab]*b/\ny[lazy]: /[ab]*aa/\n",
                                         "start: /a*b/ \"!\" | /(b|ab)*aa/\n", "ab!"));
}

TEST(LarkLexemeOptions, ToolCallsBetweenFreeText) {
  // llguidance's docs/syntax.md example, with its text terminals non-empty (zero-width terminals
  // are refused here, as Lark refuses them).
  const std::string grammar =
      "start: (f_foo | f_bar)* f_end?\nf_end: TEXT\nTEXT: /(.|\\n)+/\n"
      "f_foo_hd[lazy]: /(.|\\n)*/ \"<function\"\nf_foo: f_foo_hd \"=foo>\" %json {\"type\": \"object\"} \"</function>\"\n"
      "f_bar_hd[lazy]: /(.|\\n)*/ \"<function\"\nf_bar: f_bar_hd \"=bar>\" /[0-9]+/ \"</function>\"\n";
  auto calls = compile_lark(grammar);
  ASSERT_NE(calls, nullptr);
  EXPECT_EQ(verdict(calls, "no call here"), "complete");
  EXPECT_EQ(verdict(calls, "call <function=bar>12</function> and\n<function=foo>{\"a\":1}</function>done"), "complete");
  EXPECT_EQ(verdict(calls, "text <function"), "prefix");  // the header ended the free text
  EXPECT_EQ(verdict(calls, "text <function=baz>"), "rejected");
  EXPECT_EQ(verdict(calls, "text <function=bar>x"), "rejected");
  ConstraintMatcher m(calls);
  ASSERT_TRUE(m.accept_bytes("text <function=b").is_ok());
  auto forced = m.forced_bytes(64);
  ASSERT_TRUE(forced.is_ok());
  EXPECT_EQ(*forced, "ar>");
  EXPECT_GT(expect_exact_mask(qwen(), calls, "text <function", compile_lark(grammar)), 0u);
}

TEST(LarkLexemeOptions, SuffixStaysInTheTextAndIsNeverReadAgain) {
  expect_nontrivial(expect_same_language("start: x \"!\"\nx[suffix=\";\"]: /[a;]*/\n", "start: /a*;/ \"!\"\n", "a;!"));
  // What follows must take the suffix again: "a;;!", never "a;!".
  expect_nontrivial(expect_same_language("start: x \";\" \"!\"\nx[suffix=\";\"]: /[a;]*/\n", "start: /a*;/ \";\" \"!\"\n", "a;!"));
  // The suffix may be a regex or a terminal; a string of several bytes ends at its first match.
  expect_same_language("start: x \"!\"\nx[suffix=/[;.]/]: /[a;.]*/\n", "start: /a*[;.]/ \"!\"\n", "a;.!");
  expect_same_language("start: x \"!\"\nx[suffix=END]: /[a;]*/\nEND: \";\"\n", "start: /a*;/ \"!\"\n", "a;!");
  // Over {a, b}, a text whose first "ab" is its end is b*a+b.
  expect_nontrivial(expect_same_language("start: x x\nx[suffix=\"ab\"]: /[ab]*/\n", "start: X X\nX: /b*a+b/\n", "ab"));
  auto end = compile_lark("start: x \"!\"\nx[suffix=\"<end>\"]: /.*/\n");
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(verdict(end, "foo<end>!"), "complete");
  EXPECT_EQ(verdict(end, "foo<en"), "prefix");
  EXPECT_EQ(verdict(end, "foo<end>"), "prefix");
  EXPECT_EQ(verdict(end, "foo<end>bar<end>!"), "rejected");  // the first <end> ends it
  EXPECT_EQ(verdict(end, "a<b>c<en<end>!"), "complete");
}

TEST(LarkLexemeOptions, StopIsReadAgainOnlyWhereWhatFollowsMustTakeIt) {
  // llguidance's `outer_stop: with_stop "<end>"`: the stop is written once.
  auto outer = compile_lark("start: with_stop \"<end>\"\nwith_stop[stop=\"<end>\"]: /.*/\n");
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(verdict(outer, "foo<end>"), "complete");
  EXPECT_EQ(verdict(outer, "foo<end><"), "rejected");
  EXPECT_EQ(verdict(outer, "<end>"), "complete");
  EXPECT_EQ(verdict(outer, "foo<end>bar<end>"), "rejected");
  // Where what follows may begin otherwise (`outer_stop_problem`), or nothing follows, the stop
  // stays and the rest comes after it: llguidance would take its tokens back, which generation
  // here does not do (as in llguidance without backtracking).
  auto problem = compile_lark("start: with_stop \"b\"\nwith_stop[stop=\"<end>\"]: /.*/\n");
  auto alone = compile_lark("start: with_stop\nwith_stop[stop=\"<end>\"]: /.*/\n");
  ASSERT_TRUE(problem && alone);
  EXPECT_EQ(verdict(problem, "foo<end>b"), "complete");
  EXPECT_EQ(verdict(problem, "foob"), "prefix");
  EXPECT_EQ(verdict(alone, "foo<end>"), "complete");
  EXPECT_EQ(verdict(alone, "foo"), "prefix");
  // Over every short text: re-read where forced, kept where not, for a string, a one-string
  // regex and a terminal; a regex of several strings is never re-read.
  const std::string reread = "start: /a*;/ \"!\"\n";
  expect_nontrivial(expect_same_language("start: x \";\" \"!\"\nx[stop=\";\"]: /[a;]*/\n", reread, "a;!"));
  expect_same_language("start: x \";\" \"!\"\nx[stop=/;/]: /[a;]*/\n", reread, "a;!");
  expect_same_language("start: x \";\" \"!\"\nx[stop=SEMI]: /[a;]*/\nSEMI: \";\"\n", reread, "a;!");
  expect_same_language("start: x \";!\"\nx[stop=\";\"]: /[a;]*/\n", reread, "a;!");
  expect_nontrivial(expect_same_language("start: x \"!\"\nx[stop=\";\"]: /[a;]*/\n", "start: /a*;/ \"!\"\n", "a;!"));
  expect_nontrivial(expect_same_language("start: x \";\" \"!\"\nx[stop=/[;.]/]: /[a;.]*/\n", "start: /a*[;.]/ \";\" \"!\"\n", "a;.!"));
  // Not forced where the text may go two ways after the lexeme.
  expect_nontrivial(expect_same_language("start: x (\";\" | \".\") \"!\"\nx[stop=\";\"]: /[a;]*/\n",
                                         "start: /a*;/ (\";\" | \".\") \"!\"\n", "a;.!"));
  // A stop of several bytes, re-read by a string that goes on after it.
  expect_nontrivial(expect_same_language("start: x \"ab!\"\nx[stop=\"ab\"]: /[ab]*/\n", "start: /b*a+b/ \"!\"\n", "ab!", 6));
  // A greedy terminal before the stop lexeme keeps its guard past the re-read bytes: "ab;c" is
  // not A="a", x="b;" then "c" re-reading ";", since A would match all of it.
  expect_nontrivial(expect_same_language("start: A x \";\"\nA: /a;?/\nx[stop=\";\"]: /b*/\n", "start: A [B] \";\"\nA: /a;?/\nB: /b+/\n", "ab;"));
  expect_nontrivial(expect_same_language("start: A x \";c\"\nA: /a(b;c)?/\nx[stop=\";\"]: /b*/\n",
                                         "start: A [B] \";c\"\nA: /a(b;c)?/\nB: /b+/\n", "ab;c"));
}

TEST(LarkLexemeOptions, IgnoredTextComesBeforeTheLexemeNotInside) {
  // %ignore may come before the lexeme as before a terminal, and not inside it.
  expect_nontrivial(expect_same_language("%ignore \" \"\nstart: x+ \"!\"\nx[lazy]: /a+/\n", "%ignore \" \"\nstart: \"a\"+ \"!\"\n", "a !"));
  expect_same_language("%ignore \" \"\nstart: x \"!\"\nx[suffix=\";\"]: /[a;]*/\n", "%ignore \" \"\nstart: X \"!\"\nX: /a*;/\n", "a; !");
  // Ignored text may come between the stop and what follows, so the stop is not forced there:
  // it stays, and what follows comes after it (llguidance's skip lexeme is possible there too).
  expect_nontrivial(expect_same_language("%ignore \" \"\nstart: x \";\" \"!\"\nx[stop=\";\"]: /[a;]*/\n",
                                         "%ignore \" \"\nstart: X \";\" \"!\"\nX: /a*;/\n", "a; !", 6));
}

TEST(LarkLexemeOptions, MasksAreTheTokensThatKeepAViablePrefix) {
  const TestVocabulary& v = qwen();
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"start: x \"a\"\nx[lazy]: /a+/\n", {"", "a"}},
      {"start: with_stop \"<end>\"\nwith_stop[stop=\"<end>\"]: /.*/\n", {"", "foo", "foo<", "foo<end"}},
      {"start: line+\nline[suffix=\"\\n\"]: /[a-z ]*/\n", {"ab", "ab\n"}},
      {"%ignore \" \"\nstart: item (\",\" item)*\nitem[stop=/[;.]/]: /[a-z;.]+/\n", {"ab;", "ab; ,", "x.,y"}},
      {"start: c (h \"!\" | T)\nc: \"\\u0000\"..\"\\U0010ffff\"\nh[lazy]: /[a-z]*ab/\nT: /[a-z]+/\n", {"", "\xc3\xa9", "x", "\xc3\xa9" "a"}},
  };
  for (const auto& [grammar, prefixes] : cases) {
    // The naive check runs on the grammar compiled apart, whose automaton learns byte by byte
    // (not from the mask's shortcuts).
    auto compiled = compile_lark(grammar), reference = compile_lark(grammar);
    ASSERT_TRUE(compiled && reference);
    for (const std::string& prefix : prefixes) {
      EXPECT_GT(expect_exact_mask(v, compiled, prefix, reference), 0u) << grammar << " '" << prefix << "'";
    }
  }
}

TEST(LarkLexemeOptions, TokensSpellingTheTextAreTakenAndTheStopTokenEndsIt) {
  const TestVocabulary& v = qwen();
  auto outer = compile_lark("start: with_stop \"<end>\"\nwith_stop[stop=\"<end>\"]: /.*/\n");
  auto lines = compile_lark("start: line+\nline[suffix=\"\\n\"]: /[a-z ]*/\n");
  ASSERT_TRUE(outer && lines);
  EXPECT_TRUE(accepts_tokens(outer, spell(v, "the answer<end>"), v.eos));
  EXPECT_FALSE(accepts_tokens(outer, spell(v, "the answer<end><end>"), v.eos));
  EXPECT_FALSE(accepts_tokens(outer, spell(v, "the answer"), v.eos));
  EXPECT_TRUE(accepts_tokens(lines, spell(v, "one line\nand another\n"), v.eos));
  EXPECT_FALSE(accepts_tokens(lines, spell(v, "one line\nand another"), v.eos));
  // After the stop is read again, what is left is forced; after a suffix, the string comes again.
  ConstraintMatcher re(compile_lark("start: x \";\" \"!\"\nx[stop=\";\"]: /[a;]*/\n"));
  ConstraintMatcher suffix(compile_lark("start: x \";\" \"!\"\nx[suffix=\";\"]: /[a;]*/\n"));
  ASSERT_TRUE(re.accept_bytes("aa;").is_ok() && suffix.accept_bytes("aa;").is_ok());
  const auto forced = [](const ConstraintMatcher& m) {
    auto bytes = m.forced_bytes(64);
    return bytes.is_ok() ? *bytes : "<error>";
  };
  EXPECT_EQ(forced(re), "!");
  EXPECT_EQ(forced(suffix), ";!");
}

TEST(LarkLexemeOptions, RefusalsNameTheOptionAndWhere) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"start: a\na[max_tokens=5]: /x+/\n",
       "lark grammar:2:3: rule option max_tokens is not supported (it limits the tokens sampled inside the rule: the sampler's "
       "work, not the grammar's)"},
      {"start: a\na[lazy, temperature=0.5]: /x+/\n",
       "lark grammar:2:9: rule option temperature is not supported (it sets the sampling temperature inside the rule: the "
       "sampler's work, not the grammar's)"},
      {"start: a\na[capture]: /x+/\n", "lark grammar:2:3: rule option capture is not supported (no captures are reported)"},
      {"start: a\na[capture=\"b\"]: /x+/\n", "lark grammar:2:3: rule option capture is not supported (no captures are reported)"},
      {"start: a\na[stop=\";\", stop_capture=\"s\"]: /x+/\n",
       "lark grammar:2:13: rule option stop_capture is not supported (no captures are reported)"},
      {"start: a\na[greedy]: /x+/\n",
       "lark grammar:2:3: unknown rule option \"greedy\" (llguidance's are lazy, stop, suffix, capture, stop_capture, max_tokens, "
       "temperature)"},
      {"start: a\na[stop]: /x+/\n", "lark grammar:2:7: unexpected ']' after rule option stop (expected '=')"},
      {"start: a\na[stop=]: /x+/\n", "lark grammar:2:8: stop= takes a string, a regex or a terminal name"},
      {"start: a\na[suffix=b]: /x+/\nb: \";\"\n", "lark grammar:2:10: suffix= takes a string, a regex or a terminal name"},
      {"start: a\na[stop=<|im_end|>]: /x+/\n", "lark grammar:2:8: stop= takes a string, a regex or a terminal name"},
      {"start: a\na[stop=\"\"]: /x+/\n",
       "lark grammar:2:8: stop=\"\" is not supported (llguidance ends the lexeme at the model's stop token and hides that token so "
       "the grammar goes on, which the generation loop would have to do)"},
      {"start: a\na[suffix=\"\"]: /x+/\n",
       "lark grammar:2:10: suffix=\"\" is not supported (llguidance ends the lexeme at the model's stop token and hides that token "
       "so the grammar goes on, which the generation loop would have to do)"},
      {"start: a\na[stop=\";\", suffix=\".\"]: /x+/\n",
       "lark grammar:2:13: a second stop= or suffix= (llguidance refuses them together too)"},
      {"start: A\nA[lazy]: /x+/\n", "lark grammar:2:2: options on a terminal (A[...]): llguidance takes lexeme options on rules only"},
      {"start: a\na[lazy: /x+/\n", "lark grammar:2:7: unexpected ':' in a[...] (expected ',' or ']')"},
      {"start: a\na[\"lazy\"]: /x+/\n", "lark grammar:2:3: expected a rule option (lazy, stop=, suffix=) in a[...]"},
      {"start: a\na[lazy]: b \";\"\nb: \"x\"\n", "lark grammar:2:10: rule \"b\" inside terminal a[lazy] (terminals are regular)"},
      {"start: a\na[stop=\";\"]: <|im_end|>\n",
       "lark grammar:2:14: token <|im_end|> inside terminal a[stop=...] (tokens may come only in rules)"},
      {"start: a\na[lazy]: %json {}\n", "lark grammar:2:10: %json inside a terminal"},
      {"start: a\na[lazy]: /x*/\n", "lark grammar:2:1: rule a[lazy] matches the empty string (a lazy lexeme would end before its first byte)"},
      {"start: a\na[suffix=/;*/]: /x*/\n",
       "lark grammar:2:1: rule a[suffix=...] matches the empty string (a lazy lexeme would end before its first byte)"},
  };
  for (const auto& [grammar, message] : cases) {
    const Status status = compile_error(grammar);
    EXPECT_EQ(status.message(), message) << grammar;
  }
  // A stop whose match is only its stop, re-read by itself again and again, fails at that byte.
  auto cycle = compile_lark("start: x+\nx[stop=\";\"]: /(c){0}/\n");
  ASSERT_NE(cycle, nullptr);
  ConstraintMatcher m(cycle);
  EXPECT_EQ(m.accept_bytes(";").message(), "grammar: stops re-read inside the re-reading of stops, deeper than 8");
  // llguidance's spellings that pass: no options, a trailing comma, lazy beside a stop, a
  // case-insensitive stop, ?rule and _rule.
  for (const std::string grammar : {"start: a\na[]: /x+/\n", "start: a\na[lazy,]: /x+/\n", "start: a\na[lazy, stop=\";\"]: /x+/\n",
                                    "start: a\na[stop=\"end\"i]: /x+/\n", "start: _a\n?_a[lazy]: /x+/\n"}) {
    EXPECT_TRUE(compile_error(grammar).is_ok()) << grammar << ": " << compile_error(grammar).message();
  }
}

}  // namespace
}  // namespace onnx_genai::testing
