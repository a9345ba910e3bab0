// com.microsoft MatMulNBits: Y[..., N] = A[..., K] x dequantise(B)^T (+ bias), B block-quantised
// along K (the onnxruntime-genai model-builder weight format).
//
//   B           uint8 [N, blocks, block_size * bits / 8], blocks = ceil(K / block_size), bits 2,
//               4 or 8; narrower codes are packed low bits first; K is padded to a whole block.
//   scales      [N * blocks], dtype of A (often negative: the sign lives in the scale).
//   zero_points optional: uint8 packed like B ([N, ceil(blocks * bits / 8)]) or dtype of A
//               ([N * blocks]); absent means 2^(bits - 1).
//   g_idx       optional, rejected (act-order GPTQ is not supported).
//   bias        optional [N].
//   B[n][k] = (q[n][k] - zp[n][k / block_size]) * scale[n][k / block_size]
//
// accuracy_level (ORT's minimum accuracy of the computation): below 4 the CPU kernels compute in
// f32; 4 (int8) lets them quantise A per block to int8 (symmetric, scale max|a| / 127) for 4-bit
// weights and use integer dot products, as ONNX Runtime does; 2- and 8-bit weights stay in f32.
#pragma once

#include <cstdint>

#include "ops/op.h"

namespace onnx_genai {

struct MatMulNBitsParams {
  int64_t k = 0;
  int64_t n = 0;
  int64_t bits = 4;
  int64_t block_size = 0;
  int64_t blocks = 0;       // per column of B: ceil(K / block_size)
  int64_t block_bytes = 0;  // block_size * bits / 8
  int64_t accuracy_level = 0;
  bool zp_packed = false;   // zero points given as packed uint8
  bool has_zp = false;
  bool has_bias = false;

  // Input slots in the ORT schema.
  static constexpr int kA = 0, kB = 1, kScales = 2, kZeroPoints = 3, kGIdx = 4, kBias = 5;

  // Parses attributes and checks every input's dtype and shape; errors name `node`.
  // `inputs[i]` is null for an omitted optional input.
  static Result<MatMulNBitsParams> make(const Node& node, const std::vector<const TensorInfo*>& inputs);
};

// Y: A's shape with its last dim `n`, in A's dtype (MatMulNBits and the ops built on it).
void set_matmul_nbits_output(InferContext& ctx, int64_t n);

}  // namespace onnx_genai
