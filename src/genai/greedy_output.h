// The greedy token computed in the decoder graph, so that a greedy step on a GPU brings B token
// ids to the host instead of B rows of logits (152k floats per row for Qwen).
//
// At load, the graph of a session on a device (never a CPU session's: there it would only add
// work) gets one more output, in plain ONNX so the graph stays an ordinary graph:
//
//   onnx_genai.greedy_tokens = ArgMax(logits, axis = -1, keepdims = 0)     int64 [B, positions]
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
#include <string>

#include "graph/graph.h"
#include "onnx_genai/sampling.h"
#include "onnx_genai/status.h"

namespace onnx_genai::genai {

inline constexpr const char* kGreedyTokensOutput = "onnx_genai.greedy_tokens";

// Adds the output when `logits_name` is a graph output; returns whether it did.
Result<bool> add_greedy_tokens_output(Graph& graph, const std::string& logits_name);

// Whether a sequence sampled with `params` through `chain` (its whole processor chain) picks the
// argmax of the raw logits row: greedy, no processor, no logprobs.
bool takes_plain_argmax(const SamplingParams& params, const LogitProcessorChain& chain);

// The token at [row, position] of the greedy_tokens output (int64 [rows, positions] on the host),
// or an error when it lies outside [0, vocab).
Result<int32_t> greedy_token(const Tensor& tokens, int64_t row, int64_t position, int64_t vocab);

}  // namespace onnx_genai::genai
