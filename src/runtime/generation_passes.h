// Load-time rewrites a generation session asks of its decoder graph (genai/model.cc applies
// them; the serving engine's paged-attention rewrite is paged_attention_pass.h), and the graph
// analysis that decides how a decoder's attention mask may be fed. Plain graph passes: each
// adds ONNX (or onnx_genai) nodes and graph inputs/outputs named below, and knows nothing of
// the generator that feeds them.
//
// ---- logit rows --------------------------------------------------------------------------------
// A load-time rewrite that lets the generator ask the decoder for the logits of chosen positions
// only. A prefill of S tokens needs one row of logits per sequence, yet the graph's LM head
// multiplies all S hidden states by [hidden, vocab]: for a 0.5B model with a 152k vocabulary that
// is over a quarter of the prompt's arithmetic, thrown away.
//
// The rewrite finds the LM head (a MatMul or MatMulNBits whose output reaches the logits output
// through position-wise ops only: Cast, softcap's Div/Tanh/Mul, ...) and feeds it
//
//   GatherElements(hidden [B, S, H], onnx_genai.logit_rows [B, R, H], axis = 1) -> [B, R, H]
//
// so logits become [B, R, vocab]: the rows each sequence asks for (R = 1 with its last fresh
// position when sampling, R = S with 0..S-1 when scoring a text). The new graph input is int64,
// each row's position repeated H times, which keeps the graph plain ONNX.
//
// ---- the greedy token in the graph ---------------------------------------------------------------
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
// (genai/greedy_output.h decides when a step takes it and reads it.)
//
// ---- the sampled token in the graph --------------------------------------------------------------
// onnx_genai.sampled_tokens = SampleTokens(logits, onnx_genai.sampling_params,
// onnx_genai.sampling_uniforms, onnx_genai.sampling_mask) (ops/schema/sampling.h):
// genai/device_sampling.h fills the inputs and reads the output.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

inline constexpr const char* kLogitRowsInput = "onnx_genai.logit_rows";
inline constexpr const char* kGreedyTokensOutput = "onnx_genai.greedy_tokens";
inline constexpr const char* kSampledTokensOutput = "onnx_genai.sampled_tokens";
inline constexpr const char* kSamplingParamsInput = "onnx_genai.sampling_params";
inline constexpr const char* kSamplingUniformsInput = "onnx_genai.sampling_uniforms";
inline constexpr const char* kSamplingMaskInput = "onnx_genai.sampling_mask";

// Rewrites `graph` when its logits output has such an LM head; returns whether it did (graphs
// of other shapes are left as they are and keep computing every position).
Result<bool> select_logit_rows(Graph& graph, const std::string& logits_name);

// Adds onnx_genai.greedy_tokens when `logits_name` is a graph output; returns whether it did.
Result<bool> add_greedy_tokens_output(Graph& graph, const std::string& logits_name);

// Adds onnx_genai.sampled_tokens and its three inputs when `logits_name` is a rank-3 graph output;
// returns whether it did. With `every_position` (the paged decoder's packed logits [1, R, V]) each
// position is a row: params [R, 5], uniforms [R], tokens [R]; masks [M, ceil(V / 64)] either way.
Result<bool> add_sampled_tokens_output(Graph& graph, const std::string& logits_name, bool every_position = false);

// The LM head (a MatMul or MatMulNBits) feeding `logits` through position-wise ops only, with the
// values between them appended to `chain` (logits last); null when there is none.
Node* find_lm_head(Value* logits, std::vector<Value*>& chain);

// Graph inputs that feed a com.microsoft GroupQueryAttention's past key or value (which it can
// update in place).
std::set<std::string> inputs_read_as_gqa_past(const Graph& graph);

// onnxruntime-genai's attention-mask subgraph: the mask's values only reach a ReduceSum
// (seqlens_k) and its width only GroupQueryAttention's total_sequence_length. Then a mask padded
// with zeros to any width computes the same thing.
bool mask_only_sets_lengths(const Graph& graph, const std::string& mask_name);

}  // namespace onnx_genai
