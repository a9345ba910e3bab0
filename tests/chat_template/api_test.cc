// The public API: loading a model's template(s) from tokenizer_config.json / chat_template.jinja,
// picking a named template as transformers does, and the context apply() passes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "onnx_genai/chat_template.h"

namespace onnx_genai {
namespace {

// Prints the variables a template can see, to check what apply() passes.
constexpr const char* kShowContext =
    "{{ bos_token }}|{{ eos_token }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|"
    "{{ enable_thinking }}|{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}";

std::string config_with(const std::string& chat_template_json) {
  return R"({"bos_token": {"__type": "AddedToken", "content": "<B>"}, "eos_token": "<E>", "pad_token": null,
             "chat_template": )" +
         chat_template_json + "}";
}

TEST(ChatTemplates, SingleTemplateFromTokenizerConfig) {
  auto templates = ChatTemplates::from_tokenizer_config(config_with("\"" + std::string(kShowContext) + "\""));
  ASSERT_TRUE(templates.is_ok()) << templates.status().message();
  ChatRequest request;
  request.messages_json = R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])";
  request.add_generation_prompt = true;
  request.extra_context_json = R"({"enable_thinking": false})";
  auto text = templates->apply(request);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_EQ(*text, "<B>|<E>|true|true|true|false|user=hi;assistant=yo;");
}

TEST(ChatTemplates, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  auto templates = ChatTemplates::from_tokenizer_config(
      config_with(R"([{"name": "default", "template": "D{{ tools | length if tools else '' }}"},
                      {"name": "tool_use", "template": "T{{ tools | length }}"},
                      {"name": "rag", "template": "R"}])"));
  ASSERT_TRUE(templates.is_ok()) << templates.status().message();
  ChatRequest request;
  EXPECT_EQ(*templates->apply(request), "D");
  request.tools_json = R"([{"type": "function", "function": {"name": "f"}}])";
  EXPECT_EQ(*templates->apply(request), "T1");
  request.template_name = "rag";
  EXPECT_EQ(*templates->apply(request), "R");
  request.template_name = "missing";
  EXPECT_FALSE(templates->apply(request).is_ok());
}

TEST(ChatTemplates, NamedTemplatesWithoutDefaultNeedAName) {
  auto templates = ChatTemplates::from_tokenizer_config(config_with(R"([{"name": "rag", "template": "R"}])"));
  ASSERT_TRUE(templates.is_ok());
  auto text = templates->apply(ChatRequest{});
  ASSERT_FALSE(text.is_ok());
  EXPECT_NE(text.status().message().find("no default"), std::string::npos);
}

TEST(ChatTemplates, BadConfigsAreErrors) {
  EXPECT_FALSE(ChatTemplates::from_tokenizer_config("{").is_ok());
  EXPECT_FALSE(ChatTemplates::from_tokenizer_config(R"({"bos_token": "<s>"})").is_ok());
  EXPECT_FALSE(ChatTemplates::from_tokenizer_config(config_with("42")).is_ok());
  EXPECT_FALSE(ChatTemplates::from_tokenizer_config(config_with(R"([{"name": "default"}])")).is_ok());
  auto syntax = ChatTemplates::from_tokenizer_config(config_with(R"([{"name": "default", "template": "{{ x"}])"));
  ASSERT_FALSE(syntax.is_ok());
  EXPECT_NE(syntax.status().message().find("chat_template \"default\""), std::string::npos) << syntax.status().message();
  auto templates = ChatTemplates::from_tokenizer_config(config_with("\"{{ messages | length }}\""));
  ASSERT_TRUE(templates.is_ok());
  ChatRequest request;
  request.messages_json = "[1, 2";
  EXPECT_FALSE(templates->apply(request).is_ok());
  request.messages_json = "[]";
  request.extra_context_json = "[1]";
  EXPECT_FALSE(templates->apply(request).is_ok());
}

TEST(ChatTemplates, LoadPrefersChatTemplateJinja) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "og_chat_template_load_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << config_with("\"config {{ bos_token }}\"");
  auto from_config = ChatTemplates::load(dir.string());
  ASSERT_TRUE(from_config.is_ok()) << from_config.status().message();
  EXPECT_EQ(*from_config->apply(ChatRequest{}), "config <B>");
  std::ofstream(dir / "chat_template.jinja") << "jinja {{ eos_token }}\n";
  auto from_jinja = ChatTemplates::load(dir.string());
  ASSERT_TRUE(from_jinja.is_ok()) << from_jinja.status().message();
  EXPECT_EQ(*from_jinja->apply(ChatRequest{}), "jinja <E>");
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(ChatTemplates::load(dir.string()).is_ok());
}

TEST(ChatTemplate, RenderTakesAnyContext) {
  auto parsed = ChatTemplate::parse("{% for m in messages %}{{ m.content | upper }}{% endfor %}{{ custom }}");
  ASSERT_TRUE(parsed.is_ok());
  auto text = parsed->render(R"({"messages": [{"role": "user", "content": "a"}], "custom": 1.0})");
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_EQ(*text, "A1");  // JSON 1.0 is the JavaScript number 1, an integer
}

}  // namespace
}  // namespace onnx_genai
