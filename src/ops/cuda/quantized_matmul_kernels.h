// Launch interface of the CUDA 4-bit MatMulNBits kernels (quantized_matmul_kernels.cu); layout
// and semantics in ops/schema/quantized_matmul.h. No CUDA headers needed.
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// Rows the tensor-core kernel takes: up to 16 in every form, up to this many (its many-row form,
// weights still read once for all rows) with f16 / bf16 activations and no float zero points.
constexpr int64_t kMaxTensorCoreRows = 64;

// Which kernel a plan may pick. kAuto: the planner's choice (the tensor-core kernel for M <= 16,
// or kMaxTensorCoreRows, where the layout allows it, else the CUDA-core one). The others force a kernel, for the
// benchmark and the tests: kCudaCore; kTensorCore, the tensor-core kernel with its standard
// register ring (3 quads in flight per warp, up to 3 blocks an SM); kTensorCoreDeep, with a deep
// ring (6 quads for f16 with no zero points, else 4; 2 blocks an SM). The deep form exists for
// f16 / bf16 activations with no or packed zero points at M <= 8 (elsewhere the standard kernel
// runs); any tensor-core choice falls back to the CUDA-core kernel where the tensor-core one
// cannot run. kInt4Gemm: the tiled int4 GEMM (int4_gemm.h) at any M where it supports the node
// (the op plans it, from a reordered copy of the weights; plan_matmul_nbits4 takes it as kAuto).
enum class MatMulNBits4Kernel { kAuto, kCudaCore, kTensorCore, kTensorCoreDeep, kInt4Gemm };

// A plan's choice: the kernel, the warps splitting K (0: the planner's; else 1, 2, 4 or 8; the
// int4 GEMM's blocks splitting K, 1 to 8), whether the tensor-core kernel may start as a
// programmatic dependent of the previous kernel (dependent_launch.cuh; off only to measure what
// it saves), and the int4 GEMM's tile (0: the planner's; else 1..kInt4GemmConfigs).
struct MatMulNBits4Choice {
  MatMulNBits4Kernel kernel = MatMulNBits4Kernel::kAuto;
  int block_k_splits = 0;
  bool dependent_launch = true;
  int int4_gemm_tile = 0;
  bool operator==(const MatMulNBits4Choice&) const = default;
};

// What becomes of the n computed columns. kNone: y is [m, n]. kSwiGLU (onnx_genai
// MatMulNBitsSwiGLU, ops/schema/fused_matmul.h): the columns are gate and up interleaved, y is
// [m, n / 2] and y[r][i] = silu(column 2i) * column 2i + 1, each column (+ bias) rounded to
// `dtype` first as the CPU reference rounds it, the product in f32 rounded once.
enum class MatMulNBits4Epilogue { kNone, kSwiGLU };

// y [m, n] = a [m, k] x dequantise(b)^T (+ bias), all device pointers; a, scales, zp_float,
// bias and y have `dtype`. Zero points: zp_packed (4-bit, [n, ceil(blocks / 2)] bytes), or
// zp_float ([n * blocks]), or neither (8).
struct MatMulNBits4Args {
  DType dtype = DType::kF32;
  int64_t m = 0, n = 0, k = 0;
  int64_t block_size = 0, blocks = 0;
  const void* a = nullptr;
  const uint8_t* b = nullptr;
  const void* scales = nullptr;
  const uint8_t* zp_packed = nullptr;
  const void* zp_float = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;

  // Which zero points will be given (set before planning: they pick the kernel variant).
  bool packed_zero_points = false, float_zero_points = false;
  // B, scales, zero points and bias are constants (initializers, never written by a kernel): a
  // dependent launch reads its first quads of them before waiting for the previous kernel.
  bool constant_weights = false;
  MatMulNBits4Epilogue epilogue = MatMulNBits4Epilogue::kNone;  // kSwiGLU needs an even n

  // The RMS-norm prologue (onnx_genai RmsNormMatMulNBits, ops/schema/fused_matmul.h). Asked for
  // before planning; the plan keeps it only for the tensor-core kernel, where the normalised rows
  // fit kNormPrologueBytes. Each block then reads, once the previous kernel is done, rows
  // norm_x [m, k] (+ norm_skip [m, k]), normalises them with norm_gamma [k] as the RMS norm kernel
  // does (normalization_kernels.h: f32, rounded to dtype) into shared memory, and reads its
  // activations there (`a` is not read); block 0 also writes norm_x + norm_skip to norm_sum
  // where given. Device pointers of dtype, 16-byte aligned.
  bool norm_prologue = false;
  const void* norm_x = nullptr;
  const void* norm_skip = nullptr;
  const void* norm_gamma = nullptr;
  void* norm_sum = nullptr;
  float norm_epsilon = 0.0f;

  // Set by plan_matmul_nbits4 from the shapes and the device (never from data).
  bool tensor_core = false;  // a tensor-core kernel (else the CUDA-core one)
  bool many_rows = false;    // of those, the many-row kernel (M > 16)
  bool deep_ring = false;    // the small-M kernel's deep register ring
  // The small-M kernel: warps of a thread block sharing a row tile, splitting K. The many-row
  // kernel: thread blocks splitting K, their sums added in the workspace.
  int block_k_splits = 1;
  bool dependent_launch = false;  // launched as a programmatic dependent of the previous kernel
  size_t workspace_bytes = 0;     // device scratch the launch needs in `workspace`

  void* workspace = nullptr;  // per run: workspace_bytes of device memory, 16-byte aligned
};

// Shared memory the norm prologue may take: the normalised rows, as m x k x sizeof(dtype) (1 or
// 2 rows at K = 3584 in f16). More rows normalise on their own (launch_rms_norm) first.
constexpr int64_t kNormPrologueBytes = 16 * 1024;

// Validates the shapes and picks the kernel and its work split for the current device. Call once
// per shape (in prepare), before the pointers are known. A default `choice` takes the process-wide
// one below.
Status plan_matmul_nbits4(MatMulNBits4Args& args, MatMulNBits4Choice choice = {});

// Whether launch_matmul_nbits4 runs the planned tensor-core kernel on args' pointers (else the
// CUDA-core kernel, which has no norm prologue: a planned prologue then cannot run).
bool matmul_nbits4_runs_tensor_core(const MatMulNBits4Args& args);

// What plans given the default choice take instead (initially the default: the planner's). For
// the tests, which run the op's own planning on every variant; not thread-safe.
void set_matmul_nbits4_choice(MatMulNBits4Choice choice);
MatMulNBits4Choice matmul_nbits4_choice();

// Queues the planned kernel on `stream` (a cudaStream_t); no allocation, no synchronisation. A
// plan with workspace_bytes needs args.workspace.
Status launch_matmul_nbits4(const MatMulNBits4Args& args, void* stream);

// The SwiGLU epilogue on its own, after a product without it (many rows: a dense GEMM):
// y [m, n] = silu(columns[:, 2i]) * columns[:, 2i + 1], columns [m, 2n] (gate and up interleaved,
// already rounded to `dtype`), f32 math rounded once. Queued on `stream`.
Status launch_swiglu_pairs(DType dtype, int64_t m, int64_t n, const void* columns, void* y, void* stream);

}  // namespace onnx_genai::cuda
