// Structured output in generation: GeneratorParams::constraint compiled once per Generator (and
// RequestParams::constraint once per engine request)
// against the model's vocabulary, and a logit processor per sequence that keeps only the tokens
// the sequence's matcher allows (include/onnx_genai/constraints.h).
//
// The processor is a LogitProcessor like any other, so the sampling library knows nothing of
// grammars. It runs first in the chain, so penalties and top-k/top-p see only allowed tokens.
// Where the rest of the chain is what SampleTokens computes (device_sampling.h), a device may
// take the token instead: the processor hands over its mask (TokenMasker) and SampleTokens
// applies it where the logits are.
#pragma once

#include <memory>
#include <optional>
#include <span>

#include "genai/model_parts.h"
#include "onnx_genai/constraints.h"
#include "onnx_genai/genai.h"
#include "onnx_genai/sampling.h"

namespace onnx_genai::genai {

// Null when `spec` is empty. Fails on a constraint the engine refuses, one that matches nothing,
// or a model without a tokenizer.
Result<std::shared_ptr<CompiledConstraint>> compile_constraint(const ModelParts& model,
                                                               const std::optional<ConstraintSpec>& spec);

// The mask a constraint processor applies, for a caller that applies it elsewhere.
class TokenMasker {
 public:
  virtual ~TokenMasker() = default;
  // Catches the matcher up with the tokens generated in `history` (rolling back after a rewind)
  // and gives the allowed tokens as bit sets (bit t % 64 of word t / 64), valid until the next
  // call or apply().
  virtual Result<std::span<const uint64_t>> mask_for(const TokenHistory& history) = 0;
};

// Puts a processor masking what `constraint` forbids at the front of `chain`, and takes out the
// no_repeat_ngram ban, which a grammar's forced repeats would run into. Returns the processor's
// masker, owned by the chain.
TokenMasker* add_constraint_processor(std::shared_ptr<CompiledConstraint> constraint, LogitProcessorChain& chain);

}  // namespace onnx_genai::genai
