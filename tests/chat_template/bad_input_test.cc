// Bad templates and contexts: syntax errors name line and column, raise_exception surfaces its
// message, and runaway nesting, recursion, loops and growth end in a clear error, never a crash.
#include <gtest/gtest.h>

#include <string>

#include "onnx_genai/chat_template.h"
#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/lexer.h"
#include "tokenizer/chat_template/parser.h"

namespace onnx_genai {
namespace {

std::string parse_error(const std::string& source) {
  auto parsed = ChatTemplate::parse(source);
  return parsed.is_ok() ? "parsed" : parsed.status().message();
}

std::string render_error(const std::string& source, const std::string& context = "{}") {
  auto parsed = ChatTemplate::parse(source);
  if (!parsed.is_ok()) return "parse error: " + parsed.status().message();
  auto text = parsed->render(context);
  return text.is_ok() ? "rendered: " + *text : text.status().message();
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(ChatTemplateSyntax, ErrorsNameLineAndColumn) {
  EXPECT_NE(parse_error("Hello\n{{ name }\n").find("line 2, column 9"), std::string::npos) << parse_error("Hello\n{{ name }\n");
  const std::string wrong_end = parse_error("{% if x %}\n  a\n{% endfor %}");
  EXPECT_NE(wrong_end.find("line 3, column 4"), std::string::npos) << wrong_end;
  EXPECT_NE(wrong_end.find("endfor"), std::string::npos) << wrong_end;
  const std::string bad_char = parse_error("ok\n\n  {{ x @ y }}");
  EXPECT_NE(bad_char.find("line 3, column 8"), std::string::npos) << bad_char;
  EXPECT_NE(bad_char.find("Unexpected character: @"), std::string::npos) << bad_char;
}

TEST(ChatTemplateSyntax, MalformedTemplatesAreErrors) {
  for (const char* source : {"{{ 'abc }}", "{{ x | }}", "{% if x %}never closed", "{% for %}{% endfor %}", "{{ x",
                             "{% endif %}", "{# open comment", "{{ '\\q' }}", "{{ '\\x4' }}", "{% macro m(a=1, b) %}{% endmacro %}",
                             "{{ f(a=1, 2) }}", "{{ [1, 2 }}", "{% set %}", "{{ }}", "{%- -%}", "{{ x[] }}", "{{ x[1:2:3:4] }}"}) {
    EXPECT_NE(parse_error(source), "parsed") << source;
    EXPECT_EQ(parse_error(source).rfind("chat template line ", 0), 0u) << source << " -> " << parse_error(source);
  }
}

TEST(ChatTemplateRuntime, RaiseExceptionSurfacesItsMessage) {
  const std::string message =
      render_error("{% if messages[0].role != 'user' %}{{ raise_exception('Conversation roles must alternate user/assistant!') }}{% endif %}",
                   R"({"messages": [{"role": "assistant", "content": "x"}]})");
  EXPECT_NE(message.find(std::string(chat_template::kRaisedPrefix) + "Conversation roles must alternate user/assistant!"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.rfind("chat template line 1, column ", 0), 0u) << message;
}

TEST(ChatTemplateRuntime, ErrorsNameWhere) {
  const std::string message = render_error("a\nb\n{{ 1 + none }}");
  EXPECT_NE(message.find("line 3"), std::string::npos) << message;
  EXPECT_NE(message.find("null values"), std::string::npos) << message;
  EXPECT_NE(render_error("{% break %}").find("outside of a for loop"), std::string::npos);
  EXPECT_NE(render_error("{{ x.y.z() }}").find("not a function"), std::string::npos);
  EXPECT_NE(render_error("{{ 1 }}", "[1, 2]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(render_error("{{ 1 }}", "{not json").find("invalid JSON"), std::string::npos);
  EXPECT_NE(render_error("{{ 1 }}", R"({"true": 1})").find("already declared"), std::string::npos);
}

TEST(ChatTemplateLimits, DeepNestingIsAnError) {
  EXPECT_NE(parse_error("{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}").find("nests deeper"), std::string::npos);
  EXPECT_NE(parse_error("{{ " + repeat("[", 100000) + " }}").find("nests deeper"), std::string::npos);
  EXPECT_NE(parse_error("{{ " + repeat("not ", 100000) + "x }}").find("nests deeper"), std::string::npos);
  EXPECT_NE(parse_error("{{ " + repeat("- ", 100000) + "1 }}").find("nests deeper"), std::string::npos);
  EXPECT_NE(parse_error(repeat("{% if true %}", 100000) + repeat("{% endif %}", 100000)).find("nests deeper"), std::string::npos);
  // Under the limit, nesting works.
  EXPECT_EQ(render_error("{{ " + repeat("(", 50) + "1" + repeat(")", 50) + " }}"), "rendered: 1");
}

TEST(ChatTemplateLimits, RunawayRecursionIsAnError) {
  EXPECT_NE(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nests deeper"), std::string::npos);
  EXPECT_EQ(render_error("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}"),
            "rendered: 54321");
}

TEST(ChatTemplateLimits, HugeLoopsAndGrowthAreErrors) {
  EXPECT_NE(render_error("{% for i in range(1000000000) %}{% endfor %}").find("array exceeds"), std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                .find("string exceeds"),
            std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace(a=[1]) %}{% for i in range(100) %}{% set ns.a = ns.a + ns.a %}{% endfor %}")
                .find("array exceeds"),
            std::string::npos);
  EXPECT_NE(render_error("{{ ('x\n' * 1) }}").find("Unknown operator"), std::string::npos);
}

TEST(ChatTemplateLimits, StepLimitStopsNestedLoops) {
  const std::string source = "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}";
  auto tokens = chat_template::tokenize(source);
  ASSERT_TRUE(tokens.is_ok());
  auto program = chat_template::parse(*tokens, source);
  ASSERT_TRUE(program.is_ok());
  chat_template::Limits limits;
  limits.max_steps = 100000;
  chat_template::Interpreter interpreter(source, limits);
  auto global = std::make_shared<chat_template::Env>();
  chat_template::install_globals(*global);
  auto text = interpreter.run(**program, global);
  ASSERT_FALSE(text.is_ok());
  EXPECT_NE(text.status().message().find("exceeds 100000 steps"), std::string::npos) << text.status().message();
}

TEST(ChatTemplateLimits, DeepAndSelfContainingValues) {
  // A chain 200000 links long is built and freed without recursion.
  EXPECT_EQ(render_error("{% set ns = namespace(a=[]) %}{% for i in range(200000) %}{% set ns.a = [ns.a] %}{% endfor %}ok"),
            "rendered: ok");
  EXPECT_NE(render_error("{% set ns = namespace(a=[]) %}{% for i in range(600) %}{% set ns.a = [ns.a] %}{% endfor %}{{ ns.a }}")
                .find("nests deeper"),
            std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace() %}{% set ns.self = [ns] %}{{ ns }}").find("contains itself"), std::string::npos);
}

TEST(ChatTemplateRuntime, InvalidUtf8IsCarriedThrough) {
  EXPECT_EQ(render_error("a\xff{{ 'b\xc3' }}"), "rendered: a\xff" "b\xc3");
  EXPECT_EQ(render_error("{{ '\xe2\x80\xa8x' | trim }}"), "rendered: x");
}

TEST(ChatTemplateRuntime, Jinja2FilterMisuseIsAnError) {
  // Each of these is a TypeError/FilterArgumentError in Python Jinja2 too.
  EXPECT_NE(render_error("{{ [1] | select('no_such_test') }}").find("Unknown test: no_such_test"), std::string::npos);
  EXPECT_NE(render_error("{{ 5 | select('odd') }}").find("Cannot apply filter \"select\" to type: IntegerValue"), std::string::npos);
  EXPECT_NE(render_error("{{ 2.5 | round(1, 'up') }}").find("method must be common, ceil or floor"), std::string::npos);
  EXPECT_NE(render_error("{{ 2.5 | round(1.5) }}").find("precision must be an integer"), std::string::npos);
  EXPECT_NE(render_error("{{ 'a' | round }}").find("Cannot apply filter \"round\" to type: StringValue"), std::string::npos);
  EXPECT_NE(render_error("{% for x in [1] %}{{ loop.cycle() }}{% endfor %}").find("no items for cycling given"), std::string::npos);
  EXPECT_NE(render_error("{{ 5 | count }}").find("Unknown NumericValue filter: count"), std::string::npos);
}

}  // namespace
}  // namespace onnx_genai
