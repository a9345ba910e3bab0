// One projection (fc1, fc2 or fc3) of every expert of a MoE / QMoE node, as the CPU MoE kernel
// (ops/cpu/moe.cc) multiplies it: Y [m, n1 - n0] = A [m, K] x W_e[n0:n1]^T for the m rows routed
// to expert e. Only the selected expert's rows [n0, n1) are read.
//
//   int codes (QMoE "int"): MatMulNBits' quantised GEMV / GEMM tables (avx2/qgemm_kernels.h) on
//     a view of the expert's rows; A is packed once per routed row (pack()). Scales that are not
//     f32 per block (16-bit, or one per row) are widened into the caller's scratch per piece,
//     so no per-expert copy of the scales is ever made.
//   float weights (MoE) and MXFP4 (QMoE "fp4"): the piece's rows are decoded to f32 in scratch
//     (f32 weights are read in place) and multiplied with f32 dot products.
#pragma once

#include <cstdint>

#include "ops/cpu/avx2/qgemm_kernels.h"
#include "ops/op.h"
#include "ops/schema/moe.h"

namespace onnx_genai {

// Output rows of one expert multiplied per task: tasks never depend on the thread count, so a
// result does not either.
inline constexpr int64_t kMoEPieceRows = 128;

class ExpertProjection {
 public:
  ExpertProjection() = default;
  ExpertProjection(const MoEParams& p, int projection, DType weight_dtype);

  bool quantized_int() const { return quant_ == MoEParams::Quant::kInt; }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  // Floats of packed A per row (int codes; 0 otherwise), and of per-row block terms.
  int64_t packed_row_floats() const { return quantized_int() ? row_values_ : 0; }
  int64_t block_terms() const { return quantized_int() ? kernel_blocks_ : 0; }
  // Scratch floats one concurrent multiply() needs.
  int64_t scratch_floats() const;

  // Packs rows [0, m) of f32 `a` [m, K] into `values` [m, packed_row_floats()] and `terms`
  // [m, block_terms()] (int codes only).
  void pack(const float* a, int64_t m, float* values, float* terms) const;

  struct Inputs {
    const void* weights = nullptr;
    const void* scales = nullptr;
    const uint8_t* zero_points = nullptr;
    const float* global_scales = nullptr;
  };
  // y[r * ldy + n - n0] for rows r < m of expert e. Int codes read A from `packed` / `terms`
  // (pack()'s output); the others from f32 `a` [m, K].
  void multiply(const Inputs& in, int64_t e, int64_t n0, int64_t n1, const float* a, const float* packed,
                const float* terms, int64_t m, float* scratch, float* y, int64_t ldy) const;

 private:
  QWeights view(const Inputs& in, int64_t e, int64_t n0, int64_t n1, float* scratch) const;
  void decode_rows(const Inputs& in, int64_t e, int64_t n0, int64_t n1, float* out) const;

  MoEParams::Quant quant_ = MoEParams::Quant::kFloat;
  DType weight_dtype_ = DType::kF32, scale_dtype_ = DType::kF32;
  int64_t n_ = 0, k_ = 0, bits_ = 0, block_size_ = 0, blocks_ = 1, row_bytes_ = 0;
  // Int codes: the kernels' block (a power of two dividing K; per-row scales repeat over it).
  int64_t kernel_block_ = 0, kernel_blocks_ = 1, row_values_ = 0, zp_row_bytes_ = 0;
  bool per_row_ = false, zero_points_ = false;
  const QGemmKernels* kernels_ = nullptr;
};

}  // namespace onnx_genai
