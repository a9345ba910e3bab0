// Tool calling in /v1/chat/completions: the request's `tools` and `tool_choice` checked, the
// model family's tool-call syntax found from its vocabulary, calls parsed out of generated text
// into OpenAI's `tool_calls`, and for tool_choice "required" or a named function, the call forced:
// the family's opening marker is fed after the prompt and the rest is constrained by a JSON
// Schema of the allowed calls, so the call always parses and its arguments validate.
//
// Syntaxes (what each family's chat template writes for an assistant's tool calls):
//   Hermes (Qwen2.5, Qwen3, Hermes 2/3):  <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//   Llama 3.1 / 3.2 / 3.3 JSON:           {"name": ..., "parameters": {...}}   (the whole reply)
//   Mistral (Nemo):                       [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}]
//   Mistral (Small 3.2, Devstral):        [TOOL_CALLS]name[CALL_ID]id[ARGS]{...}
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "onnx_genai/constraints.h"
#include "onnx_genai/tokenizer.h"

namespace onnx_genai::server {

struct ApiError;

enum class ToolCallFormat { kHermes, kLlama3Json, kMistralJson, kMistralArgs };

// From the tokens the family's syntax uses: <tool_call> (Hermes), [TOOL_CALLS] with [ARGS] or
// without, <|python_tag|> (Llama 3.1+). A vocabulary with none of them gets Hermes' syntax,
// written as plain text.
ToolCallFormat detect_tool_call_format(const Tokenizer* tokenizer);

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

// What a request asks of tools; `choice` is kNone when it has none.
struct ToolsRequest {
  ToolChoice choice = ToolChoice::kNone;
  std::string named;                               // the function tool_choice names
  nlohmann::json tools = nlohmann::json::array();  // as sent, checked
  ToolCallFormat format = ToolCallFormat::kHermes;
  std::string forced_prefix;                       // fed after the prompt when forced
  bool parallel = true;                            // parallel_tool_calls: false keeps the first call
  bool active() const { return choice != ToolChoice::kNone; }
  bool forced() const { return choice == ToolChoice::kRequired || choice == ToolChoice::kNamed; }
};

// Reads `tools`, `tool_choice` and `parallel_tool_calls` from a chat request body. Without tools,
// tool_choice may only be "none" or "auto". For a forced choice, sets forced_prefix and returns
// the constraint on what follows it.
std::optional<ApiError> read_tools(const nlohmann::json& body, ToolCallFormat format, ToolsRequest& out,
                                   std::optional<ConstraintSpec>& forced_constraint);

// An assistant message's tool_calls as chat templates read them: each function's `arguments`
// JSON text parsed into an object (templates print it with `tojson`), ids kept.
nlohmann::json template_tool_calls(const nlohmann::json& calls);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as OpenAI sends it
};

struct ParsedReply {
  std::string content;  // the text outside the calls, trimmed
  std::vector<ToolCall> calls;
};

// The calls in a finished reply (with the forced prefix in front when forced). A reply whose
// call markers do not hold well-formed calls has no calls: all of it is content.
ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view text);

// How much of a reply still being generated can be streamed as content: everything before a
// call starts, less a tail that could be the start of a call marker.
size_t streamable_content(ToolCallFormat format, std::string_view text);

// OpenAI's tool_calls array.
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls);

}  // namespace onnx_genai::server
