// Structured output in generation: GeneratorParams::constraint compiled once per Generator (and
// RequestParams::constraint once per engine request)
// against the model's vocabulary, and a logit processor per sequence that keeps only the tokens
// the sequence's matcher allows (include/onnx_genai/constraints.h).
//
// The processor is a LogitProcessor like any other, so the sampling library knows nothing of
// grammars, and a chain holding it never takes the device's argmax or SampleTokens path (those
// take chains of plain temperature / top-k / top-p / min-p only): a masked row is sampled on
// the host. It runs first in the chain, so penalties and top-k/top-p see only allowed tokens.
#pragma once

#include <memory>
#include <optional>

#include "genai/model_parts.h"
#include "onnx_genai/constraints.h"
#include "onnx_genai/genai.h"
#include "onnx_genai/sampling.h"

namespace onnx_genai::genai {

// Null when `spec` is empty. Fails on a constraint the engine refuses, one that matches nothing,
// or a model without a tokenizer.
Result<std::shared_ptr<CompiledConstraint>> compile_constraint(const ModelParts& model,
                                                               const std::optional<ConstraintSpec>& spec);

// Puts a processor masking what `constraint` forbids at the front of `chain`, and takes out the
// no_repeat_ngram ban, which a grammar's forced repeats would run into.
void add_constraint_processor(std::shared_ptr<CompiledConstraint> constraint, LogitProcessorChain& chain);

}  // namespace onnx_genai::genai
