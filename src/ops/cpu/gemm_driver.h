// Floating-point GEMM for MatMul and Gemm on the CPU:  C[b] = alpha * A[b] B[b] + beta * bias.
//
// A and B are f32, f16 or bf16 (16-bit values widen to f32 as they are packed; accumulation is
// f32); C is written in the same dtype. The work splits into three layers (BLIS/GotoBLAS):
//
//   task   = (batch, MC-row block, NC-column block), split across threads
//   k loop = KC-deep slices: A[MC x KC] is packed into row tiles, B[KC x NC] into NR-wide panels
//   tile   = micro-kernel: MR x NR accumulators in registers, one k step = NR/W vector loads of B,
//            MR broadcasts of A, MR*NR/W FMAs
//
// Constant weights are packed once (GemmPackedB) and the per-call B packing disappears. M == 1
// (decode) takes a GEMV path that streams each B panel exactly once with all threads splitting N.
// Kernels exist for AVX-512 (14x32 tile), AVX2 (6x16) and scalar (4x4), picked at run time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"
#include "onnx_genai/tensor.h"

namespace onnx_genai {

class ThreadPool;

enum class GemmIsa { kScalar, kAvx2, kAvx512 };
// The best kernel set this CPU runs (OG_CPU_ISA=avx2|scalar lowers it).
GemmIsa gemm_isa();

// A read-only f32/f16/bf16 matrix: element (r, c) is data[r * rs + c * cs] (strides in elements,
// 0 along a broadcast dimension).
struct GemmOperand {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rs = 0;
  int64_t cs = 0;
};

// `count` B matrices [K, N] repacked into the ISA's f32 panel layout: panel p holds columns
// [p*NR, p*NR + NR) as [K][NR], zero-padded past N, so the micro-kernel reads it front to back.
class GemmPackedB {
 public:
  // Matrix i starts at `b.data` + i * `batch_stride` elements.
  static Result<GemmPackedB> pack(GemmIsa isa, const GemmOperand& b, int64_t k, int64_t n, int64_t count,
                                  int64_t batch_stride);
  const float* matrix(int64_t i) const { return storage_.data<float>() + i * matrix_floats_; }
  // Floats from one panel to the next within a matrix.
  int64_t panel_stride() const { return k_ * nr_; }

 private:
  Tensor storage_;
  int64_t k_ = 0;
  int64_t nr_ = 0;
  int64_t matrix_floats_ = 0;
};

// The per-run operands of a planned GEMM.
struct GemmArgs {
  GemmOperand a;                            // [M, K] of each batch
  GemmOperand b;                            // [K, N] of each batch; unused with packed_b
  const GemmPackedB* packed_b = nullptr;
  const int64_t* a_offsets = nullptr;       // per batch: element offset into a.data
  const int64_t* b_offsets = nullptr;       // per batch: element offset into b.data, or packed matrix index
  void* c = nullptr;                        // [batch, M, N] dense, dtype c_dtype
  float alpha = 1.0f;
  float beta = 0.0f;
  GemmOperand bias;                         // broadcast to [M, N] through strides; data null = none
};

struct GemmShape {
  int64_t batch = 1;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

// Blocking and thread split for one shape, fixed at prepare so run() only follows pointers.
struct GemmPlan {
  GemmIsa isa = GemmIsa::kScalar;
  GemmShape shape;
  DType dtype = DType::kF32;  // of A, B, bias and C
  bool packed_b = false;
  bool epilogue = false;      // alpha != 1 or a bias: a pass over each finished C block
  bool gemv = false;          // M == 1: stream B once, no A packing
  int64_t mc = 0, nc = 0, kc = 0;
  int64_t m_blocks = 0, n_blocks = 0, tasks = 0;
  int64_t chunks = 1;         // parallel pieces; each owns a workspace slice
  // Per-chunk workspace layout, in floats.
  int64_t a_pack_floats = 0, b_pack_floats = 0, c_tile_floats = 0, chunk_floats = 0;

  // b_unit_col_stride: an unpacked B has cs == 1 (rows of N contiguous), which the GEMV reads
  // directly; a transposed B goes through packing instead.
  static GemmPlan make(GemmIsa isa, GemmShape shape, DType dtype, bool packed_b, bool b_unit_col_stride,
                       bool epilogue, int threads);
  size_t workspace_bytes() const { return static_cast<size_t>(chunks * chunk_floats) * sizeof(float); }
  // `workspace` holds workspace_bytes(), 64-byte aligned. `pool` may be null.
  void run(const GemmArgs& args, void* workspace, ThreadPool* pool) const;
};

}  // namespace onnx_genai
