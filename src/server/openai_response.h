// Response bodies of the OpenAI API: chat.completion / text_completion objects, their streamed
// chunks, usage and logprobs (chat's per-token objects with bytes; the legacy completions
// format with tokens, token_logprobs, top_logprobs and text_offset).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace onnx_genai::server {

// What one choice produced so far.
struct ChoiceState {
  std::string text;
  std::vector<SampledToken> logprobs;  // one per generated token, when asked for
  genai::FinishReason reason = genai::FinishReason::kNone;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  size_t text_offset = 0;  // completions' streamed text_offset: characters sent so far
  size_t content_sent = 0;  // chat with tools: bytes of `text` streamed as content so far
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};
// Each prompt counts once however many choices it has.
Usage total_usage(const GenerationJob& job, const std::vector<ChoiceState>& choices);

// "stop" (eos or a stop string), "length", "abort"; null while running.
nlohmann::json finish_reason_json(genai::FinishReason reason);

class ResponseBuilder {
 public:
  ResponseBuilder(const GenerationJob& job, std::string model_name, const Tokenizer* tokenizer);
  const std::string& id() const { return id_; }

  // The whole response of a finished request.
  nlohmann::json response(const std::vector<ChoiceState>& choices) const;
  // A streamed chunk: `text` and `logprobs` new for `choice` (chat's first chunk of a choice
  // carries the role), its finish reason once it finished.
  nlohmann::json chunk(size_t choice, const std::string& text, std::span<const SampledToken> logprobs,
                       genai::FinishReason reason, bool first, ChoiceState& state) const;
  // The last chunk with stream_options.include_usage: no choices, the usage.
  nlohmann::json usage_chunk(const std::vector<ChoiceState>& choices) const;

 private:
  nlohmann::json envelope(const char* object) const;
  nlohmann::json chat_logprobs(std::span<const SampledToken> logprobs) const;
  nlohmann::json completion_logprobs(std::span<const SampledToken> logprobs, size_t& text_offset) const;
  std::string token_text(int32_t token) const;
  // A finished choice's reply split into content and tool calls; nullopt when the request has no
  // tools or the text holds no call.
  std::optional<ParsedReply> tool_reply(const ChoiceState& state) const;
  // Chat with tools, streamed: the content that may be sent now, and the calls once finished.
  std::string streamed_content(ChoiceState& state, bool finished, std::vector<ToolCall>& calls) const;

  const GenerationJob& job_;
  std::string model_name_;
  const Tokenizer* tokenizer_;
  std::string id_;
  int64_t created_;
};

}  // namespace onnx_genai::server
