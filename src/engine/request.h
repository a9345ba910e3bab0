// One request inside the serving engine: what the scheduler tracks (ScheduledState), its
// sampler and text stream, and what its last step produced.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "genai/constraint_processor.h"
#include "genai/speculative.h"
#include "genai/text_stream.h"
#include "onnx_genai/engine.h"

namespace onnx_genai::engine {

struct Request : ScheduledState {
  genai::RequestParams params;
  int64_t prompt_length = 0;
  std::optional<Sampler> sampler;
  bool plain_argmax = false;     // its token is the raw logits' argmax (the device may pick it)
  bool device_sampling = false;  // SampleTokens draws its token exactly (genai/device_sampling.h)
  // Structured output: the constraint's mask, and whether SampleTokens given it picks the token.
  genai::TokenMasker* masker = nullptr;  // owned by the sampler's chain
  bool device_masked = false;
  std::optional<genai::TextStream> text;  // reads params.stop_strings: the request stays put in memory
  // Speculative decoding and fast-forward (params.speculative): who drafts, and how many tokens.
  std::unique_ptr<genai::Drafter> drafter;
  std::vector<float> draft_probabilities;  // a sampled draft's distributions (genai::Draft), while draft > 0
  genai::FinishReason reason = genai::FinishReason::kNone;
  const std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
  std::optional<double> queue_seconds;  // from arrival until its tokens were first scheduled
  bool queue_reported = false;          // queue_seconds went out with an output
  // Since the last step's report.
  std::vector<int32_t> new_tokens;
  std::string new_text;
  std::vector<SampledToken> logprobs;
  // Models without paged attention: the request's own contiguous cache.
  std::unique_ptr<genai::Generator> generator;

  bool finished() const { return reason != genai::FinishReason::kNone; }
  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_length; }
  TokenHistory history() const { return TokenHistory{tokens, static_cast<size_t>(prompt_length)}; }
};

}  // namespace onnx_genai::engine
