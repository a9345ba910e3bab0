// Launch interface of the CUDA strided copy (layout_kernels.cu) behind Transpose, Slice, Expand
// and Concat (ops/cuda/layout.cc). No CUDA headers needed.
//
// Every one of those ops copies element (i_0, ..., i_n) from src + Σ i_d * src_stride_d to
// dst + Σ i_d * dst_stride_d. The host plans the loop nest once (StridedCopyPlan::make: size-1
// dims dropped, dims contiguous on both sides merged, elements widened to up to 16 bytes where
// every stride and the innermost run allow it), so run() only launches.
#pragma once

#include <cstdint>
#include <span>

#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// Dims the kernel indexes after merging (a rank-8 tensor's transpose needs at most 8).
inline constexpr int kMaxCopyDims = 8;

struct CopyLoop {
  int rank = 0;  // 0 with numel 1: a single element
  int64_t numel = 0;
  int64_t dims[kMaxCopyDims] = {};
  int64_t src_strides[kMaxCopyDims] = {};  // in units of `unit_bytes`; may be 0 or negative
  int64_t dst_strides[kMaxCopyDims] = {};
  int unit_bytes = 1;                      // 1, 2, 4, 8 or 16
  bool wide_index = false;                 // an offset passes 2^31 - 1 or the count 2^30
};

// A copy planned for one pair of shapes: `wide` moves up to 16-byte units and is valid when both
// base pointers are aligned to its unit; `narrow` moves single elements and always is.
struct StridedCopyPlan {
  CopyLoop wide, narrow;
  int64_t src_offset_bytes = 0;  // added to the source pointer at run time

  // `dims` and strides in elements, outermost first; `src_offset` in elements. Fails when more
  // than kMaxCopyDims dims survive merging or the element size is not 1, 2, 4 or 8 bytes.
  static Result<StridedCopyPlan> make(std::span<const int64_t> dims, std::span<const int64_t> src_strides,
                                      std::span<const int64_t> dst_strides, int64_t src_offset, int elem_bytes);
};

// Queues the copy on `stream` (null: the default stream); nothing when the plan is empty.
Status launch_strided_copy(const StridedCopyPlan& plan, const void* src, void* dst, void* stream);

}  // namespace onnx_genai::cuda
