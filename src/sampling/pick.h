// The Sampler's last steps on a processed row, shared with the SampleTokens op's CPU kernel
// (src/ops/cpu/sampling.cc), which runs the same chain and pick with a uniform it is given: the
// checks on a model row, and the pick itself (the argmax when greedy, else the inverse-CDF draw).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/function_ref.h"
#include "onnx_genai/sampling.h"

namespace onnx_genai::sampling {

// A model row must be finite or -inf (NaN and +inf have no softmax); the error names the first
// offending token.
Status check_logits(std::span<const float> logits);

// The pick's error when every token has been filtered out.
Status nothing_left();

// The token the Sampler picks from what the chain left: the lowest id of the highest logit when
// `greedy`, else a draw in ascending id order with each candidate weighted by its fixed-point
// exp(logit - max) (softmax.h), at the uniform in [0, 1) that `next_uniform` returns; it is called
// only when something is left to draw from, as the Sampler's generator is. `weights` is scratch.
Result<int32_t> pick_token(const Candidates& candidates, bool greedy, FunctionRef<double()> next_uniform,
                           std::vector<float>& weights);

// Sampler::sample_given_draft's pick: greedy, pick_token's; else one uniform decides whether
// `draft` is kept (with probability p, or min(1, p / q) given `draft_probabilities` q), and
// otherwise a second draws from the residual in ascending id order, as pick_token draws.
Result<int32_t> pick_given_draft(const Candidates& candidates, bool greedy, int32_t draft,
                                 std::span<const float> draft_probabilities, FunctionRef<double()> next_uniform,
                                 std::vector<float>& weights);

}  // namespace onnx_genai::sampling
