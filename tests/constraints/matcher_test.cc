// The matcher's contract: masks against accept_token, stop tokens only on complete text,
// special tokens never, rollback, forced bytes, and schema errors that name the keyword and where
// it is.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

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
    const std::string text = R"({"type":"object","properties":{"s":{"type":"string"},"t":{"type":"string","maxLength":4},)"
                             R"("p":{"type":"string","pattern":"^[a-z ]*$"},"u":{"type":"string","minLength":2,"maxLength":5},)"
                             R"("w":{"type":"string","maxLength":300},"e":{"type":"string","format":"email"},)"
                             R"("d":{"type":"string","pattern":"^[0-9]{1,4}$"}}})";
    auto schema = compile(v, ConstraintKind::kJsonSchema, text);
    auto reference = compile(v, ConstraintKind::kJsonSchema, text);
    for (const std::string prefix : {"{\"s\":\"", "{\"s\":\"ab", "{\"s\":\"\xc3", "{\"s\":\"a\\", "{\"s\":\"中文",
                                     "{\"t\":\"ab", "{\"p\":\"a b", "{\"", "{\"u\":\"", "{\"u\":\"a", "{\"u\":\"abcd",
                                     "{\"u\":\"abcde", "{\"u\":\"a\xc3", "{\"w\":\"", "{\"w\":\"ab", "{\"e\":\"ab",
                                     "{\"e\":\"a.b@c", "{\"d\":\"", "{\"d\":\"12"}) {
      EXPECT_GT(expect_exact_mask(v, schema, prefix, reference), 0u) << name << " " << prefix;
    }
    auto regex = compile(v, ConstraintKind::kRegex, "\"[^\"xyz]*\"!");
    EXPECT_GT(expect_exact_mask(v, regex, "\"ab"), 0u) << name;
    auto lark = compile(v, ConstraintKind::kLarkGrammar, "start: STRING+\nSTRING: /\"[^\"\\\\]*\"/\n");
    EXPECT_GT(expect_exact_mask(v, lark, "\"ab"), 0u) << name;
    EXPECT_GT(expect_exact_mask(v, lark, "\"ab\""), 0u) << name;
  }
}

TEST(Matcher, CountedStringsInCountedItemsAreExact) {
  // A maxLength string inside an array with minItems is a new run of parser states in every item
  // (the item count is on the stack): its steps are read from the grammar's character rule and
  // the tokens leaving it walked from their cut (TokenTrie::Leaving). Checked against the naive
  // masks of a constraint compiled apart, at each character count, past the minimum, after an
  // escape, after text beyond ASCII and a character cut in half, in the first and later items.
  const TestVocabulary& v = test_vocabulary("qwen3");
  const std::string text = R"({"type":"array","minItems":3,"maxItems":5,"items":{"type":"object","properties":)"
                           R"({"name":{"type":"string","minLength":2,"maxLength":7},"tags":{"type":"array","items":)"
                           R"({"type":"string","maxLength":3},"maxItems":2}},"required":["name","tags"],"additionalProperties":false}})";
  auto schema = compile(v, ConstraintKind::kJsonSchema, text);
  auto reference = compile(v, ConstraintKind::kJsonSchema, text);
  const std::string item = R"({"name":"ab","tags":["x"]})";
  for (const std::string& before : {std::string("["), "[" + item + ",", "[" + item + "," + item + "," + item + ","}) {
    for (const std::string inside : {"", "a", "ab", "a\\\"c", "\xc3\xa9t\xc3\xa9", "abcdef", "abcdefg", "ab\xe4\xb8"}) {
      EXPECT_GT(expect_exact_mask(v, schema, before + R"({"name":")" + inside, reference), 0u) << before << inside;
    }
    EXPECT_GT(expect_exact_mask(v, schema, before + R"({"name":"ab","tags":["x)", reference), 0u) << before;
    EXPECT_GT(expect_exact_mask(v, schema, before + R"({"name":"ab","tags":["xyz)", reference), 0u) << before;
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
           {R"({"type":"array","items":{"uniqueItems":true}})", R"(unsupported keyword "uniqueItems" (only over items of at most 8 enum/const, boolean or null values) at /items)"},
           {R"({"multipleOf":0.1})", R"(unsupported keyword "multipleOf" 0.1 (not a binary fraction)"},
           {R"({"type":"integer","minimum":0,"multipleOf":2})", R"(unsupported keyword "multipleOf" next to integer bounds at /)"},
           {R"({"if":{"type":"string"},"then":{"minLength":1}})", R"(unsupported keyword "if" with "then"/"else")"},
           {R"({"dependencies":{"a":{"properties":{}}}})", R"(unsupported keyword "dependencies" with a schema (only lists of names) at /dependencies/a)"},
           {R"({"propertyNames":{"enum":["a"]}})", R"(unsupported keyword "enum" in propertyNames)"},
           {R"({"patternProperties":{"a":{},"b":{},"c":{},"d":{},"e":{}}})", R"(unsupported keyword "patternProperties" with more than 4 patterns)"},
           {R"({"type":"number","minimum":"0.5"})", R"("minimum" must be a finite number at /)"},
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

// Whether python3-jsonschema takes `text` under the number bounds of `bounds`: the text parsed
// as a double (strtod rounds correctly, like Python's float) against each bound's double.
bool validator_takes(const nlohmann::json& bounds, const std::string& text) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  const bool json_number = !text.empty() && *end == '\0' && text.find("00") != 0 && text.find("-00") != 0 && text[0] != '.' &&
                           text.back() != '.' && text[0] != '+';
  bool in = json_number;
  if (bounds.contains("minimum")) in = in && x >= bounds["minimum"].get<double>();
  if (bounds.contains("maximum")) in = in && x <= bounds["maximum"].get<double>();
  if (bounds.contains("exclusiveMinimum")) in = in && x > bounds["exclusiveMinimum"].get<double>();
  if (bounds.contains("exclusiveMaximum")) in = in && x < bounds["exclusiveMaximum"].get<double>();
  return in;
}

// Whether a bounded number grammar must take `text` when it is inside: no exponent, not a
// negative zero, at most 15 significant digits (beyond, the grammar compares exact decimals and
// may leave out a number that rounds onto the bound).
bool must_take(const std::string& text) {
  const size_t first = std::min(text.find_first_of("123456789"), text.size());
  const size_t dot = text.find('.');
  const size_t significant = text.size() - first - (dot != std::string::npos && dot > first);
  return text.find_first_of("eE") == std::string::npos && (first < text.size() ? significant <= 15 : text[0] != '-');
}

void expect_bounds_hold(const std::shared_ptr<CompiledConstraint>& compiled, const std::string& schema, const std::string& text) {
  const bool in = validator_takes(nlohmann::json::parse(schema), text);
  const bool accepted = accepts_bytes(compiled, text);
  if (accepted) {
    EXPECT_TRUE(in) << schema << " accepted " << text;
  }
  if (in && must_take(text)) {
    EXPECT_TRUE(accepted) << schema << " refused " << text;
  }
}

// Integer and decimal bounds, inclusive and exclusive, against the validator's comparison.
TEST(Matcher, NumberBoundsAgreeWithDoubleComparison) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  const std::vector<std::string> texts = {
      "0", "1", "-1", "2", "10", "100", "101", "-2", "-3", "0.0", "-0.5", "2.000", "2.01", "-1.0", "-1.01", "-3.5", "99.99",
      "100.0", "100.5", "1e1", "007", "-", "0.001", "0.00100", "0.0009999", "0.001000000001", "0.0999", "0.1", "0.10",
      "0.1000001", "0.25", "0.49999", "0.4999999999999999", "0.5", "0.500", "0.50001", "0.5000000000000001",
      "0.50000000000000001", "0.09999999999999999999", "0.99999999999999999", "1.0", "1.4999999", "1.5", "1.5000001",
      "2.2499", "2.25", "2.2500", "2.25001", "-0.09", "-0.1", "-0.10", "-0.1000001", "-0.25", "-0.2500001", "-0.2499",
      "-1.0000001", "-2.4999", "-2.5", "-2.50", "-2.5000000000000001", "-2.5001", "100.7499", "100.75", "100.750",
      "100.75000001", "-100.75", "-0", "-0.0", "1e-3", "0.5e0", "00.5", ".5", "0.", "-"};
  for (const std::string schema : {
           R"({"type":"number","minimum":-1,"maximum":2})", R"({"type":"number","exclusiveMinimum":-2,"exclusiveMaximum":100})",
           R"({"type":"number","minimum":0})", R"({"type":"number","exclusiveMaximum":0})", R"({"type":"number","exclusiveMaximum":1})",
           R"({"type":"number","exclusiveMinimum":1,"maximum":1})", R"({"type":"number","minimum":0.5})",
           R"({"type":"number","exclusiveMinimum":0.5})", R"({"type":"number","minimum":0.5,"maximum":2.25})",
           R"({"type":"number","exclusiveMinimum":0.1,"exclusiveMaximum":2.25})", R"({"type":"number","minimum":1e-3,"exclusiveMaximum":0.1})",
           R"({"type":"number","exclusiveMinimum":-2.5,"maximum":-0.25})", R"({"type":"number","minimum":-2.5,"exclusiveMaximum":100.75})",
           R"({"type":"number","maximum":-0.1})", R"({"type":"number","minimum":-1,"maximum":0.5})",
           R"({"type":"number","exclusiveMinimum":1,"exclusiveMaximum":1.5})",
           R"({"type":"number","minimum":0.5,"exclusiveMinimum":0.25,"maximum":100.75,"exclusiveMaximum":100.75})",
           R"({"type":"number","minimum":-100.75,"maximum":-100.75})"}) {
    auto compiled = compile(v, ConstraintKind::kJsonSchema, schema);
    for (const std::string& text : texts) expect_bounds_hold(compiled, schema, text);
  }
  // At the bound exactly, by hand: inclusive takes it, exclusive does not; just past it either way.
  const auto accepts = [&](const std::string& schema, const std::string& text) { return accepts_bytes(compile(v, ConstraintKind::kJsonSchema, schema), text); };
  EXPECT_TRUE(accepts(R"({"type":"number","minimum":0.5})", "0.5"));
  EXPECT_FALSE(accepts(R"({"type":"number","minimum":0.5})", "0.49999"));
  EXPECT_FALSE(accepts(R"({"type":"number","exclusiveMinimum":0.5})", "0.5"));
  EXPECT_FALSE(accepts(R"({"type":"number","exclusiveMinimum":0.5})", "0.50000000000000001"));  // parses as 0.5
  EXPECT_TRUE(accepts(R"({"type":"number","exclusiveMinimum":0.5})", "0.50001"));
  EXPECT_TRUE(accepts(R"({"type":"number","maximum":-2.5})", "-2.5"));
  EXPECT_FALSE(accepts(R"({"type":"number","exclusiveMaximum":-2.5})", "-2.5"));
  EXPECT_TRUE(accepts(R"({"type":"number","exclusiveMaximum":-2.5})", "-2.5000001"));
  // Integer bounds stay exact on the parsed value too: 0.99999999999999999 parses as 1.
  EXPECT_FALSE(accepts(R"({"type":"number","exclusiveMaximum":1})", "0.99999999999999999"));
  EXPECT_TRUE(accepts(R"({"type":"number","exclusiveMaximum":1})", "0.9999"));
  // 0.1 is the double nearest 0.1; the grammar's bound is the text 0.1.
  EXPECT_TRUE(accepts(R"({"type":"number","minimum":0.1,"maximum":0.1})", "0.1000"));
  EXPECT_FALSE(accepts(R"({"type":"number","minimum":0.1,"maximum":0.1})", "0.1000000001"));
  // Far from 1: tiny and huge bounds, and an integer bound past 2^53 (held one double inward).
  EXPECT_TRUE(accepts(R"({"type":"number","exclusiveMinimum":0,"maximum":1e-300})", "0." + std::string(300, '0') + "5"));
  EXPECT_FALSE(accepts(R"({"type":"number","exclusiveMinimum":0,"maximum":1e-300})", "0." + std::string(299, '0') + "11"));
  EXPECT_FALSE(accepts(R"({"type":"number","exclusiveMinimum":0,"maximum":1e-300})", "0.0"));
  // The double 1e300 is 1000000000000000052504...: the integer 10^300 is below it.
  EXPECT_TRUE(accepts(R"({"type":"number","minimum":1e300})", "2" + std::string(300, '0') + ".5"));
  EXPECT_FALSE(accepts(R"({"type":"number","minimum":1e300})", "1" + std::string(300, '0')));
  EXPECT_FALSE(accepts(R"({"type":"number","maximum":9007199254740993})", "9007199254740993.0"));  // parses as 2^53 + 2
  EXPECT_TRUE(compile(v, ConstraintKind::kJsonSchema, R"({"type":"number","exclusiveMinimum":1.7976931348623157e308})")->matches_nothing());
}

// Random short decimal bounds, and numbers near them up to 25 digits past the point (the exact
// expansions of nearby doubles among them).
TEST(Matcher, RandomDecimalBoundsNeverAdmitAnOutsideNumber) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  std::mt19937_64 rng(22);
  const auto decimal = [&] {
    std::string text = (rng() % 2 ? "-" : "") + std::to_string(rng() % (rng() % 2 ? 10 : 1000));
    if (rng() % 4 != 0) text += "." + std::to_string(rng() % 1000 + 1000).substr(1, 1 + rng() % 3);
    return text;
  };
  for (int round = 0; round < 200; ++round) {
    nlohmann::json bounds = {{"type", "number"}};
    const std::string a = decimal(), b = decimal();
    const bool swap = std::strtod(a.c_str(), nullptr) > std::strtod(b.c_str(), nullptr);
    if (rng() % 4 != 0) bounds[rng() % 2 ? "minimum" : "exclusiveMinimum"] = nlohmann::json::parse(swap ? b : a);
    if (rng() % 4 != 0) bounds[rng() % 2 ? "maximum" : "exclusiveMaximum"] = nlohmann::json::parse(swap ? a : b);
    const std::string schema = bounds.dump();
    auto compiled = compile(v, ConstraintKind::kJsonSchema, schema);
    for (const std::string& bound : {a, b}) {
      const double at = std::strtod(bound.c_str(), nullptr);
      expect_bounds_hold(compiled, schema, bound);
      for (int k = 0; k < 12; ++k) {
        const double x = at + (rng() % 2 ? 1 : -1) * std::pow(10.0, -static_cast<int>(rng() % 20));
        char text[64];
        std::snprintf(text, sizeof text, "%.*f", static_cast<int>(rng() % 26), rng() % 3 ? x : std::nextafter(at, x));
        expect_bounds_hold(compiled, schema, text);
      }
    }
  }
}

// uniqueItems over a finite set of scalars: no value twice (1 and 1.0 are one value), with the
// item counts; anything else is refused.
TEST(Matcher, UniqueItemsNeverRepeatAValue) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  const auto check = [&](const std::string& schema, const std::vector<std::string>& in, const std::vector<std::string>& out) {
    auto compiled = compile(v, ConstraintKind::kJsonSchema, schema);
    for (const std::string& text : in) EXPECT_TRUE(accepts_bytes(compiled, text)) << schema << " refused " << text;
    for (const std::string& text : out) EXPECT_FALSE(accepts_bytes(compiled, text)) << schema << " accepted " << text;
  };
  check(R"({"type":"array","uniqueItems":true,"items":{"type":"boolean"}})", {"[]", "[true]", "[false, true]", "[true,false]"},
        {"[true,true]", "[false,true,false]", "[null]"});
  check(R"({"type":"array","uniqueItems":true,"items":{"enum":[1,"a",1.0,2.5,null,true]},"minItems":2,"maxItems":3})",
        {"[1,\"a\"]", "[1.0,2.5,null]", "[true,1]", "[null, \"a\", 2.5]"},
        {"[1]", "[1,1]", "[1,1.0]", "[1.0,1]", "[\"a\",\"a\"]", "[1,\"a\",2.5,null]", "[2.50,1]", "[false,1]"});
  check(R"({"type":"array","uniqueItems":true,"items":{"const":"x"},"minItems":1})", {"[\"x\"]"}, {"[]", "[\"x\",\"x\"]"});
  check(R"({"type":"array","uniqueItems":true,"items":{"enum":["a","b","c"],"maxLength":1,"type":"string"}})",
        {"[\"c\",\"a\",\"b\"]"}, {"[\"a\",\"b\",\"a\"]", "[\"c\",\"c\"]"});
  check(R"({"type":"array","uniqueItems":true,"items":{"type":["boolean","null"]},"minItems":3})", {"[null,false,true]"},
        {"[null,false]", "[null,false,null]"});
  EXPECT_TRUE(compile(v, ConstraintKind::kJsonSchema, R"({"type":"array","uniqueItems":true,"items":{"type":"boolean"},"minItems":3})")
                  ->matches_nothing());
  for (const std::string schema : {R"({"type":"array","uniqueItems":true})", R"({"uniqueItems":true,"items":{"type":"integer"}})",
                                   R"({"uniqueItems":true,"items":{"enum":[0,1,2,3,4,5,6,7,8]}})",
                                   R"({"uniqueItems":true,"items":{"enum":[[1],[2]]}})",
                                   R"({"uniqueItems":true,"prefixItems":[{"const":1}],"items":{"const":2}})",
                                   R"({"uniqueItems":true,"items":{"enum":[1,2]},"contains":{"const":1}})"}) {
    auto compiled = CompiledConstraint::compile({ConstraintKind::kJsonSchema, schema}, v.vocabulary);
    ASSERT_FALSE(compiled.is_ok()) << schema;
    EXPECT_NE(compiled.status().message().find(R"(unsupported keyword "uniqueItems" (only over items of at most 8 enum/const, boolean or null values) at /)"),
              std::string::npos) << compiled.status().message();
  }
  // At most 8 values, after equal ones merge (1 and 1.0, "a" twice).
  EXPECT_TRUE(compile(v, ConstraintKind::kJsonSchema, R"({"uniqueItems":true,"items":{"enum":[0,1,2,3,4,5,6,7,1.0,7.0]}})"));
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
