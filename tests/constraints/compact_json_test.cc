// ConstraintSpec::compact_json: at most one space between JSON tokens, no newlines or tabs (for
// forced tool calls, whose text a program reads); the default keeps pretty-printed JSON.
#include <gtest/gtest.h>

#include "constraint_test_util.h"

namespace onnx_genai::testing {
namespace {

TEST(CompactJson, AllowsOneSpaceBetweenTokensAndNothingElse) {
  const auto& qwen = test_vocabulary("qwen3");
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})";
  for (const ConstraintKind kind : {ConstraintKind::kJsonSchema, ConstraintKind::kJsonObject}) {
    auto compact = CompiledConstraint::compile({kind, schema, true}, qwen.vocabulary);
    auto loose = CompiledConstraint::compile({kind, schema, false}, qwen.vocabulary);
    ASSERT_TRUE(compact.is_ok() && loose.is_ok());
    for (const std::string text : {R"({"a":1})", R"({"a": 1})", R"({ "a" : 1 })"}) {
      EXPECT_TRUE(accepts_bytes(*compact, text)) << text;
      EXPECT_TRUE(accepts_bytes(*loose, text)) << text;
    }
    for (const std::string text : {"{\n  \"a\": 1\n}", R"({"a":  1})", "{\"a\":\t1}"}) {
      EXPECT_FALSE(accepts_bytes(*compact, text)) << text;
      EXPECT_TRUE(accepts_bytes(*loose, text)) << text;
    }
  }
}

}  // namespace
}  // namespace onnx_genai::testing
