// The greedy token computed in the decoder graph (runtime/generation_passes.h adds the
// onnx_genai.greedy_tokens output to a device session's graph), on the generator's side: when a
// sequence's token is that plain argmax, and reading it.
//
// ArgMax gives equal logits' first index, and the host sampler's greedy pick gives the lowest id
// among equal logits: the same token for every row the host sampler accepts (finite or -inf
// logits). They differ only where the host sampler fails the step: a NaN or +inf logit, or a row
// of nothing but -inf; ArgMax skips NaN and answers such rows anyway.
//
// When every sequence's next token is that plain argmax (takes_plain_argmax), the DecoderRunner
// gives the session the logits output on the device, where run_into keeps it, so the plan never
// copies logits to the host; the generator takes the token ids instead of sampling.
#pragma once

#include <cstdint>

#include "onnx_genai/sampling.h"
#include "onnx_genai/status.h"
#include "runtime/generation_passes.h"

namespace onnx_genai::genai {

// Whether a sequence sampled with `params` through `chain` (its whole processor chain) picks the
// argmax of the raw logits row: greedy, no processor, no logprobs.
bool takes_plain_argmax(const SamplingParams& params, const LogitProcessorChain& chain);

// The token at [row, position] of the greedy_tokens output (int64 [rows, positions] on the host),
// or an error when it lies outside [0, vocab).
Result<int32_t> greedy_token(const Tensor& tokens, int64_t row, int64_t position, int64_t vocab);

}  // namespace onnx_genai::genai
