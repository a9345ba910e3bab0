#include "server/tool_calls.h"

#include <cctype>
#include <random>

#include "server/openai_request.h"

namespace onnx_genai::server {

using nlohmann::json;

namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kLlamaPythonTag = "<|python_tag|>";

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// OpenAI's ids are "call_" and 24 characters; Mistral's templates refuse ids that are not 9
// alphanumerics, and clients send the ids back with the tool results.
std::string call_id(ToolCallFormat format) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static thread_local std::mt19937_64 rng(std::random_device{}());
  const bool mistral = format == ToolCallFormat::kMistralJson || format == ToolCallFormat::kMistralArgs;
  std::string id = mistral ? "" : "call_";
  std::uniform_int_distribution<size_t> pick(0, sizeof kAlphabet - 2);
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlphabet[pick(rng)];
  return id;
}

std::optional<json> parse_json(std::string_view text) {
  json value = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

// {"name": ..., "arguments" or "parameters": ...} as a call; nullopt when it is not one.
std::optional<ToolCall> call_from(const json& object, ToolCallFormat format) {
  const json* name = member(object, "name");
  if (!name || !name->is_string()) return std::nullopt;
  const json* arguments = member(object, "arguments");
  if (!arguments) arguments = member(object, "parameters");
  std::string text = "{}";
  if (arguments && arguments->is_string()) {
    text = arguments->get<std::string>();
  } else if (arguments && arguments->is_object()) {
    text = arguments->dump();
  } else if (arguments) {
    return std::nullopt;
  }
  return ToolCall{call_id(format), name->get<std::string>(), std::move(text)};
}

// Calls from a JSON object or an array of objects; empty when any item is not a call.
std::vector<ToolCall> calls_from(const json& value, ToolCallFormat format) {
  std::vector<ToolCall> calls;
  for (const json& item : value.is_array() ? value : json::array({value})) {
    std::optional<ToolCall> call = call_from(item, format);
    if (!call) return {};
    calls.push_back(std::move(*call));
  }
  return calls;
}

ParsedReply parse_hermes(std::string_view text) {
  ParsedReply reply;
  std::string content;
  size_t at = 0;
  while (at < text.size()) {
    const size_t open = text.find(kHermesOpen, at);
    content += text.substr(at, open == std::string_view::npos ? std::string_view::npos : open - at);
    if (open == std::string_view::npos) break;
    const size_t body = open + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    std::optional<json> value = parse_json(trim(text.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body)));
    std::optional<ToolCall> call = value ? call_from(*value, ToolCallFormat::kHermes) : std::nullopt;
    if (!call) return {std::string(text), {}};
    reply.calls.push_back(std::move(*call));
    at = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
  }
  reply.content = trim(content);
  return reply;
}

// The whole reply is the call(s): one JSON object, an array of them, or objects joined by ';'.
ParsedReply parse_llama(std::string_view text) {
  std::string_view body = trim(text);
  if (body.starts_with(kLlamaPythonTag)) body = trim(body.substr(kLlamaPythonTag.size()));
  if (!body.starts_with('{') && !body.starts_with('[')) return {std::string(text), {}};
  if (std::optional<json> value = parse_json(body)) {
    std::vector<ToolCall> calls = calls_from(*value, ToolCallFormat::kLlama3Json);
    return calls.empty() ? ParsedReply{std::string(text), {}} : ParsedReply{"", std::move(calls)};
  }
  ParsedReply reply;
  size_t at = 0;
  while (at <= body.size()) {
    const size_t end = std::min(body.find(';', at), body.size());
    std::optional<json> value = parse_json(trim(body.substr(at, end - at)));
    std::optional<ToolCall> call = value ? call_from(*value, ToolCallFormat::kLlama3Json) : std::nullopt;
    if (!call) return {std::string(text), {}};
    reply.calls.push_back(std::move(*call));
    at = end + 1;
  }
  return reply;
}

// After [TOOL_CALLS]: a JSON array (Nemo) or name[CALL_ID]id[ARGS]{...}, repeated (v11).
ParsedReply parse_mistral(std::string_view text) {
  const size_t marker = text.find(kMistralMarker);
  if (marker == std::string_view::npos) return {std::string(trim(text)), {}};
  ParsedReply reply{std::string(trim(text.substr(0, marker))), {}};
  std::string_view rest = trim(text.substr(marker + kMistralMarker.size()));
  if (rest.starts_with('[')) {
    std::optional<json> value = parse_json(rest);
    reply.calls = value && value->is_array() ? calls_from(*value, ToolCallFormat::kMistralJson) : std::vector<ToolCall>{};
    if (reply.calls.empty()) return {std::string(text), {}};
    return reply;
  }
  while (!rest.empty()) {
    const size_t next = rest.find(kMistralMarker);
    std::string_view one = rest.substr(0, next);
    const size_t args = one.find("[ARGS]");
    if (args == std::string_view::npos) return {std::string(text), {}};
    std::string_view name = one.substr(0, args);
    name = name.substr(0, name.find("[CALL_ID]"));
    std::optional<json> value = parse_json(trim(one.substr(args + 6)));
    if (trim(name).empty() || !value || !value->is_object()) return {std::string(text), {}};
    reply.calls.push_back(ToolCall{call_id(ToolCallFormat::kMistralArgs), std::string(trim(name)), value->dump()});
    rest = next == std::string_view::npos ? std::string_view() : trim(rest.substr(next + kMistralMarker.size()));
  }
  return reply;
}

// The longest tail of `text` that is a proper prefix of `marker`.
size_t marker_prefix_tail(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (marker.starts_with(text.substr(text.size() - n))) return n;
  }
  return 0;
}

bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

std::optional<ApiError> check_tools(const json& tools) {
  if (!tools.is_array()) return ApiError{400, "tools: expected an array of {\"type\": \"function\", \"function\": {...}}", "tools", ""};
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    const json* type = member(tools[i], "type");
    const json* function = member(tools[i], "function");
    if (!type || *type != "function" || !function || !function->is_object()) {
      return ApiError{400, where + ": expected {\"type\": \"function\", \"function\": {...}}", where, ""};
    }
    const json* name = member(*function, "name");
    if (!name || !name->is_string() || !valid_function_name(name->get<std::string>())) {
      return ApiError{400, where + ".function.name: expected 1 to 64 letters, digits, '_' or '-'", where + ".function.name", ""};
    }
    const json* parameters = member(*function, "parameters");
    if (parameters && !parameters->is_object()) {
      return ApiError{400, where + ".function.parameters: expected a JSON Schema object", where + ".function.parameters", ""};
    }
  }
  return std::nullopt;
}

// The JSON Schema of one call of `tool` in the family's JSON: name first, as templates write it.
nlohmann::ordered_json call_schema(const json& tool, const char* arguments_key) {
  const json& function = tool["function"];
  const json* parameters = member(function, "parameters");
  nlohmann::ordered_json properties;
  properties["name"] = {{"const", function["name"]}};
  properties[arguments_key] = parameters ? nlohmann::ordered_json::parse(parameters->dump()) : nlohmann::ordered_json{{"type", "object"}};
  return {{"type", "object"}, {"properties", properties}, {"required", {"name", arguments_key}}, {"additionalProperties", false}};
}

// The forced call: the opening text fed after the prompt, and the schema of what follows it.
std::optional<ApiError> force_call(ToolsRequest& request, std::optional<ConstraintSpec>& constraint) {
  std::vector<const json*> allowed;
  for (const json& tool : request.tools) {
    if (request.choice == ToolChoice::kRequired || tool["function"]["name"] == request.named) allowed.push_back(&tool);
  }
  const char* key = request.format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
  nlohmann::ordered_json schema;
  if (request.format == ToolCallFormat::kMistralArgs) {
    if (allowed.size() != 1) {
      return ApiError{400, "tool_choice: this model writes one call as name[ARGS]{...}; name the function to force", "tool_choice", ""};
    }
    const json& function = (*allowed[0])["function"];
    request.forced_prefix = std::string(kMistralMarker) + function["name"].get<std::string>() + "[ARGS]";
    const json* parameters = member(function, "parameters");
    constraint = ConstraintSpec{ConstraintKind::kJsonSchema, parameters ? parameters->dump() : R"({"type": "object"})", true};
    return std::nullopt;
  }
  if (allowed.size() == 1) {
    schema = call_schema(*allowed[0], key);
  } else {
    nlohmann::ordered_json any = nlohmann::ordered_json::array();
    for (const json* tool : allowed) any.push_back(call_schema(*tool, key));
    schema = {{"anyOf", any}};
  }
  switch (request.format) {
    case ToolCallFormat::kHermes: request.forced_prefix = std::string(kHermesOpen) + "\n"; break;
    case ToolCallFormat::kMistralJson:
      request.forced_prefix = kMistralMarker;
      schema = {{"type", "array"}, {"items", schema}, {"minItems", 1}, {"maxItems", 1}};
      break;
    case ToolCallFormat::kLlama3Json:
    case ToolCallFormat::kMistralArgs: break;
  }
  constraint = ConstraintSpec{ConstraintKind::kJsonSchema, schema.dump(), true};
  return std::nullopt;
}

std::optional<ApiError> read_choice(const json* choice, ToolsRequest& out) {
  const bool has_tools = !out.tools.empty();
  if (!choice) {
    out.choice = has_tools ? ToolChoice::kAuto : ToolChoice::kNone;
    return std::nullopt;
  }
  if (choice->is_string()) {
    const std::string name = choice->get<std::string>();
    if (name == "none") out.choice = ToolChoice::kNone;
    else if (name == "auto") out.choice = has_tools ? ToolChoice::kAuto : ToolChoice::kNone;
    else if (name == "required") out.choice = ToolChoice::kRequired;
    else return ApiError{400, "tool_choice: expected none, auto, required or {\"type\": \"function\", ...}, got \"" + name + "\"", "tool_choice", ""};
  } else {
    const json* function = member(*choice, "function");
    const json* name = function ? member(*function, "name") : nullptr;
    if (!name || !name->is_string()) {
      return ApiError{400, "tool_choice: expected {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice", ""};
    }
    out.choice = ToolChoice::kNamed;
    out.named = name->get<std::string>();
    bool known = false;
    for (const json& tool : out.tools) known = known || tool["function"]["name"] == out.named;
    if (!known) return ApiError{400, "tool_choice: no tool is named '" + out.named + "'", "tool_choice", ""};
  }
  if (out.forced() && !has_tools) return ApiError{400, "tool_choice: forcing a call needs tools", "tool_choice", ""};
  return std::nullopt;
}

}  // namespace

ToolCallFormat detect_tool_call_format(const Tokenizer* tokenizer) {
  if (!tokenizer || tokenizer->token_to_id(kHermesOpen)) return ToolCallFormat::kHermes;
  if (tokenizer->token_to_id(kMistralMarker)) {
    return tokenizer->token_to_id("[ARGS]") ? ToolCallFormat::kMistralArgs : ToolCallFormat::kMistralJson;
  }
  if (tokenizer->token_to_id(kLlamaPythonTag)) return ToolCallFormat::kLlama3Json;
  return ToolCallFormat::kHermes;
}

std::optional<ApiError> read_tools(const json& body, ToolCallFormat format, ToolsRequest& out,
                                   std::optional<ConstraintSpec>& forced_constraint) {
  out.format = format;
  if (const json* tools = member(body, "tools")) {
    if (auto error = check_tools(*tools)) return error;
    out.tools = *tools;
  }
  if (const json* parallel = member(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) return ApiError{400, "parallel_tool_calls: expected a boolean", "parallel_tool_calls", ""};
    out.parallel = parallel->get<bool>();
  }
  if (auto error = read_choice(member(body, "tool_choice"), out)) return error;
  if (out.forced()) return force_call(out, forced_constraint);
  return std::nullopt;
}

json template_tool_calls(const json& calls) {
  json out = calls;
  if (!out.is_array()) return out;
  for (json& call : out) {
    json* function = call.is_object() && call.contains("function") ? &call["function"] : nullptr;
    if (!function || !function->is_object() || !function->contains("arguments")) continue;
    json& arguments = (*function)["arguments"];
    if (!arguments.is_string()) continue;
    if (std::optional<json> parsed = parse_json(arguments.get<std::string>()); parsed && parsed->is_object()) {
      arguments = std::move(*parsed);
    }
  }
  return out;
}

ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view text) {
  switch (format) {
    case ToolCallFormat::kHermes: return parse_hermes(text);
    case ToolCallFormat::kLlama3Json: return parse_llama(text);
    case ToolCallFormat::kMistralJson:
    case ToolCallFormat::kMistralArgs: return parse_mistral(text);
  }
  return {std::string(text), {}};
}

size_t streamable_content(ToolCallFormat format, std::string_view text) {
  if (format == ToolCallFormat::kLlama3Json) {
    // A call is the whole reply: hold it while it may still be one.
    const std::string_view start = trim(text);
    const bool may_be_call = start.empty() || start.starts_with('{') || start.starts_with('[') ||
                             start.starts_with(kLlamaPythonTag) || kLlamaPythonTag.starts_with(start);
    return may_be_call ? 0 : text.size();
  }
  const std::string_view marker = format == ToolCallFormat::kHermes ? kHermesOpen : kMistralMarker;
  const size_t at = text.find(marker);
  if (at != std::string_view::npos) return at;
  return text.size() - marker_prefix_tail(text, marker);
}

json tool_calls_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& call : calls) {
    out.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  return out;
}

}  // namespace onnx_genai::server
