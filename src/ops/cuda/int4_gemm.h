// Launch interface of the tiled int4 GEMM (int4_gemm_kernels.cu): 4-bit MatMulNBits with many
// activation rows (the serving engine's batched steps, M = 16..512) on mma.sync tensor cores,
// from a copy of the weights reordered once, at prepare time, into the kernel's tile layout. The
// ONNX initializers stay as they are (the other kernels read them). No CUDA headers needed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/memory.h"
#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// What the kernel takes. Refused, with the reason (the op keeps its other paths for these):
//   - bits other than 4: the layout packs 8 nibbles per lane word;
//   - activations other than f16 / bf16: mma.sync has no f32 operands (f32 models take the
//     CUDA-core and dense paths);
//   - float zero points: they would need a per-block offset in f32, not an exact integer one;
//   - K not a multiple of 64 (one pipeline stage): the kernel has no K tail;
//   - block sizes other than 16, 32, 64, 128, 256: a stage must meet whole blocks or lie in one.
// Packed uint8 zero points and odd N are taken (N is padded to 16 columns in the copy).
Status int4_gemm_supports(DType dtype, int64_t n, int64_t k, int64_t block_size, int64_t bits, bool float_zero_points);

// One MatMulNBits node's weights in the kernel's layout, in device memory (int4_gemm_kernels.cu
// draws the layout): codes [K/64][N16/16 chunks][32 lanes][16 bytes], scales [blocks][N16]
// and zero points [blocks][N16] in the activation dtype, N16 = N rounded up to 16.
struct Int4GemmWeights {
  DeviceBuffer memory;
  const uint8_t* codes = nullptr;
  const void* scales = nullptr;
  const void* zero_points = nullptr;  // null: symmetric (code 8 is zero)
  DType dtype = DType::kF16;
  int64_t n = 0, k = 0, block_size = 0, blocks = 0, n16 = 0;
};

// Reorders host B [n, blocks, block_size / 2] (4-bit, low nibble first), scales [n * blocks]
// (dtype) and packed zero points [n, ceil(blocks / 2)] (or null) into the layout and uploads it
// to the current device, synchronously: call at prepare time, never while a plan runs.
Result<Int4GemmWeights> pack_int4_gemm_weights(DType dtype, int64_t n, int64_t k, int64_t block_size,
                                               const uint8_t* b, const void* scales, const uint8_t* zero_points);

// A launch's shape, planned once per (weights, M): the tile configuration (rows of A per block)
// and the blocks splitting K, whose f32 sums a second kernel adds in a fixed order.
struct Int4GemmPlan {
  int64_t m = 0;
  int config = 0;  // index into the kernel's configurations (int4_gemm_kernels.cu kConfigs)
  int splits = 1;
  size_t workspace_bytes = 0;  // splits x M x N f32 when splits > 1
};

// Configurations a benchmark may force (0: the planner's); see kConfigs.
constexpr int kInt4GemmConfigs = 5;

// Plans M rows on `w` for the current device. forced_config 1..kInt4GemmConfigs and
// forced_splits 1..8 override the planner (benchmarks, tests).
Result<Int4GemmPlan> plan_int4_gemm(const Int4GemmWeights& w, int64_t m, int forced_config = 0, int forced_splits = 0);

// y [m, n] = a [m, k] x dequantise(b)^T (+ bias [n]), all of the weights' dtype; a 16-byte
// aligned. Queued on `stream` (a cudaStream_t): no allocation, no synchronisation, static grid,
// capture-safe. `workspace`: plan.workspace_bytes of device memory.
Status launch_int4_gemm(const Int4GemmPlan& plan, const Int4GemmWeights& w, const void* a, const void* bias, void* y,
                        void* workspace, void* stream);

// Whether the op should plan this kernel for M rows of a K x N weight (the rule and the
// measurements it comes from: docs/STATUS.md, "Many rows").
bool int4_gemm_pays(int64_t m, int64_t n, int64_t k);

}  // namespace onnx_genai::cuda
