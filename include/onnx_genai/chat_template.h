// Chat templates: the Jinja subset that model chat templates use, rendered byte-for-byte as
// Hugging Face's @huggingface/jinja (what transformers.js uses) renders them.
//
//   auto templates = ChatTemplates::load("path/to/model");          // tokenizer_config.json
//   ChatRequest request;
//   request.messages_json = R"([{"role": "user", "content": "Hi"}])";
//   request.add_generation_prompt = true;
//   Result<std::string> prompt = templates->apply(request);
//
// Errors are Status values: syntax errors name the line and column, a template's
// raise_exception("...") fails with that message, runaway templates hit depth/step/size limits.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai {

// One parsed template. Cheap to copy (the syntax tree is shared and immutable).
class ChatTemplate {
 public:
  static Result<ChatTemplate> parse(std::string_view source);

  // Renders with the variables of `context_json`, a JSON object ({"messages": [...], ...}).
  Result<std::string> render(std::string_view context_json) const;

 private:
  struct Parsed;
  explicit ChatTemplate(std::shared_ptr<const Parsed> parsed) : parsed_(std::move(parsed)) {}
  std::shared_ptr<const Parsed> parsed_;
  friend class ChatTemplates;
};

// What apply_chat_template receives (JSON as text, so this header needs no JSON library).
struct ChatRequest {
  std::string messages_json = "[]";  // [{"role": ..., "content": string or [{"type": "text", ...}]}, ...]
  std::string tools_json;            // JSON array of tool schemas; empty means no tools (None)
  bool add_generation_prompt = false;
  std::string extra_context_json;    // JSON object of further variables ({"enable_thinking": false}); may be empty
  std::string template_name;         // a named template ("tool_use", ...); empty picks as Hugging Face does
};

// A model's chat template(s) and the special tokens passed to them.
class ChatTemplates {
 public:
  // `dir`/tokenizer_config.json, with `dir`/chat_template.jinja taking precedence when present.
  static Result<ChatTemplates> load(const std::string& dir);
  // tokenizer_config.json text: chat_template is a string or a list of {name, template}.
  static Result<ChatTemplates> from_tokenizer_config(std::string_view config_json);
  // A single template with the given special tokens ({"bos_token", "<s>"}, ...).
  static Result<ChatTemplates> from_source(std::string_view source,
                                           std::vector<std::pair<std::string, std::string>> special_tokens);

  // Renders like transformers' apply_chat_template(tokenize=False): context = messages,
  // add_generation_prompt, tools (or None), documents (None), the special tokens, then the extras.
  // With several templates: the requested name, else "tool_use" when tools are given, else "default".
  Result<std::string> apply(const ChatRequest& request) const;

  const std::vector<std::pair<std::string, std::string>>& special_tokens() const { return special_tokens_; }

 private:
  Result<const ChatTemplate*> pick(const ChatRequest& request) const;

  std::vector<std::pair<std::string, ChatTemplate>> named_;  // a single template is named "default"
  bool single_ = true;
  std::vector<std::pair<std::string, std::string>> special_tokens_;
};

}  // namespace onnx_genai
