// Request bodies of OpenAI's /v1/chat/completions and /v1/completions, checked field by field
// and turned into what the engine runs. Every malformed field is an ApiError naming it; nothing
// here throws.
//
// Fields follow OpenAI's API reference; vLLM's extensions top_k, min_p, repetition_penalty,
// min_tokens, ignore_eos, skip_special_tokens and chat_template_kwargs are accepted too, and
// no_repeat_ngram_size. Fields neither knows are ignored, as vLLM ignores them. A field
// that is null counts as absent. Sampling fields left out take the package's defaults
// (generation_config.json / genai_config.json), as vLLM does, except the n-gram ban.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "onnx_genai/engine.h"
#include "server/tool_calls.h"

namespace onnx_genai::server {

// OpenAI's error object with its HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // the request field at fault; empty when none
  std::string code;   // e.g. "model_not_found"; empty when none
};

// `object`[key] when `object` is an object holding a non-null `key`; else null (a field that is
// null counts as absent).
const nlohmann::json* member(const nlohmann::json& object, const char* key);

// {"error": {"message", "type", "param", "code"}}; type from the status as OpenAI names them.
nlohmann::json error_body(const ApiError& error);

// One request, ready for the engine. A completion may carry several prompts; each prompt gets n
// choices, numbered prompt * n + j, and choice k samples with seed + k when a seed is given.
struct GenerationJob {
  bool chat = true;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt's text starts each choice's text
  int64_t n = 1;
  // -1: no logprobs; else logprobs with this many alternatives per token (chat: top_logprobs,
  // completions: the integer logprobs).
  int32_t logprobs = -1;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> prompt_texts;  // completions: each prompt as text, for echo
  genai::RequestParams params;
  ToolsRequest tools;  // chat: tools, tool_choice, and the forced call's prefix

  size_t choices() const { return prompts.size() * static_cast<size_t>(n); }
  // The parameters of choice `index` (its own seed).
  genai::RequestParams choice_params(size_t index) const;
};

// A prompt longer than the model's context, or one that leaves no room for max_tokens, is a 400
// naming both numbers.
using JobResult = std::variant<GenerationJob, ApiError>;
JobResult parse_chat_request(const nlohmann::json& body, const genai::Model& model);
JobResult parse_completion_request(const nlohmann::json& body, const genai::Model& model);

}  // namespace onnx_genai::server
