// Launch interface of the CUDA reduce kernels (reduce_kernels.cu): ArgMax / ArgMin and
// ReduceSum. No CUDA headers needed.
//
// Both see their input the way the CPU kernels (ops/cpu/reduce.cc) do, as [outer, len, inner]
// around the axis (or run of axes) they reduce, and keep the CPU kernels' semantics:
//   ArgMax / ArgMin  ties go to the first index (the last with select_last_index). NaN as the
//                    CPU kernel treats it: along a contiguous axis (inner == 1) NaNs are
//                    skipped and an all-NaN lane gives 0; along a strided axis the CPU compares
//                    element by element from element 0, so a NaN there wins (index 0) and any
//                    later NaN is skipped.
//   ReduceSum        accumulates in int64 for integers, f64 for f64 and f32 for f32 / f16 / bf16
//                    (intermediate passes keep the accumulator type), rounds once on the store.
#pragma once

#include <cstdint>
#include <span>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// A tensor seen around the axes one pass reduces: `len` elements `inner` apart, for each of
// outer * inner output elements (output index o * inner + i).
struct ReduceView {
  int64_t outer = 1, len = 1, inner = 1;
};

// int64 y[outer * inner] = the index along len of x's largest (max) or smallest element.
// dtype: f32, f16, bf16, f64, int8, uint8, int32, int64 (the CPU kernel's set).
struct ArgReduceArgs {
  DType dtype = DType::kF32;
  ReduceView view;
  bool max = true;
  bool select_last = false;
  const void* x = nullptr;
  int64_t* y = nullptr;
  void* workspace = nullptr;  // arg_reduce_workspace_bytes(view), 16-byte aligned
};

bool arg_reduce_supported(DType dtype);
// Long contiguous rows are reduced in chunks by several blocks, their bests kept in a workspace.
int64_t arg_reduce_chunks(const ReduceView& view);
int64_t arg_reduce_workspace_bytes(const ReduceView& view);
Status launch_arg_reduce(const ArgReduceArgs& args, void* stream);

// ReduceSum as a chain of passes, each [outer, len, inner] -> [outer, inner], innermost run of
// reduced axes first (each pass reads the previous one's output). Passes between the first and
// the last write accumulators into the workspace, ping-ponging between offset 0 and
// second_buffer_offset. An empty input (no elements) writes `out_elems` zeros. dtype: f32, f16,
// bf16, f64, int32, int64.
struct ReduceSumArgs {
  DType dtype = DType::kF32;
  std::span<const ReduceView> passes;
  bool empty_input = false;
  int64_t out_elems = 0;
  const void* x = nullptr;
  void* y = nullptr;
  void* workspace = nullptr;
  int64_t second_buffer_offset = 0;
};

bool reduce_sum_supported(DType dtype);
// Bytes of one accumulator of `dtype` (what intermediate passes store).
int64_t reduce_sum_accumulator_bytes(DType dtype);
Status launch_reduce_sum(const ReduceSumArgs& args, void* stream);

}  // namespace onnx_genai::cuda
