#include "server/openai_response.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "onnx_genai/tokenizer.h"
#include "tokenizer/unicode.h"

namespace onnx_genai::server {

using nlohmann::json;

namespace {

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char hex[25];
  std::snprintf(hex, sizeof hex, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return std::string(prefix) + hex;
}

json bytes_array(const std::string& bytes) {
  json out = json::array();
  for (const char c : bytes) out.push_back(static_cast<unsigned char>(c));
  return out;
}

// Characters (code points) in `bytes`, counting lead bytes: a character split across tokens is
// counted once, in the token holding its first byte.
size_t characters(const std::string& bytes) {
  size_t n = 0;
  for (const char c : bytes) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

}  // namespace

Usage total_usage(const GenerationJob& job, const std::vector<ChoiceState>& choices) {
  Usage usage;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i % static_cast<size_t>(job.n) == 0) usage.prompt_tokens += choices[i].prompt_tokens;
    usage.completion_tokens += choices[i].generated_tokens;
  }
  return usage;
}

json finish_reason_json(genai::FinishReason reason) {
  switch (reason) {
    case genai::FinishReason::kEos:
    case genai::FinishReason::kStopString: return "stop";
    case genai::FinishReason::kLength: return "length";
    case genai::FinishReason::kAborted: return "abort";
    case genai::FinishReason::kNone: break;
  }
  return nullptr;
}

ResponseBuilder::ResponseBuilder(const GenerationJob& job, std::string model_name, const Tokenizer* tokenizer)
    : job_(job),
      model_name_(std::move(model_name)),
      tokenizer_(tokenizer),
      id_(random_id(job.chat ? "chatcmpl-" : "cmpl-")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()) {}

json ResponseBuilder::envelope(const char* object) const {
  return json{{"id", id_}, {"object", object}, {"created", created_}, {"model", model_name_}, {"system_fingerprint", nullptr}};
}

// A token's text as OpenAI shows it; bytes that are not whole UTF-8 characters as vLLM shows
// them ("bytes:\xe2\x80").
std::string ResponseBuilder::token_text(int32_t token) const {
  const std::string bytes = tokenizer_ ? tokenizer_->token_bytes(token) : std::string();
  if (!unicode::find_invalid_utf8(bytes)) return bytes;
  std::string out = "bytes:";
  for (const char c : bytes) {
    char hex[5];
    std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
    out += hex;
  }
  return out;
}

json ResponseBuilder::chat_logprobs(std::span<const SampledToken> logprobs) const {
  json content = json::array();
  for (const SampledToken& t : logprobs) {
    json top = json::array();
    for (const TokenLogprob& alt : t.top_logprobs) {
      top.push_back({{"token", token_text(alt.token)},
                     {"logprob", alt.logprob},
                     {"bytes", bytes_array(tokenizer_ ? tokenizer_->token_bytes(alt.token) : "")}});
    }
    content.push_back({{"token", token_text(t.token)},
                       {"logprob", t.logprob.value_or(0.0f)},
                       {"bytes", bytes_array(tokenizer_ ? tokenizer_->token_bytes(t.token) : "")},
                       {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}, {"refusal", nullptr}};
}

json ResponseBuilder::completion_logprobs(std::span<const SampledToken> logprobs, size_t& text_offset) const {
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  for (const SampledToken& t : logprobs) {
    tokens.push_back(token_text(t.token));
    values.push_back(t.logprob.value_or(0.0f));
    json top = json::object();
    for (const TokenLogprob& alt : t.top_logprobs) top[token_text(alt.token)] = alt.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += characters(tokenizer_ ? tokenizer_->token_bytes(t.token) : "");
  }
  return json{{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

std::optional<ParsedReply> ResponseBuilder::tool_reply(const ChoiceState& state) const {
  if (!job_.chat || !job_.tools.active() || state.reason == genai::FinishReason::kNone) return std::nullopt;
  ParsedReply reply = parse_tool_calls(job_.tools.format, job_.tools.forced_prefix + state.text);
  if (reply.calls.empty()) return std::nullopt;
  if (!job_.tools.parallel) reply.calls.resize(1);
  return reply;
}

std::string ResponseBuilder::streamed_content(ChoiceState& state, bool finished, std::vector<ToolCall>& calls) const {
  size_t until = state.text.size();
  if (!finished) {
    until = job_.tools.forced() ? 0 : streamable_content(job_.tools.format, state.text);
  } else if (std::optional<ParsedReply> reply = tool_reply(state)) {
    // Content around the calls: what follows the part already sent, when that part leads it.
    const std::string& content = reply->content;
    const size_t sent = state.content_sent;
    const bool continues = content.size() >= sent && content.compare(0, sent, state.text, 0, sent) == 0;
    calls = std::move(reply->calls);
    state.content_sent = state.text.size();
    return continues ? content.substr(sent) : "";
  }
  if (until <= state.content_sent) return "";
  std::string piece = state.text.substr(state.content_sent, until - state.content_sent);
  state.content_sent = until;
  return piece;
}

json ResponseBuilder::response(const std::vector<ChoiceState>& choices) const {
  json out = envelope(job_.chat ? "chat.completion" : "text_completion");
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceState& c = choices[i];
    json choice{{"index", i}, {"finish_reason", finish_reason_json(c.reason)}};
    json logprobs;
    if (job_.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}};
      if (std::optional<ParsedReply> reply = tool_reply(c)) {
        choice["message"]["content"] = reply->content.empty() ? json() : json(reply->content);
        choice["message"]["tool_calls"] = tool_calls_json(reply->calls);
        choice["finish_reason"] = "tool_calls";
      }
      if (job_.logprobs >= 0) logprobs = chat_logprobs(c.logprobs);
    } else {
      const std::string& prompt = job_.prompt_texts[i / static_cast<size_t>(job_.n)];
      choice["text"] = job_.echo ? prompt + c.text : c.text;
      size_t offset = 0;
      if (job_.logprobs >= 0) logprobs = completion_logprobs(c.logprobs, offset);
    }
    choice["logprobs"] = std::move(logprobs);
    list.push_back(std::move(choice));
  }
  out["choices"] = std::move(list);
  out["usage"] = usage_json(total_usage(job_, choices));
  return out;
}

json ResponseBuilder::chunk(size_t choice, const std::string& text, std::span<const SampledToken> logprobs,
                            genai::FinishReason reason, bool first, ChoiceState& state) const {
  json out = envelope(job_.chat ? "chat.completion.chunk" : "text_completion");
  json entry{{"index", choice}, {"finish_reason", finish_reason_json(reason)}};
  json lp;
  if (job_.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    std::vector<ToolCall> calls;
    const std::string content = job_.tools.active() && !first ? streamed_content(state, reason != genai::FinishReason::kNone, calls) : text;
    if (!content.empty() || first) delta["content"] = content;
    if (!calls.empty()) {
      json deltas = tool_calls_json(calls);
      for (size_t k = 0; k < deltas.size(); ++k) deltas[k]["index"] = k;
      delta["tool_calls"] = std::move(deltas);
      entry["finish_reason"] = "tool_calls";
    }
    entry["delta"] = std::move(delta);
    if (job_.logprobs >= 0 && !logprobs.empty()) lp = chat_logprobs(logprobs);
  } else {
    std::string piece = text;
    if (first && job_.echo) piece = job_.prompt_texts[choice / static_cast<size_t>(job_.n)] + piece;
    entry["text"] = piece;
    if (job_.logprobs >= 0 && !logprobs.empty()) lp = completion_logprobs(logprobs, state.text_offset);
  }
  entry["logprobs"] = std::move(lp);
  out["choices"] = json::array({std::move(entry)});
  if (job_.include_usage) out["usage"] = nullptr;
  return out;
}

json ResponseBuilder::usage_chunk(const std::vector<ChoiceState>& choices) const {
  json out = envelope(job_.chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage_json(total_usage(job_, choices));
  return out;
}

}  // namespace onnx_genai::server
