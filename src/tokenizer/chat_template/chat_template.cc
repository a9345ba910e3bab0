// Public API: parse and render templates, and pick a model's template as Hugging Face does.
#include "onnx_genai/chat_template.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_reader.h"
#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/lexer.h"
#include "tokenizer/chat_template/parser.h"

namespace onnx_genai {

using chat_template::Kind;
using chat_template::Value;
using Json = nlohmann::ordered_json;

struct ChatTemplate::Parsed {
  std::string source;
  chat_template::NodePtr program;
};

namespace {

constexpr int kMaxJsonDepth = 256;
// transformers.js SPECIAL_TOKEN_ATTRIBUTES.
constexpr const char* kSpecialTokenAttributes[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                   "pad_token", "cls_token", "mask_token"};

// A canonical array index ("0", "17"): JavaScript objects list such keys first, ascending.
bool is_array_index(const std::string& key) {
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return false;
  if (!std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  return std::stoull(key) < 4294967295ull;
}

// convertToRuntimeValues on the object JSON.parse would build: integral numbers are integers,
// and object keys follow JavaScript property order.
Result<Value> to_value(const Json& json, int depth = 0) {
  if (depth > kMaxJsonDepth) return OG_ERROR("chat template context: JSON nests deeper than ", kMaxJsonDepth, " levels");
  switch (json.type()) {
    case Json::value_t::null: return Value::null();
    case Json::value_t::boolean: return Value::boolean(json.get<bool>());
    case Json::value_t::number_integer: return Value::integer(static_cast<double>(json.get<int64_t>()));
    case Json::value_t::number_unsigned: return Value::integer(static_cast<double>(json.get<uint64_t>()));
    case Json::value_t::number_float: {
      const double x = json.get<double>();
      return std::isfinite(x) && std::floor(x) == x ? Value::integer(x) : Value::floating(x);
    }
    case Json::value_t::string: return Value::string(json.get<std::string>());
    case Json::value_t::array: {
      chat_template::Array items;
      for (const Json& item : json) {
        OG_ASSIGN_OR_RETURN(Value value, to_value(item, depth + 1));
        items.push_back(std::move(value));
      }
      return Value::array(std::move(items));
    }
    case Json::value_t::object: {
      std::vector<std::pair<std::string, const Json*>> entries;
      for (auto it = json.begin(); it != json.end(); ++it) entries.emplace_back(it.key(), &it.value());
      std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
        const bool ia = is_array_index(a.first), ib = is_array_index(b.first);
        if (ia != ib) return ia;
        return ia && std::stoull(a.first) < std::stoull(b.first);
      });
      chat_template::Object object;
      for (const auto& [key, value_json] : entries) {
        OG_ASSIGN_OR_RETURN(Value value, to_value(*value_json, depth + 1));
        object.set(key, std::move(value));
      }
      return Value::object(std::move(object));
    }
    default: return OG_ERROR("chat template context: unsupported JSON value");
  }
}

Result<Json> parse_json(std::string_view text, const char* what) {
  Json json = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return OG_ERROR(what, ": invalid JSON");
  return json;
}

Result<std::string> render_parsed(const std::string& source, const chat_template::Node& program, const Json& context) {
  if (!context.is_object()) return OG_ERROR("chat template context must be a JSON object");
  auto global = std::make_shared<chat_template::Env>();
  chat_template::install_globals(*global);
  for (auto it = context.begin(); it != context.end(); ++it) {
    // Template.render declares each variable once; redefining a global is an error there too.
    if (global->variables.count(it.key())) return OG_ERROR("chat template context: Variable already declared: ", it.key());
    OG_ASSIGN_OR_RETURN(Value value, to_value(it.value()));
    global->set(it.key(), std::move(value));
  }
  chat_template::Interpreter interpreter(source, chat_template::Limits{});
  return interpreter.run(program, global);
}

// exists() without the exception: an unreadable folder reads as absent, and the read that follows
// (if any) names the path.
bool file_exists(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::exists(path, error);
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  auto parsed = std::make_shared<Parsed>();
  parsed->source.assign(source);
  OG_ASSIGN_OR_RETURN(std::vector<chat_template::Token> tokens, chat_template::tokenize(parsed->source));
  OG_ASSIGN_OR_RETURN(parsed->program, chat_template::parse(tokens, parsed->source));
  return ChatTemplate(std::move(parsed));
}

Result<std::string> ChatTemplate::render(std::string_view context_json) const {
  OG_ASSIGN_OR_RETURN(Json context, parse_json(context_json, "chat template context"));
  return render_parsed(parsed_->source, *parsed_->program, context);
}

Result<ChatTemplates> ChatTemplates::from_source(std::string_view source,
                                                 std::vector<std::pair<std::string, std::string>> special_tokens) {
  OG_ASSIGN_OR_RETURN(ChatTemplate parsed, ChatTemplate::parse(source));
  ChatTemplates templates;
  templates.named_.emplace_back("default", std::move(parsed));
  templates.special_tokens_ = std::move(special_tokens);
  return templates;
}

Result<ChatTemplates> ChatTemplates::from_tokenizer_config(std::string_view config_json) {
  OG_ASSIGN_OR_RETURN(Json config, parse_json(config_json, "tokenizer_config.json"));
  if (!config.is_object()) return OG_ERROR("tokenizer_config.json: expected a JSON object");
  std::vector<std::pair<std::string, std::string>> special_tokens;
  for (const char* key : kSpecialTokenAttributes) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_string() && !it->get<std::string>().empty()) special_tokens.emplace_back(key, it->get<std::string>());
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      special_tokens.emplace_back(key, (*it)["content"].get<std::string>());
    }
  }
  auto chat = config.find("chat_template");
  if (chat == config.end() || chat->is_null()) return OG_ERROR("tokenizer_config.json: no chat_template");
  if (chat->is_string()) {
    OG_ASSIGN_OR_RETURN(ChatTemplates templates, from_source(chat->get<std::string>(), std::move(special_tokens)));
    return templates;
  }
  if (!chat->is_array()) return OG_ERROR("tokenizer_config.json: chat_template must be a string or a list");
  ChatTemplates templates;
  templates.single_ = false;
  templates.special_tokens_ = std::move(special_tokens);
  for (const Json& entry : *chat) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
        !entry["template"].is_string()) {
      return OG_ERROR("tokenizer_config.json: chat_template entries must be {\"name\": string, \"template\": string}");
    }
    const std::string name = entry["name"].get<std::string>();
    Result<ChatTemplate> parsed = ChatTemplate::parse(entry["template"].get<std::string>());
    if (!parsed.is_ok()) return parsed.status().with_context("chat_template \"" + name + "\"");
    templates.named_.emplace_back(name, std::move(parsed).value());
  }
  return templates;
}

Result<ChatTemplates> ChatTemplates::load(const std::string& dir) {
  const std::filesystem::path root(dir);
  const std::filesystem::path config_path = root / "tokenizer_config.json";
  const std::filesystem::path jinja_path = root / "chat_template.jinja";
  std::vector<std::pair<std::string, std::string>> special_tokens;
  Result<ChatTemplates> from_config = OG_ERROR(dir, ": no tokenizer_config.json chat_template or chat_template.jinja");
  if (file_exists(config_path)) {
    OG_ASSIGN_OR_RETURN(std::string config, read_file(config_path.string()));
    from_config = from_tokenizer_config(config);
    if (!from_config.is_ok() && !file_exists(jinja_path)) {
      return from_config.status().with_context(config_path.string());
    }
    if (from_config.is_ok()) special_tokens = from_config->special_tokens_;
  }
  if (!file_exists(jinja_path)) return from_config;
  OG_ASSIGN_OR_RETURN(std::string source, read_file(jinja_path.string()));
  Result<ChatTemplates> from_jinja = from_source(source, std::move(special_tokens));
  if (!from_jinja.is_ok()) return from_jinja.status().with_context(jinja_path.string());
  return from_jinja;
}

Result<const ChatTemplate*> ChatTemplates::pick(const ChatRequest& request) const {
  const auto find = [&](std::string_view name) -> const ChatTemplate* {
    for (const auto& [template_name, parsed] : named_) {
      if (template_name == name) return &parsed;
    }
    return nullptr;
  };
  if (single_) return &named_.front().second;
  if (!request.template_name.empty()) {
    if (const ChatTemplate* named = find(request.template_name)) return named;
    return OG_ERROR("no chat template named \"", request.template_name, "\"");
  }
  if (!request.tools_json.empty()) {
    if (const ChatTemplate* tool_use = find("tool_use")) return tool_use;
  }
  if (const ChatTemplate* fallback = find("default")) return fallback;
  return OG_ERROR("This model has multiple chat templates with no default specified");
}

Result<std::string> ChatTemplates::apply(const ChatRequest& request) const {
  OG_ASSIGN_OR_RETURN(const ChatTemplate* chosen, pick(request));
  Json context = Json::object();
  OG_ASSIGN_OR_RETURN(context["messages"], parse_json(request.messages_json, "chat messages"));
  context["add_generation_prompt"] = request.add_generation_prompt;
  context["tools"] = nullptr;
  if (!request.tools_json.empty()) {
    OG_ASSIGN_OR_RETURN(context["tools"], parse_json(request.tools_json, "chat tools"));
  }
  context["documents"] = nullptr;
  for (const auto& [key, token] : special_tokens_) context[key] = token;
  if (!request.extra_context_json.empty()) {
    OG_ASSIGN_OR_RETURN(Json extra, parse_json(request.extra_context_json, "chat template extra context"));
    if (!extra.is_object()) return OG_ERROR("chat template extra context must be a JSON object");
    for (auto it = extra.begin(); it != extra.end(); ++it) context[it.key()] = it.value();
  }
  return render_parsed(chosen->parsed_->source, *chosen->parsed_->program, context);
}

}  // namespace onnx_genai
