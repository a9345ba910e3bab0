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
#pragma once

#include <cstdint>
#include <string>

#include "graph/graph.h"
#include "onnx_genai/status.h"

namespace onnx_genai::genai {

inline constexpr const char* kLogitRowsInput = "onnx_genai.logit_rows";

// Rewrites `graph` when its logits output has such an LM head; returns whether it did (graphs
// of other shapes are left as they are and keep computing every position).
Result<bool> select_logit_rows(Graph& graph, const std::string& logits_name);

}  // namespace onnx_genai::genai
