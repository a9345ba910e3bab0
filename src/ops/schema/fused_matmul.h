// onnx_genai MatMulNBitsSwiGLU: a decoder MLP's gate and up projections and their SwiGLU as one
// node. Models never contain it: the load-time fusions (runtime/fusion_passes.h) make it from
//   g = MatMulNBits(A, Wg), u = MatMulNBits(A, Wu), Y = Mul(Mul(g, Sigmoid(g)), u)
// on devices where one kernel instead of five saves launches and a pass over A.
//
//   Y[..., N] = silu(gate) * up,  gate = A x Wg^T (+ bg),  up = A x Wu^T (+ bu),  silu(x) = x / (1 + e^-x)
//
// Inputs are MatMulNBits's (ops/schema/quantized_matmul.h: A, B, scales, zero_points?, g_idx
// (absent), bias?) for the 2N rows of Wg and Wu INTERLEAVED ROW BY ROW: row 2i of B, scales,
// zero points and bias is gate row i, row 2i + 1 is up row i. The two values that meet in one
// output are then neighbouring columns of one MatMulNBits, which a kernel computes side by side.
// Attributes: K, N (the OUTPUT width, half of B's rows), bits, block_size, accuracy_level.
//
// Rounding, as the unfused graph rounds: the 2N interleaved columns are computed as MatMulNBits
// computes them (bias added in f32) and rounded to A's dtype; silu(gate) * up is then f32 math
// rounded once (the unfused Sigmoid and two Muls rounded three times).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op.h"
#include "ops/schema/quantized_matmul.h"

namespace onnx_genai {

struct MatMulNBitsSwiGLUParams {
  static constexpr const char* kDomain = "onnx_genai";
  static constexpr const char* kOpType = "MatMulNBitsSwiGLU";

  MatMulNBitsParams matmul;  // of the interleaved weights: matmul.n = 2 x n
  int64_t n = 0;             // output width

  // The fused node as the MatMulNBits of its interleaved weights (attribute N doubled; name and
  // op type kept, so messages still name the fused node). Kernels prepare MatMulNBits on it.
  static Node interleaved_matmul(const Node& fused);
  // MatMulNBits's checks on interleaved_matmul(node); errors name `node`.
  static Result<MatMulNBitsSwiGLUParams> make(const Node& node, const std::vector<const TensorInfo*>& inputs);
};

}  // namespace onnx_genai
