// OgaGeneratorParamsSetGuidance: onnxruntime-genai's guidance types onto the constraints engine.
// The text must be valid under references independent of that engine (nlohmann's JSON parser and
// std::regex's ECMAScript matching), and the tokens those of the C++ API with the same constraint.
#include <regex>

#include <nlohmann/json.hpp>

#include "capi_model_test.h"

namespace onnx_genai {
namespace {

using namespace testing;

constexpr double kGuidedLength = 80;

constexpr const char* kSchema = R"({"type": "object",
  "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
  "required": ["name", "age"], "additionalProperties": false})";

class CApiGuidanceTest : public CApiModelTest {
 protected:
  // The greedy tokens under (type, data), checked against the C++ API's with `spec`; returns the
  // generated text.
  static std::string guided(const char* prompt_text, const char* type, const char* data, const ConstraintSpec& spec) {
    const std::vector<int32_t> prompt = encode(prompt_text);
    const auto p = params({{"max_length", kGuidedLength}});
    EXPECT_EQ(message(OgaGeneratorParamsSetGuidance(p.get(), type, data, false)), "");
    const auto got = finish(start(p.get(), prompt).get(), 1)[0];
    EXPECT_EQ(got, reference({prompt}, nullptr, spec, kGuidedLength)[0]);
    EXPECT_LT(got.size(), static_cast<size_t>(kGuidedLength)) << "ended by max_length, not by a whole match";
    const char* text = nullptr;
    EXPECT_EQ(message(OgaTokenizerDecode(tokenizer_, got.data() + prompt.size(), got.size() - prompt.size(), &text)), "");
    return take_string(text);
  }
};

TEST_F(CApiGuidanceTest, JsonSchemaOutputParsesAndFitsTheSchema) {
  const std::string text = guided("A person:", "json_schema", kSchema, {ConstraintKind::kJsonSchema, kSchema});
  const nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(value.is_discarded()) << text;
  ASSERT_TRUE(value.is_object()) << text;
  EXPECT_EQ(value.size(), 2u) << text;
  ASSERT_TRUE(value.contains("name") && value["name"].is_string()) << text;
  EXPECT_LE(value["name"].get<std::string>().size(), 12u) << text;  // the model's vocabulary here is ASCII
  ASSERT_TRUE(value.contains("age") && value["age"].is_number_integer()) << text;
  EXPECT_GE(value["age"].get<int64_t>(), 0);
  EXPECT_LE(value["age"].get<int64_t>(), 150);
}

TEST_F(CApiGuidanceTest, RegexOutputMatchesTheWholeExpression) {
  const char* regex = "(yes|no), [0-9]{2,4} (sheep|goats)\\.";
  const std::string text = guided("Count the flock:", "regex", regex, {ConstraintKind::kRegex, regex});
  EXPECT_TRUE(std::regex_match(text, std::regex(regex, std::regex::ECMAScript))) << text;
}

// The Lark grammar's sentences are the regex's, so std::regex is the independent check.
TEST_F(CApiGuidanceTest, LarkGrammarOutputIsASentenceOfTheGrammar) {
  const char* grammar = "start: answer \", \" COUNT \" \" animal \".\"\nanswer: \"yes\" | \"no\"\n"
                        "animal: \"sheep\" | \"goats\"\nCOUNT: /[0-9]{2,4}/\n";
  const std::string text = guided("Count the flock:", "lark_grammar", grammar, {ConstraintKind::kLarkGrammar, grammar});
  EXPECT_TRUE(std::regex_match(text, std::regex("(yes|no), [0-9]{2,4} (sheep|goats)\\.", std::regex::ECMAScript))) << text;
}

TEST_F(CApiGuidanceTest, EmptyTypeAndDataRemoveTheGuidance) {
  const std::vector<int32_t> prompt = encode("The Lord is my shepherd");
  const auto p = params({});
  ASSERT_EQ(message(OgaGeneratorParamsSetGuidance(p.get(), "regex", "[0-9]+", false)), "");
  ASSERT_EQ(message(OgaGeneratorParamsSetGuidance(p.get(), "", "", false)), "");
  EXPECT_EQ(finish(start(p.get(), prompt).get(), 1), reference({prompt}, nullptr));
}

TEST_F(CApiGuidanceTest, BadGuidanceFailsAtTheCallWithTheReason) {
  const auto p = params({});
  EXPECT_EQ(message(OgaGeneratorParamsSetGuidance(p.get(), "lark_grammar", "%import python.NUMBER\nstart: NUMBER", false)).rfind(
                "OgaGeneratorParamsSetGuidance: lark grammar:1:", 0), 0u);
  EXPECT_EQ(message(OgaGeneratorParamsSetGuidance(p.get(), "json_object", "{}", false)),
            "OgaGeneratorParamsSetGuidance: unknown guidance type 'json_object' (onnxruntime-genai's types: "
            "json_schema, regex, lark_grammar)");
  EXPECT_EQ(message(OgaGeneratorParamsSetGuidance(p.get(), "regex", "", false)),
            "OgaGeneratorParamsSetGuidance: guidance type regex needs data (the schema or expression), got none");
  // The constraint compiler's own messages.
  EXPECT_NE(message(OgaGeneratorParamsSetGuidance(p.get(), "json_schema", R"({"type": "object", "not": {"required": ["a"]}})", false))
                .find("unsupported keyword \"not\""),
            std::string::npos);
  EXPECT_NE(message(OgaGeneratorParamsSetGuidance(p.get(), "json_schema", "{\"type\": ", false)).find("json schema"),
            std::string::npos);
  EXPECT_NE(message(OgaGeneratorParamsSetGuidance(p.get(), "regex", "a(?=b)", false)).find("lookaround"),
            std::string::npos);
  // A token the grammar names is looked up in the model's vocabulary at the call.
  EXPECT_EQ(message(OgaGeneratorParamsSetGuidance(p.get(), "lark_grammar", "start: \"a\" <|im_end|>", false)),
            "OgaGeneratorParamsSetGuidance: lark grammar:1:12: token <|im_end|> is not in the vocabulary");
  EXPECT_EQ(message(OgaGeneratorParamsSetGuidance(nullptr, "regex", "a", false)),
            "OgaGeneratorParamsSetGuidance: params is NULL");
  // A failed call leaves the params as they were: unconstrained.
  const std::vector<int32_t> prompt = encode("In the beginning");
  EXPECT_EQ(finish(start(p.get(), prompt).get(), 1), reference({prompt}, nullptr));
}

}  // namespace
}  // namespace onnx_genai
