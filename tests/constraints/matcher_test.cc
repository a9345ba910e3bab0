// The matcher's contract: masks against accept_token, stop tokens only on complete text,
// special tokens never, rollback, forced bytes, and schema errors that name the keyword and where
// it is.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "constraint_test_util.h"

namespace onnx_genai::testing {
namespace {

std::shared_ptr<CompiledConstraint> compile(const TestVocabulary& v, ConstraintKind kind, const std::string& text) {
  auto compiled = CompiledConstraint::compile({kind, text}, v.vocabulary);
  EXPECT_TRUE(compiled.is_ok()) << compiled.status().message();
  return compiled.is_ok() ? *compiled : nullptr;
}

TEST(Matcher, MaskIsExactlyTheTokensThatKeepAPrefix) {
  // Every token's bytes checked one by one against the mask (the naive definition).
  const TestVocabulary& v = test_vocabulary("qwen3");
  auto compiled = compile(v, ConstraintKind::kJsonSchema,
                          R"({"type":"object","properties":{"name":{"type":"string","maxLength":3},"n":{"type":"integer","minimum":-5,"maximum":120}},"required":["n"]})");
  for (const std::string prefix : {"", "{", "{\"n\":", "{\"n\":1", "{\"n\":12", "{\"name\":\"ab", "{\"n\":-"}) {
    expect_exact_mask(v, compiled, prefix);
  }
}

TEST(Matcher, MasksInsideStringsAreExact) {
  // Inside a string the tokens that stay inside come from a table per set of raw ASCII bytes
  // (and number of characters left); the mask must still be exactly the naive one: plain,
  // counted (below and beyond the longest token), patterned and ASCII-only (e-mail, digits) JSON strings,
  // after a character cut in half, an escape, non-ASCII text; a regex whose class leaves out
  // letters; a Lark string terminal. With byte-level BPE and with SentencePiece.
  for (const char* name : {"qwen3", "llama2"}) {
    const TestVocabulary& v = test_vocabulary(name);
    auto schema = compile(v, ConstraintKind::kJsonSchema,
                          R"({"type":"object","properties":{"s":{"type":"string"},"t":{"type":"string","maxLength":4},)"
                          R"("p":{"type":"string","pattern":"^[a-z ]*$"},"u":{"type":"string","minLength":2,"maxLength":5},)"
                          R"("w":{"type":"string","maxLength":300},"e":{"type":"string","format":"email"},)"
                          R"("d":{"type":"string","pattern":"^[0-9]{1,4}$"}}})");
    for (const std::string prefix : {"{\"s\":\"", "{\"s\":\"ab", "{\"s\":\"\xc3", "{\"s\":\"a\\", "{\"s\":\"中文",
                                     "{\"t\":\"ab", "{\"p\":\"a b", "{\"", "{\"u\":\"", "{\"u\":\"a", "{\"u\":\"abcd",
                                     "{\"u\":\"abcde", "{\"u\":\"a\xc3", "{\"w\":\"", "{\"w\":\"ab", "{\"e\":\"ab",
                                     "{\"e\":\"a.b@c", "{\"d\":\"", "{\"d\":\"12"}) {
      EXPECT_GT(expect_exact_mask(v, schema, prefix), 0u) << name << " " << prefix;
    }
    auto regex = compile(v, ConstraintKind::kRegex, "\"[^\"xyz]*\"!");
    EXPECT_GT(expect_exact_mask(v, regex, "\"ab"), 0u) << name;
    auto lark = compile(v, ConstraintKind::kLarkGrammar, "start: STRING+\nSTRING: /\"[^\"\\\\]*\"/\n");
    EXPECT_GT(expect_exact_mask(v, lark, "\"ab"), 0u) << name;
    EXPECT_GT(expect_exact_mask(v, lark, "\"ab\""), 0u) << name;
  }
}

TEST(Matcher, StopOnlyWhenCompleteAndSpecialTokensNever) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  auto compiled = compile(v, ConstraintKind::kRegex, "[0-9]{2,3}");
  ConstraintMatcher m(compiled);
  std::vector<uint64_t> mask(m.mask_words());
  ASSERT_TRUE(m.compute_mask(mask).is_ok());
  EXPECT_FALSE(mask_has(mask, v.eos));
  EXPECT_FALSE(m.accept_token(v.eos).is_ok());
  for (int32_t id = 0; id < v.tokenizer->vocab_size(); ++id) {
    if (v.tokenizer->is_special(id)) {
      ASSERT_FALSE(mask_has(mask, id)) << id;
    }
  }
  ASSERT_TRUE(m.accept_bytes("12").is_ok());
  ASSERT_TRUE(m.compute_mask(mask).is_ok());
  EXPECT_TRUE(mask_has(mask, v.eos));
  ASSERT_TRUE(m.accept_bytes("3").is_ok());
  ASSERT_TRUE(m.compute_mask(mask).is_ok());
  // Complete and nothing can follow: the stop token is the only choice.
  size_t allowed = 0;
  for (const uint64_t word : mask) allowed += static_cast<size_t>(__builtin_popcountll(word));
  EXPECT_EQ(allowed, 1u);
  ASSERT_TRUE(m.accept_token(v.eos).is_ok());
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_bytes("4").is_ok());
}

TEST(Matcher, RollbackRestoresEarlierStates) {
  const TestVocabulary& v = test_vocabulary("llama2");
  auto compiled = compile(v, ConstraintKind::kJsonObject, "");
  ConstraintMatcher m(compiled);
  const std::vector<int32_t> ids = spell(v, R"({"a": [1, 2]})");
  ASSERT_FALSE(ids.empty());
  for (const int32_t id : ids) ASSERT_TRUE(m.accept_token(id).is_ok());
  EXPECT_TRUE(m.is_complete());
  ASSERT_TRUE(m.rollback(2).is_ok());
  EXPECT_FALSE(m.is_complete());
  EXPECT_FALSE(m.rollback(ids.size()).is_ok());  // only ids.size() - 2 remain
  for (size_t k = ids.size() - 2; k < ids.size(); ++k) ASSERT_TRUE(m.accept_token(ids[k]).is_ok());
  EXPECT_TRUE(m.is_complete());
  EXPECT_FALSE(m.accept_token(-1).is_ok());
}

// The forced bytes after `prefix` (fed as bytes), up to `most`.
std::string forced_after(const std::shared_ptr<CompiledConstraint>& compiled, const std::string& prefix, size_t most = 64) {
  ConstraintMatcher m(compiled);
  EXPECT_TRUE(m.accept_bytes(prefix).is_ok()) << prefix;
  const size_t accepted = m.accepted();
  auto forced = m.forced_bytes(most);
  EXPECT_TRUE(forced.is_ok()) << forced.status().message();
  EXPECT_EQ(m.accepted(), accepted) << "forced_bytes moved the matcher";
  return forced.is_ok() ? *forced : "<error>";
}

TEST(Matcher, ForcedBytesRunWhileOneByteMayCome) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  // A closed object with one property: its key is forced once the object opens, and up to the
  // colon, where whitespace may come; inside the string value nothing is.
  auto schema = compile(v, ConstraintKind::kJsonSchema,
                        R"({"type":"object","properties":{"customer_name":{"type":"string"}},)"
                        R"("required":["customer_name"],"additionalProperties":false})");
  EXPECT_EQ(forced_after(schema, ""), "{");
  EXPECT_EQ(forced_after(schema, "{\""), "customer_name\"");
  EXPECT_EQ(forced_after(schema, "{\"cust"), "omer_name\"");
  EXPECT_EQ(forced_after(schema, "{\"cust", 3), "ome");
  EXPECT_EQ(forced_after(schema, "{\"customer_name\""), "");
  EXPECT_EQ(forced_after(schema, "{\"customer_name\": \"ab"), "");
  // Two properties in either order: the first byte of a key chooses, then the rest is forced.
  auto two = compile(v, ConstraintKind::kJsonSchema,
                     R"({"type":"object","properties":{"alpha":{"type":"integer"},"beta":{"type":"integer"}},)"
                     R"("required":["alpha","beta"],"additionalProperties":false})");
  EXPECT_EQ(forced_after(two, "{\""), "");
  EXPECT_EQ(forced_after(two, "{\"b"), "eta\"");
  EXPECT_EQ(forced_after(two, "{\"beta\":1,\""), "alpha\"");
  // A regex: up to where it may end (a stop token may come) or branch.
  auto regex = compile(v, ConstraintKind::kRegex, "id-[0-9]+:done(!)?");
  EXPECT_EQ(forced_after(regex, ""), "id-");
  EXPECT_EQ(forced_after(regex, "id-4"), "");  // another digit or ':'
  EXPECT_EQ(forced_after(regex, "id-4:"), "done");
  EXPECT_EQ(forced_after(regex, "id-4:done"), "");  // complete: it may end here
  // A non-ASCII character is forced whole.
  auto unicode = compile(v, ConstraintKind::kRegex, "\u00e9t\u00e9 [a-z]");
  EXPECT_EQ(forced_after(unicode, ""), "\xc3\xa9t\xc3\xa9 ");
}

TEST(Matcher, NothingIsForcedWhereATerminalMayEndOrGoOn) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  // NAME takes the longest match: after "let x" it may go on ([a-z]) or end (the space).
  auto lark = compile(v, ConstraintKind::kLarkGrammar, "start: \"let \" NAME \" = \" INT \";\"\nNAME: /[a-z]+/\nINT: /[0-9]+/\n");
  EXPECT_EQ(forced_after(lark, ""), "let ");
  EXPECT_EQ(forced_after(lark, "let "), "");
  EXPECT_EQ(forced_after(lark, "let x"), "");
  EXPECT_EQ(forced_after(lark, "let x "), "= ");
  EXPECT_EQ(forced_after(lark, "let x = 12"), "");
  EXPECT_EQ(forced_after(lark, "let x = 12;"), "");  // complete
  // After "ab" the terminal may end or go on, but the byte after it is 'c' either way (and an
  // ended AB followed by "c" would have matched longer): forced, through to the only sentence.
  auto guard = compile(v, ConstraintKind::kLarkGrammar, "start: AB \"c\"\nAB: /abc?/\n");
  EXPECT_EQ(forced_after(guard, "a"), "bcc");
  EXPECT_TRUE(accepts_bytes(guard, "abcc"));
  // A token the grammar names may come: nothing is forced, though no byte may.
  auto named = compile(v, ConstraintKind::kLarkGrammar, "start: \"ok\" <|im_end|>\n");
  EXPECT_EQ(forced_after(named, ""), "ok");
  EXPECT_EQ(forced_after(named, "ok"), "");
}

// Where two regular conditions meet on one string, the language is their intersection (and a
// difference for keys a pattern or a declared name does not take): checked on texts at each edge.
TEST(Matcher, RegularConditionsOnOneStringIntersect) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  const auto check = [&](const std::string& schema, const std::vector<std::string>& in, const std::vector<std::string>& out) {
    auto compiled = compile(v, ConstraintKind::kJsonSchema, schema);
    ASSERT_TRUE(compiled) << schema;
    for (const std::string& text : in) EXPECT_TRUE(accepts_bytes(compiled, text)) << schema << " " << text;
    for (const std::string& text : out) EXPECT_FALSE(accepts_bytes(compiled, text)) << schema << " " << text;
  };
  check(R"({"type":"string","pattern":"^[a-z]+$","minLength":2,"maxLength":3})", {R"("ab")", R"("abc")"},
        {R"("a")", R"("abcd")", R"("aB")", R"("")"});
  check(R"({"type":"string","format":"date","maxLength":10})", {R"("2024-02-29")"}, {R"("2023-02-29")"});
  // "id" is declared (integer); "x-..." keys are strings of at most 3 characters; "x-id" matches
  // the pattern and is declared, so it takes both schemas; other keys are booleans.
  check(R"({"type":"object","properties":{"id":{"type":"integer"},"x-id":{"type":"string"}},)"
        R"("patternProperties":{"^x-":{"type":"string","maxLength":3}},"additionalProperties":{"type":"boolean"}})",
        {R"({"id":1,"x-a":"abc","y":true,"x-id":"ab"})", R"({"xa":false})"},
        {R"({"id":true})", R"({"x-a":"abcd"})", R"({"x-a":true})", R"({"x-id":"abcd"})", R"({"y":1})"});
  check(R"({"type":"object","propertyNames":{"pattern":"^[a-z]+$","maxLength":2},"minProperties":1,"maxProperties":2})",
        {R"({"ab":1})", R"({"a":1,"b":[]})"}, {R"({})", R"({"abc":1})", R"({"A":1})", R"({"a":1,"b":2,"c":3})"});
  check(R"({"type":"object","properties":{"card":{},"address":{}},"dependencies":{"card":["address"]},"additionalProperties":false})",
        {R"({"card":1,"address":2})", R"({"address":2})", R"({})"}, {R"({"card":1})"});
  check(R"({"type":"array","items":{"type":"integer"},"contains":{"const":7},"maxItems":2})", {"[7]", "[1,7]", "[7,7]"},
        {"[]", "[1]", "[1,2]", "[1,2,7]"});
  check(R"({"type":"number","multipleOf":1.5})", {"0", "4.5", "-3", "1.5"}, {"1", "4.4", "1.55", "1e3"});
  check(R"({"not":{"type":"integer"}})", {R"("a")", "1.5", "-0.25", "null"}, {"1", "1.0", "-20"});
  check(R"({"type":"string","format":"date","pattern":"^2024-"})", {R"("2024-02-29")"}, {R"("2023-01-01")", R"("2024-02-30")"});
  // enum / const beside other keywords keep the values those accept.
  check(R"({"enum":["a","bb","ccc",4,7.0,8.5],"maxLength":2,"maximum":7})", {R"("a")", R"("bb")", "4", "7.0", "7"},
        {R"("ccc")", "8.5"});
  check(R"({"const":"abc","pattern":"^b"})", {}, {R"("abc")"});
}

TEST(Matcher, RefusedSchemasNameTheKeywordAndWhere) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  for (const auto& [schema, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"properties":{"a":{"not":{"type":"string","minLength":2}}}})", R"(unsupported keyword "not" (only of types, {} or a boolean) at /properties/a/not)"},
           {R"({"type":"array","items":{"uniqueItems":true}})", R"(unsupported keyword "uniqueItems" at /items)"},
           {R"({"multipleOf":0.1})", R"(unsupported keyword "multipleOf" 0.1 (not a binary fraction)"},
           {R"({"type":"integer","minimum":0,"multipleOf":2})", R"(unsupported keyword "multipleOf" next to integer bounds at /)"},
           {R"({"if":{"type":"string"},"then":{"minLength":1}})", R"(unsupported keyword "if" with "then"/"else")"},
           {R"({"dependencies":{"a":{"properties":{}}}})", R"(unsupported keyword "dependencies" with a schema (only lists of names) at /dependencies/a)"},
           {R"({"propertyNames":{"enum":["a"]}})", R"(unsupported keyword "enum" in propertyNames)"},
           {R"({"patternProperties":{"a":{},"b":{},"c":{},"d":{},"e":{}}})", R"(unsupported keyword "patternProperties" with more than 4 patterns)"},
           {R"({"type":"number","minimum":0.5})", R"(unsupported keyword "minimum" with a non-integer bound on numbers at /)"},
           {R"({"$ref":"http://example.com/s.json"})", R"(unsupported keyword "$ref")"},
           {R"({"type":"string","format":"hostname"})", R"(unsupported keyword "format" "hostname")"},
                      {R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", R"(unsupported keyword "oneOf")"},
           {R"x({"type":"string","pattern":"(?=a)"})x", R"x("pattern" at /)x"},
           {"{", "not valid JSON"}}) {
    auto compiled = CompiledConstraint::compile({ConstraintKind::kJsonSchema, schema}, v.vocabulary);
    ASSERT_FALSE(compiled.is_ok()) << schema;
    EXPECT_NE(compiled.status().message().find(message), std::string::npos) << compiled.status().message();
  }
}

TEST(Matcher, EmptyLanguagesAreReported) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  for (const std::string schema : {"false", R"({"$ref":"#"})", R"({"type":"integer","minimum":3,"maximum":2})"}) {
    auto compiled = compile(v, ConstraintKind::kJsonSchema, schema);
    ASSERT_TRUE(compiled);
    EXPECT_TRUE(compiled->matches_nothing()) << schema;
    ConstraintMatcher m(compiled);
    std::vector<uint64_t> mask(m.mask_words());
    ASSERT_TRUE(m.compute_mask(mask).is_ok());
    EXPECT_TRUE(std::all_of(mask.begin(), mask.end(), [](uint64_t w) { return w == 0; })) << schema;
  }
  EXPECT_FALSE(compile(v, ConstraintKind::kJsonSchema, R"({"type":"array","items":{"$ref":"#/items"}})")->matches_nothing());
}

TEST(Matcher, StringsCountEscapesAsOneCharacter) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  auto compiled = compile(v, ConstraintKind::kJsonSchema, R"({"type":"string","minLength":2,"maxLength":3})");
  for (const std::string text : {R"("a\nb")", R"("\u0041\t")", R"("\"\\/")", "\"\xC3\xA9\xF0\x9F\x98\x80\"", R"("\/\b\f")"}) {
    EXPECT_TRUE(accepts_bytes(compiled, text)) << text;
  }
  for (const std::string text : {R"("a")", R"("abcd")", R"("a\nbc")", "\"a\nb\"", R"("\ud800a")", R"("\x41b")", "\"\xC3\""}) {
    EXPECT_FALSE(accepts_bytes(compiled, text)) << text;
  }
}

// Numbers with integer bounds, against the bounds evaluated on the parsed value (strtod).
TEST(Matcher, NumberBoundsHoldForEveryAcceptedSpelling) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  const std::vector<std::string> texts = {"0", "-0", "0.0", "-0.5", "1", "1.0", "1.5", "2", "2.000", "2.01", "-1", "-1.0",
                                          "-1.01", "-2", "-3.5", "10", "99.99", "100", "100.0", "100.5", "1e1", "007", "-"};
  for (const std::string schema : {R"({"type":"number","minimum":-1,"maximum":2})", R"({"type":"number","exclusiveMinimum":-2,"exclusiveMaximum":100})",
                                   R"({"type":"number","minimum":0})", R"({"type":"number","exclusiveMaximum":0})",
                                   R"({"type":"number","exclusiveMinimum":1,"maximum":1})"}) {
    auto compiled = compile(v, ConstraintKind::kJsonSchema, schema);
    const auto bounds = nlohmann::json::parse(schema);
    for (const std::string& text : texts) {
      const double x = std::strtod(text.c_str(), nullptr);
      bool in = text != "007" && text != "-";
      if (bounds.contains("minimum")) in = in && x >= bounds["minimum"].get<double>();
      if (bounds.contains("maximum")) in = in && x <= bounds["maximum"].get<double>();
      if (bounds.contains("exclusiveMinimum")) in = in && x > bounds["exclusiveMinimum"].get<double>();
      if (bounds.contains("exclusiveMaximum")) in = in && x < bounds["exclusiveMaximum"].get<double>();
      const bool accepted = accepts_bytes(compiled, text);
      if (accepted) {
        EXPECT_TRUE(in) << schema << " accepted " << text;
      }
      // Spellings the bounded grammar leaves out: exponents, and -0 (equal to 0).
      if (in && text != "1e1" && text != "-0") {
        EXPECT_TRUE(accepted) << schema << " refused " << text;
      }
    }
  }
}

TEST(Matcher, OneOfTaggedUnionsCompileAndOverlapsAreRefused) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  auto tagged = compile(v, ConstraintKind::kJsonSchema,
                        R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind"]},
                                     {"type":"object","properties":{"kind":{"enum":["b","c"]},"y":{"type":"string"}},"required":["kind","y"]}]})");
  EXPECT_TRUE(accepts_bytes(tagged, R"({"kind":"a","x":1})"));
  EXPECT_TRUE(accepts_bytes(tagged, R"({"kind":"c","y":"z"})"));
  EXPECT_FALSE(accepts_bytes(tagged, R"({"kind":"b"})"));
  for (const std::string schema : {
           // The tag is optional in the second branch: refused (the check wants it required in every branch).
           R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"}},"required":["kind"]},{"type":"object","properties":{"kind":{"const":"b"}}}]})",
           // Shared tag value.
           R"({"oneOf":[{"type":"object","properties":{"k":{"enum":["a","b"]}},"required":["k"]},{"type":"object","properties":{"k":{"const":"b"}},"required":["k"]}]})",
           // Not only objects: a string matches both branches vacuously.
           R"({"oneOf":[{"properties":{"k":{"const":"a"}},"required":["k"]},{"properties":{"k":{"const":"b"}},"required":["k"]}]})"}) {
    auto compiled = CompiledConstraint::compile({ConstraintKind::kJsonSchema, schema}, v.vocabulary);
    ASSERT_FALSE(compiled.is_ok()) << schema;
    EXPECT_NE(compiled.status().message().find(R"(unsupported keyword "oneOf")"), std::string::npos);
  }
}

TEST(Matcher, RecursiveSchemasNest) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  auto compiled = compile(v, ConstraintKind::kJsonSchema,
                          R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(accepts_bytes(compiled, R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"));
  EXPECT_TRUE(accepts_bytes(compiled, R"({"kids":[],"v":0})"));
  EXPECT_FALSE(accepts_bytes(compiled, R"({"v":1,"kids":[{"kids":[]}]})"));
  EXPECT_FALSE(accepts_bytes(compiled, R"({"v":1,"x":2})"));
}

}  // namespace
}  // namespace onnx_genai::testing
