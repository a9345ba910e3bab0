// Internals of genai::Generator (include/onnx_genai/genai.h): one sequence's state, and the
// processor that keeps eos out of reach until min_new_tokens have been generated.
//
// A sequence is a list of slots: left padding (kPadSlot, concatenated caches only), the prompt,
// the generated tokens and, once it has finished while others still run, filler pad tokens
// that keep the batch in lockstep. `cached` slots are in the KV cache; the rest (normally just
// the last sampled token) are fed by the next step.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "genai/constraint_processor.h"
#include "genai/text_stream.h"
#include "onnx_genai/genai.h"
#include "onnx_genai/sampling.h"

namespace onnx_genai::genai {

struct Sequence {
  std::vector<int32_t> slots;
  int64_t lead_pads = 0;
  int64_t cached = 0;      // slots already in the KV cache
  int64_t prompt_end = 0;  // slots before this index are prompt
  int64_t end = -1;        // slot count when the sequence finished; -1 while it runs
  FinishReason reason = FinishReason::kNone;
  std::optional<Sampler> sampler;
  TokenMasker* masker = nullptr;   // its constraint's, in the sampler's chain (structured output)
  std::optional<TextStream> text;  // when the model has a tokenizer
  std::string new_text;            // released by the last step
  std::vector<SampledToken> logprobs;
  double beam_score = 0;           // a returned beam search hypothesis' score

  bool finished() const { return end >= 0; }
  int64_t size() const { return static_cast<int64_t>(slots.size()); }
  int64_t generated() const { return (finished() ? end : size()) - prompt_end; }
  int64_t token_count() const { return (finished() ? end : size()) - lead_pads; }
  std::span<const int32_t> tokens() const {
    return std::span<const int32_t>(slots).subspan(static_cast<size_t>(lead_pads), static_cast<size_t>(token_count()));
  }
  TokenHistory history() const { return TokenHistory{tokens(), static_cast<size_t>(prompt_end - lead_pads)}; }
};

// Bans `eos_ids` while fewer than `min_new_tokens` tokens follow the prompt (transformers'
// MinNewTokensLengthLogitsProcessor).
class MinNewTokensProcessor final : public LogitProcessor {
 public:
  MinNewTokensProcessor(int64_t min_new_tokens, std::vector<int32_t> eos_ids)
      : min_new_tokens_(min_new_tokens), eos_ids_(std::move(eos_ids)) {}
  std::string_view name() const override { return "min_new_tokens"; }
  Status apply(const TokenHistory& history, Candidates& candidates) override;

 private:
  int64_t min_new_tokens_;
  std::vector<int32_t> eos_ids_;
};

// The chain `params` asks for, with MinNewTokensProcessor placed before the distribution-shaping
// steps (where transformers puts it) when min_new_tokens > 0.
Result<LogitProcessorChain> make_generation_chain(const SamplingParams& params, int64_t min_new_tokens,
                                                  const std::vector<int32_t>& eos_ids);

}  // namespace onnx_genai::genai
