#include "server/openai_request.h"

#include <cmath>
#include <limits>
#include <utility>

#include "onnx_genai/tokenizer.h"

namespace onnx_genai::server {

using nlohmann::json;

namespace {

constexpr int64_t kMaxChoices = 128;
constexpr size_t kMaxStopStrings = 16;
constexpr int32_t kMaxTopLogprobs = 20;

std::string brief(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

// Reads the body's fields, keeping the first error. A missing or null field leaves the target as
// it was.
class FieldReader {
 public:
  explicit FieldReader(const json& body) : body_(body) {}

  const json* get(const char* name) const { return member(body_, name); }
  void fail(const std::string& param, const std::string& message) {
    if (!error) error = ApiError{400, param + ": " + message, param, ""};
  }
  void number(const char* name, double lo, double hi, bool open_lo, float& out) {
    const json* v = get(name);
    if (!v) return;
    const bool in_range = v->is_number() && std::isfinite(v->get<double>()) &&
                          (open_lo ? v->get<double>() > lo : v->get<double>() >= lo) && v->get<double>() <= hi;
    if (!in_range) {
      return fail(name, std::string("expected a number in ") + (open_lo ? "(" : "[") + json(lo).dump() + ", " +
                            json(hi).dump() + "], got " + brief(*v));
    }
    out = static_cast<float>(v->get<double>());
  }
  template <typename Int>
  void integer(const char* name, int64_t lo, int64_t hi, Int& out) {
    const json* v = get(name);
    if (!v) return;
    if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) ||
        v->get<int64_t>() < lo || v->get<int64_t>() > hi) {
      return fail(name, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + brief(*v));
    }
    out = static_cast<Int>(v->get<int64_t>());
  }
  void boolean(const char* name, bool& out) {
    const json* v = get(name);
    if (!v) return;
    if (!v->is_boolean()) return fail(name, "expected true or false, got " + brief(*v));
    out = v->get<bool>();
  }

  std::optional<ApiError> error;

 private:
  const json& body_;
};

// Fields both endpoints share: sampling, limits, stop strings, streaming.
void read_common(FieldReader& f, const genai::Model& model, GenerationJob& job) {
  const genai::GeneratorParams defaults = model.default_params();
  genai::RequestParams& p = job.params;
  p.sampling = defaults.sampling;
  p.sampling.greedy = false;  // a package's do_sample=false is a default; temperature says the rest
  p.sampling.logit_bias.clear();
  // The API has no field for an n-gram ban, so a package's default would be one a client can
  // neither see nor turn off: it applies only when asked for (an extension field).
  p.sampling.no_repeat_ngram_size = 0;
  if (defaults.sampling.greedy) p.sampling.temperature = 0;
  f.number("temperature", 0, 2, false, p.sampling.temperature);
  f.number("top_p", 0, 1, true, p.sampling.top_p);
  f.number("min_p", 0, 1, false, p.sampling.min_p);
  f.number("presence_penalty", -2, 2, false, p.sampling.presence_penalty);
  f.number("frequency_penalty", -2, 2, false, p.sampling.frequency_penalty);
  f.number("repetition_penalty", 0, 10, true, p.sampling.repetition_penalty);
  f.integer("no_repeat_ngram_size", 0, 1 << 20, p.sampling.no_repeat_ngram_size);
  int32_t top_k = p.sampling.top_k;
  f.integer("top_k", -1, std::numeric_limits<int32_t>::max(), top_k);
  p.sampling.top_k = top_k < 0 ? 0 : top_k;  // vLLM's -1 = every token
  if (const json* seed = f.get("seed")) {
    if (!seed->is_number_integer()) {
      f.fail("seed", "expected an integer, got " + brief(*seed));
    } else {
      p.sampling.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
    }
  }
  if (const json* bias = f.get("logit_bias")) {
    if (!bias->is_object()) f.fail("logit_bias", "expected an object of token id -> bias, got " + brief(*bias));
    for (auto it = bias->begin(); bias->is_object() && it != bias->end(); ++it) {
      int64_t id = -1;
      const std::string& key = it.key();
      const bool numeric = !key.empty() && key.size() < 12 && key.find_first_not_of("0123456789") == std::string::npos;
      if (numeric) id = std::stoll(key);
      if (id < 0 || id >= model.info().vocab_size) {
        f.fail("logit_bias", "key '" + key + "' is not a token id in [0, " + std::to_string(model.info().vocab_size) + ")");
        break;
      }
      if (!it->is_number() || !(it->get<double>() >= -100 && it->get<double>() <= 100)) {
        f.fail("logit_bias", "the bias of token " + key + " must be a number in [-100, 100], got " + brief(*it));
        break;
      }
      p.sampling.logit_bias[static_cast<int32_t>(id)] = static_cast<float>(it->get<double>());
    }
  }
  constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  f.integer("max_tokens", 1, kMaxTokens, p.max_new_tokens);
  f.integer("max_completion_tokens", 1, kMaxTokens, p.max_new_tokens);
  f.integer("min_tokens", 0, kMaxTokens, p.min_new_tokens);
  f.integer("n", 1, kMaxChoices, job.n);
  f.boolean("ignore_eos", p.ignore_eos);
  f.boolean("skip_special_tokens", p.skip_special_tokens);
  if (const json* stop = f.get("stop")) {
    if (stop->is_string()) {
      p.stop_strings = {stop->get<std::string>()};
    } else if (stop->is_array() && stop->size() <= kMaxStopStrings) {
      for (const json& s : *stop) {
        if (!s.is_string()) return f.fail("stop", "expected strings, got " + brief(s));
        p.stop_strings.push_back(s.get<std::string>());
      }
    } else {
      return f.fail("stop", "expected a string or a list of at most " + std::to_string(kMaxStopStrings) +
                                " strings, got " + brief(*stop));
    }
    for (const std::string& s : p.stop_strings) {
      if (s.empty()) return f.fail("stop", "stop strings must not be empty");
    }
  }
  f.boolean("stream", job.stream);
  if (const json* options = f.get("stream_options")) {
    if (!job.stream) return f.fail("stream_options", "allowed only with stream: true");
    if (!options->is_object()) return f.fail("stream_options", "expected an object, got " + brief(*options));
    FieldReader inner(*options);
    inner.boolean("include_usage", job.include_usage);
    if (inner.error) f.error = ApiError{400, "stream_options." + inner.error->message, "stream_options", ""};
  }
  if (const json* user = f.get("user"); user && !user->is_string()) f.fail("user", "expected a string, got " + brief(*user));
}

void request_logprobs(GenerationJob& job) {
  job.params.sampling.logprobs = job.logprobs >= 0;
  job.params.sampling.top_logprobs = job.logprobs > 0 ? job.logprobs : 0;
}

// OpenAI's context error, with both numbers.
std::optional<ApiError> check_fits(const genai::Model& model, size_t prompt_tokens, int64_t max_new_tokens) {
  const int64_t context = model.info().context_length;
  if (prompt_tokens == 0) return ApiError{400, "the prompt is empty (no tokens)", "prompt", ""};
  const auto requested = static_cast<int64_t>(prompt_tokens) + max_new_tokens;
  if (context <= 0 || (requested <= context && static_cast<int64_t>(prompt_tokens) < context)) return std::nullopt;
  return ApiError{400,
                  "This model's maximum context length is " + std::to_string(context) + " tokens. However, you requested " +
                      std::to_string(requested) + " tokens (" + std::to_string(prompt_tokens) + " in the prompt, " +
                      std::to_string(max_new_tokens) + " in the completion). Reduce the prompt or max_tokens.",
                  "messages", "context_length_exceeded"};
}

// A message's content as one string: a string, or the text parts of an array joined.
std::optional<std::string> message_text(const json& content, FieldReader& f, const std::string& where) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    f.fail(where, "content must be a string or an array of content parts, got " + brief(content));
    return std::nullopt;
  }
  std::string text;
  for (const json& part : content) {
    const json* type = member(part, "type");
    if (!type || !type->is_string()) {
      f.fail(where, "content parts must be objects with a type, got " + brief(part));
      return std::nullopt;
    }
    if (*type != "text") {
      f.fail(where, "content part type " + type->dump() + " is not supported (text only)");
      return std::nullopt;
    }
    const json* body = member(part, "text");
    if (!body || !body->is_string()) {
      f.fail(where, "a text part needs a string 'text'");
      return std::nullopt;
    }
    text += body->get<std::string>();
  }
  return text;
}

// Messages in the form chat templates read: roles checked, content parts joined into strings.
std::optional<json> template_messages(const json& messages, FieldReader& f) {
  if (!messages.is_array() || messages.empty()) {
    f.fail("messages", "expected a non-empty array of messages");
    return std::nullopt;
  }
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    const json* role = member(m, "role");
    if (!role || !role->is_string()) {
      f.fail(where, "expected an object with a string 'role'");
      return std::nullopt;
    }
    std::string name = role->get<std::string>();
    if (name == "developer") name = "system";  // OpenAI's newer name for the system role
    if (name != "system" && name != "user" && name != "assistant" && name != "tool") {
      f.fail(where + ".role", "unknown role '" + name + "' (system, developer, user, assistant or tool)");
      return std::nullopt;
    }
    const json* content = member(m, "content");
    if (!content && name != "assistant") {
      f.fail(where, "a " + name + " message needs 'content'");
      return std::nullopt;
    }
    std::optional<std::string> text = message_text(content ? *content : json(), f, where + ".content");
    if (!text) return std::nullopt;
    json entry = m;
    entry["role"] = name;
    entry["content"] = *text;
    if (const json* calls = member(m, "tool_calls")) entry["tool_calls"] = template_tool_calls(*calls);
    out.push_back(std::move(entry));
  }
  return out;
}

std::optional<ConstraintSpec> response_format(FieldReader& f) {
  const json* format = f.get("response_format");
  if (!format) return std::nullopt;
  const json* type = member(*format, "type");
  if (!type || !type->is_string()) {
    f.fail("response_format", "expected an object with a string 'type'");
    return std::nullopt;
  }
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") return ConstraintSpec{ConstraintKind::kJsonObject, ""};
  if (*type == "json_schema") {
    const json* spec = member(*format, "json_schema");
    const json* schema = spec ? member(*spec, "schema") : nullptr;
    if (!schema || !(schema->is_object() || schema->is_boolean())) {
      f.fail("response_format.json_schema", "expected {\"name\": ..., \"schema\": {...}}");
      return std::nullopt;
    }
    return ConstraintSpec{ConstraintKind::kJsonSchema, schema->dump()};
  }
  f.fail("response_format.type", "expected text, json_object or json_schema, got " + type->dump());
  return std::nullopt;
}

}  // namespace

const json* member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

nlohmann::json error_body(const ApiError& error) {
  const char* type = error.status == 401   ? "authentication_error"
                     : error.status == 404 ? "not_found_error"
                     : error.status == 413 ? "request_too_large"
                     : error.status == 429 ? "rate_limit_error"
                     : error.status >= 500 ? "server_error"
                                           : "invalid_request_error";
  return json{{"error",
               {{"message", error.message},
                {"type", type},
                {"param", error.param.empty() ? json() : json(error.param)},
                {"code", error.code.empty() ? json() : json(error.code)}}}};
}

genai::RequestParams GenerationJob::choice_params(size_t index) const {
  genai::RequestParams p = params;
  if (p.sampling.seed) p.sampling.seed = *p.sampling.seed + index;
  return p;
}

JobResult parse_chat_request(const json& body, const genai::Model& model) {
  if (!body.is_object()) return ApiError{400, "the request body must be a JSON object"};
  GenerationJob job;
  FieldReader f(body);
  read_common(f, model, job);
  bool logprobs = false;
  f.boolean("logprobs", logprobs);
  int32_t top = 0;
  f.integer("top_logprobs", 0, kMaxTopLogprobs, top);
  if (!logprobs && top > 0) f.fail("top_logprobs", "needs logprobs: true");
  job.logprobs = logprobs ? top : -1;
  request_logprobs(job);
  job.params.constraint = response_format(f);
  std::optional<ConstraintSpec> forced;
  if (f.error) return *f.error;
  if (auto error = read_tools(body, detect_tool_call_format(model.tokenizer()), job.tools, forced)) return *error;
  if (forced && job.params.constraint) {
    return ApiError{400, "response_format cannot be combined with a forced tool call (tool_choice required or a function)", "response_format", ""};
  }
  if (forced) job.params.constraint = std::move(forced);
  // Mistral's [TOOL_CALLS] and Llama's <|python_tag|> are special tokens: the parser must see them.
  if (job.tools.active() && job.tools.format != ToolCallFormat::kHermes) job.params.skip_special_tokens = false;
  const json* messages = f.get("messages");
  if (!messages) f.fail("messages", "required");
  std::optional<json> normalized = messages && !f.error ? template_messages(*messages, f) : std::nullopt;
  if (f.error) return *f.error;
  ChatRequest chat;
  chat.messages_json = normalized->dump();
  chat.add_generation_prompt = true;
  if (!job.tools.tools.empty()) chat.tools_json = job.tools.tools.dump();
  if (const json* kwargs = f.get("chat_template_kwargs")) {
    if (!kwargs->is_object()) return ApiError{400, "chat_template_kwargs: expected an object", "chat_template_kwargs", ""};
    chat.extra_context_json = kwargs->dump();
  }
  Result<std::vector<int32_t>> prompt = model.encode_chat(chat);
  if (!prompt) return ApiError{400, "chat template: " + prompt.status().message(), "messages", ""};
  if (!job.tools.forced_prefix.empty() && model.tokenizer()) {
    Result<std::vector<int32_t>> opening = model.tokenizer()->encode(job.tools.forced_prefix, {.add_special_tokens = false});
    if (!opening) return ApiError{400, "tool call: " + opening.status().message(), "tool_choice", ""};
    prompt->insert(prompt->end(), opening->begin(), opening->end());
  }
  if (auto error = check_fits(model, prompt->size(), job.params.max_new_tokens)) return *error;
  job.prompts.push_back(std::move(*prompt));
  return job;
}

JobResult parse_completion_request(const json& body, const genai::Model& model) {
  if (!body.is_object()) return ApiError{400, "the request body must be a JSON object"};
  GenerationJob job;
  job.chat = false;
  FieldReader f(body);
  read_common(f, model, job);
  f.integer("logprobs", 0, kMaxTopLogprobs, job.logprobs);
  request_logprobs(job);
  f.boolean("echo", job.echo);
  if (const json* suffix = f.get("suffix"); suffix && !(suffix->is_string() && suffix->get<std::string>().empty())) {
    f.fail("suffix", "suffix (insertion) is not supported");
  }
  int64_t best_of = job.n;
  f.integer("best_of", 1, kMaxChoices, best_of);
  if (best_of != job.n) f.fail("best_of", "only best_of equal to n is supported");
  if (job.echo && job.logprobs >= 0) f.fail("echo", "echo with logprobs (the prompt's logprobs) is not supported");
  const json* prompt = f.get("prompt");
  if (!prompt) f.fail("prompt", "required");
  if (f.error) return *f.error;
  // A string, a list of strings, a list of token ids, or a list of such lists.
  const auto vocab = model.info().vocab_size;
  const auto add_ids = [&](const json& ids) -> std::optional<ApiError> {
    std::vector<int32_t> tokens;
    for (const json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
        return ApiError{400, "prompt: token ids must be integers in [0, " + std::to_string(vocab) + "), got " + brief(id), "prompt", ""};
      }
      tokens.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    const Tokenizer* tokenizer = model.tokenizer();
    Result<std::string> text = tokenizer ? tokenizer->decode(tokens) : Result<std::string>(std::string());
    job.prompt_texts.push_back(text ? *text : std::string());
    job.prompts.push_back(std::move(tokens));
    return std::nullopt;
  };
  const auto add_text = [&](const std::string& text) -> std::optional<ApiError> {
    Result<std::vector<int32_t>> ids = model.encode(text);
    if (!ids) return ApiError{400, "prompt: " + ids.status().message(), "prompt", ""};
    job.prompt_texts.push_back(text);
    job.prompts.push_back(std::move(*ids));
    return std::nullopt;
  };
  std::optional<ApiError> error;
  if (prompt->is_string()) {
    error = add_text(prompt->get<std::string>());
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    error = add_ids(*prompt);
  } else if (prompt->is_array() && !prompt->empty()) {
    for (const json& item : *prompt) {
      if (item.is_string()) {
        error = add_text(item.get<std::string>());
      } else if (item.is_array()) {
        error = add_ids(item);
      } else {
        error = ApiError{400, "prompt: list items must be strings or token id lists, got " + brief(item), "prompt", ""};
      }
      if (error) break;
    }
  } else {
    error = ApiError{400, "prompt: expected a string, a list of strings, token ids or lists of token ids", "prompt", ""};
  }
  if (error) return *error;
  if (static_cast<int64_t>(job.choices()) > kMaxChoices) {
    return ApiError{400, "prompts times n is " + std::to_string(job.choices()) + ", more than " + std::to_string(kMaxChoices), "n", ""};
  }
  for (const std::vector<int32_t>& p : job.prompts) {
    if (auto fit = check_fits(model, p.size(), job.params.max_new_tokens)) {
      fit->param = "prompt";
      return *fit;
    }
  }
  return job;
}

}  // namespace onnx_genai::server
