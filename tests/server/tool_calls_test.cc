// Tool calls against the families' own chat templates (llama.cpp's copies of the Hugging Face
// templates, fetched by the chat_template_references fixture): what a template writes for an
// assistant's tool calls is what the model was trained to produce, so the parser must recover
// the calls from it, streaming must hold it back, and a forced call's constraint must accept it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "constraints/constraint_test_util.h"
#include "onnx_genai/chat_template.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace onnx_genai::server {
namespace {

using nlohmann::json;

struct Family {
  const char* template_file;
  ToolCallFormat format;
  std::vector<std::pair<std::string, std::string>> special_tokens;
  const char* end_of_turn;  // the stop token ending the assistant's turn (not in generated text)
  bool parallel;            // the template writes several calls in one turn
};

const std::vector<Family>& families() {
  static const std::vector<Family> all = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::kHermes, {}, "<|im_end|>", true},
      {"Qwen-Qwen3-0.6B.jinja", ToolCallFormat::kHermes, {}, "<|im_end|>", true},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolCallFormat::kHermes,
       {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|im_end|>"}}, "<|im_end|>", true},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::kLlama3Json,
       {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}}, "<|eot_id|>", false},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", ToolCallFormat::kLlama3Json,
       {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}}, "<|eot_id|>", false},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallFormat::kMistralJson,
       {{"bos_token", "<s>"}, {"eos_token", "</s>"}}, "</s>", true},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolCallFormat::kMistralArgs,
       {{"bos_token", "<s>"}, {"eos_token", "</s>"}}, "</s>", true},
  };
  return all;
}

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"},
                                                    "days": {"type": "integer", "description": "Days ahead"}},
                   "required": ["city", "days"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "description": "The time in a zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "description": "A time zone"}},
                   "required": ["zone"], "additionalProperties": false}}}])");

// OpenAI's wire form: arguments as JSON text (template_tool_calls turns it into an object).
json wire_call(const char* id, const char* name, const char* arguments) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
}

std::string read_template(const Family& family) {
  std::ifstream in(std::string(OG_LLAMA_TEMPLATES_DIR) + "/" + family.template_file);
  EXPECT_TRUE(in) << family.template_file << " missing (the chat_template_references fixture fetches it)";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// What the template writes for the assistant's turn holding `calls`, up to its stop token.
std::string rendered_reply(const Family& family, const json& calls) {
  Result<ChatTemplates> templates = ChatTemplates::from_source(read_template(family), family.special_tokens);
  EXPECT_TRUE(templates.is_ok()) << templates.status().message();
  const json user = json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}});
  json with_reply = user;
  with_reply.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", template_tool_calls(calls)}});
  ChatRequest prompt{.messages_json = user.dump(), .tools_json = kTools.dump(), .add_generation_prompt = true};
  ChatRequest whole{.messages_json = with_reply.dump(), .tools_json = kTools.dump(), .add_generation_prompt = false};
  Result<std::string> head = templates->apply(prompt);
  Result<std::string> all = templates->apply(whole);
  EXPECT_TRUE(head.is_ok() && all.is_ok()) << family.template_file;
  if (!head.is_ok() || !all.is_ok() || !all->starts_with(*head)) {
    ADD_FAILURE() << family.template_file << ": the reply does not continue the prompt\n" << (head.is_ok() ? *head : head.status().message())
                  << "\n----\n" << (all.is_ok() ? *all : all.status().message());
    return "";
  }
  std::string reply = all->substr(head->size());
  reply = reply.substr(0, reply.rfind(family.end_of_turn));
  // Qwen3 writes an empty reasoning block before a non-thinking reply; its generation prompt with
  // enable_thinking=false ends with that block, so a model's reply starts after it.
  const std::string empty_think = "<think>\n\n</think>\n\n";
  return reply.starts_with(empty_think) ? reply.substr(empty_think.size()) : reply;
}

void expect_calls(const std::vector<ToolCall>& calls, const json& expected, const char* where) {
  ASSERT_EQ(calls.size(), expected.size()) << where;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].name, expected[i]["function"]["name"]) << where;
    EXPECT_EQ(json::parse(calls[i].arguments), json::parse(expected[i]["function"]["arguments"].get<std::string>())) << where;
    EXPECT_FALSE(calls[i].id.empty());
  }
}

TEST(ToolCalls, ParsesWhatEachFamilysTemplateWrites) {
  const json one = json::array({wire_call("abcDEF123", "get_weather", R"({"city": "Paris", "days": 3})")});
  const json two = json::array({wire_call("abcDEF123", "get_weather", R"({"city": "Paris", "days": 3})"),
                                wire_call("xyz789ABC", "get_time", R"({"zone": "CET"})")});
  for (const Family& family : families()) {
    const std::string reply = rendered_reply(family, one);
    ParsedReply parsed = parse_tool_calls(family.format, reply);
    expect_calls(parsed.calls, one, family.template_file);
    EXPECT_EQ(parsed.content, "") << family.template_file << ": " << reply;
    if (family.parallel) expect_calls(parse_tool_calls(family.format, rendered_reply(family, two)).calls, two, family.template_file);
  }
}

TEST(ToolCalls, TextWithoutWellFormedCallsIsContent) {
  for (const Family& family : families()) {
    for (const std::string text : {"The weather in Paris is mild.", "<tool_call>\n{\"name\": \"get_weather\", \"argu",
                                   "[TOOL_CALLS][{\"name\": 3}]", "{\"city\": \"Paris\"}"}) {
      const ParsedReply parsed = parse_tool_calls(family.format, text);
      EXPECT_TRUE(parsed.calls.empty()) << family.template_file << ": " << text;
    }
  }
  // Hermes keeps the text around the calls as content.
  const ParsedReply mixed = parse_tool_calls(ToolCallFormat::kHermes,
                                             "Let me check.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>");
  EXPECT_EQ(mixed.content, "Let me check.");
  ASSERT_EQ(mixed.calls.size(), 1u);
  EXPECT_EQ(mixed.calls[0].name, "get_time");
}

// Streamed a byte at a time, the content sent never includes any part of a call, and what was
// sent is the text before the call.
TEST(ToolCalls, StreamingHoldsBackEveryPartOfACall) {
  const json one = json::array({wire_call("abcDEF123", "get_weather", R"({"city": "Paris", "days": 3})")});
  for (const Family& family : families()) {
    const std::string reply = "Checking the forecast. " + rendered_reply(family, one);
    size_t sent = 0;
    for (size_t n = 1; n <= reply.size(); ++n) {
      const size_t now = streamable_content(family.format, std::string_view(reply).substr(0, n));
      ASSERT_GE(now, sent) << family.template_file << " at byte " << n;
      sent = now;
    }
    const std::string streamed = reply.substr(0, sent);
    if (family.format == ToolCallFormat::kLlama3Json) {
      EXPECT_EQ(streamed, reply) << "a Llama reply that starts with text is not a call";
    } else {
      EXPECT_EQ(std::string(streamed), reply.substr(0, reply.find(family.format == ToolCallFormat::kHermes ? "<tool_call>" : "[TOOL_CALLS]")))
          << family.template_file;
    }
  }
  // A Llama reply that starts like a call is held whole.
  EXPECT_EQ(streamable_content(ToolCallFormat::kLlama3Json, "{\"name\": \"get"), 0u);
  EXPECT_EQ(streamable_content(ToolCallFormat::kLlama3Json, "<|python"), 0u);
}

// A forced call's constraint accepts the call exactly as the template writes it (the part after
// the forced opening), so constrained decoding produces what the model was trained on.
TEST(ToolCalls, ForcedConstraintAcceptsTheTemplatesCall) {
  const auto& qwen = testing::test_vocabulary("qwen3");
  const json one = json::array({wire_call("abcDEF123", "get_weather", R"({"city": "Paris", "days": 3})")});
  for (const Family& family : families()) {
    // Mistral's templates write call ids into the call (an "id" member, [CALL_ID]) that a model
    // forced by us does not write.
    if (family.format == ToolCallFormat::kMistralJson || family.format == ToolCallFormat::kMistralArgs) continue;
    for (const json& choice : {json("required"), json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}}) {
      ToolsRequest request;
      std::optional<ConstraintSpec> constraint;
      const std::optional<ApiError> error = read_tools(json{{"tools", kTools}, {"tool_choice", choice}}, family.format, request, constraint);
      ASSERT_FALSE(error) << error->message;
      ASSERT_TRUE(constraint);
      std::string reply = rendered_reply(family, one);
      ASSERT_TRUE(reply.starts_with(request.forced_prefix)) << family.template_file << ": " << reply;
      std::string call = reply.substr(request.forced_prefix.size());
      if (family.format == ToolCallFormat::kHermes) call = call.substr(0, call.rfind("\n</tool_call>"));
      auto compiled = CompiledConstraint::compile(*constraint, qwen.vocabulary);
      ASSERT_TRUE(compiled.is_ok()) << compiled.status().message();
      EXPECT_TRUE(testing::accepts_bytes(*compiled, call)) << family.template_file << ": " << call;
      EXPECT_FALSE(testing::accepts_bytes(*compiled, R"({"name": "get_weather", "arguments": {"city": 3, "days": 3}})"));
    }
  }
}

TEST(ToolCalls, BadToolsAndChoicesAreErrorsNamingTheField) {
  const auto error_param = [](const json& body) {
    ToolsRequest request;
    std::optional<ConstraintSpec> constraint;
    std::optional<ApiError> error = read_tools(body, ToolCallFormat::kHermes, request, constraint);
    return error ? error->param : std::string("(none)");
  };
  EXPECT_EQ(error_param({{"tools", "get_weather"}}), "tools");
  EXPECT_EQ(error_param({{"tools", {{{"type", "code"}}}}}), "tools[0]");
  EXPECT_EQ(error_param({{"tools", {{{"type", "function"}, {"function", {{"name", "bad name!"}}}}}}}), "tools[0].function.name");
  EXPECT_EQ(error_param({{"tools", kTools}, {"tool_choice", "sometimes"}}), "tool_choice");
  EXPECT_EQ(error_param({{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}), "tool_choice");
  EXPECT_EQ(error_param({{"tool_choice", "required"}}), "tool_choice");
  EXPECT_EQ(error_param({{"tools", kTools}, {"parallel_tool_calls", "yes"}}), "parallel_tool_calls");
  EXPECT_EQ(error_param({{"tools", kTools}, {"tool_choice", "auto"}}), "(none)");
}

TEST(ToolCalls, FormatFromTheVocabulary) {
  EXPECT_EQ(detect_tool_call_format(testing::test_vocabulary("qwen3").tokenizer.get()), ToolCallFormat::kHermes);
  EXPECT_EQ(detect_tool_call_format(nullptr), ToolCallFormat::kHermes);
}

}  // namespace
}  // namespace onnx_genai::server
