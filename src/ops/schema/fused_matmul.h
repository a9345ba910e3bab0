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
//
// onnx_genai RmsNormMatMulNBits: an RMS norm and the one product that reads its output, as one
// node, so a device kernel can normalise the activation rows in its GEMV's prologue (a decode
// step's norm launch saved). Models never contain it either: the fusions make it from
//   y = SkipSimplifiedLayerNormalization(x, skip, gamma)  (outputs mean, inv_std_var unread)
//     | SimplifiedLayerNormalization(x, gamma) | RMSNormalization(x, gamma)   (axis -1, no bias)
//   Y = MatMulNBits(y, ...) | MatMulNBitsSwiGLU(y, ...)   (y read by nothing else)
//
//   s = x (+ skip),  y = s / sqrt(mean(s^2) + epsilon) * gamma  (over the last axis),  Y = product(y)
//
// Inputs: x [..., K]; skip (optional; x's shape, or [S, K] / [1, S, K] for a 3-D x, as the Skip
// norm takes it); gamma [K]; then the product's inputs from B on (B, scales, zero_points?, g_idx
// (absent), bias?: MatMulNBits's inputs 1-5 are inputs 3-7). Attributes: epsilon (the norm's,
// default 1e-5); K, N, bits, block_size, accuracy_level (the product's; N is the output width);
// swiglu (1: the product is MatMulNBitsSwiGLU, its B holding 2N interleaved rows; 0: MatMulNBits).
// Outputs: Y [..., N] and, only with skip, the optional sum = s (the Skip norm's
// input_skip_bias_sum), both in x's dtype.
//
// Rounding, as the unfused graph rounds: y is rounded to x's dtype as the norm op rounds its
// output (s, its statistics and the scaling in f32 or wider), then the product is computed from
// those rounded rows as the unfused MatMulNBits / MatMulNBitsSwiGLU computes it.
#pragma once

#include <cstdint>
#include <span>
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

struct RmsNormMatMulNBitsParams {
  static constexpr const char* kDomain = "onnx_genai";
  static constexpr const char* kOpType = "RmsNormMatMulNBits";
  // Input slots: MatMulNBits input i >= 1 (B, scales, ...) is input kB + i - 1.
  static constexpr int kX = 0, kSkip = 1, kGamma = 2, kB = 3;
  static constexpr int kY = 0, kSum = 1;

  MatMulNBitsParams matmul;  // the product's weights (swiglu: the interleaved rows, matmul.n = 2 x n)
  int64_t n = 0;             // output width
  bool swiglu = false;
  bool has_skip = false;
  float epsilon = 1e-5f;
  int64_t rows = 0;       // of x: its elements / K
  int64_t skip_rows = 0;  // of skip (its rows repeat over x's); rows when there is no skip

  // The norm alone: SkipSimplifiedLayerNormalization (x, skip, gamma) or SimplifiedLayerNormalization
  // (x, gamma), with epsilon; and the product alone: MatMulNBits or MatMulNBitsSwiGLU with the
  // product's attributes. Both keep the fused node's name, so their messages still point at it.
  static Node norm_node(const Node& fused);
  static Node product_node(const Node& fused);

  // The inputs of those nodes among the fused node's: (x, skip, gamma) or (x, gamma); and
  // (`a`, B, scales, ...), where `a` stands for the normalised rows.
  template <typename T>
  static std::vector<T> norm_inputs(std::span<const T> fused, bool has_skip) {
    const auto at = [&](int i) { return i < static_cast<int>(fused.size()) ? fused[static_cast<size_t>(i)] : T{}; };
    if (has_skip) return {at(kX), at(kSkip), at(kGamma)};
    return {at(kX), at(kGamma)};
  }
  template <typename T>
  static std::vector<T> product_inputs(std::span<const T> fused, T a) {
    std::vector<T> inputs{a};
    for (size_t i = kB; i < fused.size(); ++i) inputs.push_back(fused[i]);
    return inputs;
  }

  // The product's checks (on product_node, with x standing for the normalised rows), gamma [K],
  // skip's dtype and rows; errors name `node`. The norm schema's own checks (skip's shape) run
  // at shape inference.
  static Result<RmsNormMatMulNBitsParams> make(const Node& node, const std::vector<const TensorInfo*>& inputs);
};

}  // namespace onnx_genai
