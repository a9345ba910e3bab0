// Dtype-agnostic strided copies. Every data-movement op (Transpose, Slice, Concat, Split, Expand,
// Tile, Pad, DepthToSpace) is one loop nest that copies element i_0..i_n from
//   src + Σ i_d * src_stride_d   to   dst + Σ i_d * dst_stride_d,
// so they all build a StridedCopy in prepare and call run() per step.
//
// Memory-access plan (decided once in make()):
//   - dims of size 1 are dropped and adjacent dims that are contiguous for both sides merge, so a
//     row-major block copy becomes a single dim;
//   - kRun:   innermost dim contiguous on both sides -> one memcpy per row; long rows are cut into
//             pieces so a single huge row still spreads over the thread pool;
//   - kTile:  innermost dst dim strided in src but another dim contiguous in src (a transpose) ->
//             the two dims are walked in 16 x 16 element blocks so both the reads and the
//             writes of a block stay within a few cache lines each;
//   - kElems: anything else (broadcast fill, negative steps) -> element loop, element size fixed
//             at compile time (1/2/4/8 bytes) so each copy is one load and one store.
// Work is split over the outer rows with parallel_for; tiny copies stay on the calling thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"
#include "ops/op.h"

namespace onnx_genai {

class ThreadPool;

// parallel_for min_chunk for units of `unit_bytes` each: a task below ~32 KiB of copying is not
// worth waking another thread for.
inline int64_t copy_min_chunk(int64_t unit_bytes) {
  constexpr int64_t kMinTaskBytes = 32 * 1024;
  return std::max<int64_t>(1, kMinTaskBytes / std::max<int64_t>(1, unit_bytes));
}

// memcpy whose common element sizes compile to a single load and store.
inline void copy_bytes(void* dst, const void* src, int64_t n) {
  switch (n) {
    case 1: std::memcpy(dst, src, 1); return;
    case 2: std::memcpy(dst, src, 2); return;
    case 4: std::memcpy(dst, src, 4); return;
    case 8: std::memcpy(dst, src, 8); return;
    default: std::memcpy(dst, src, static_cast<size_t>(n));
  }
}

// Writes the element at `value` (`elem` bytes) n times from dst; all-zero values become memset.
void fill_elements(void* dst, int64_t n, const void* value, int64_t elem, ThreadPool* pool);

// Bytes per element for byte-wise copies, or an error for types without addressable elements
// (packed int4, string).
Result<int64_t> element_bytes(DType dtype);

// The bytes of `value` stored as one element of `dtype` (numeric types and bool), for fill values.
Result<std::array<char, 8>> encode_scalar(DType dtype, double value);

// Row-major element strides of `dims` (the stride of a dim never depends on its own size, so a
// zero-sized dim still gives usable strides).
std::vector<int64_t> contiguous_strides(std::span<const int64_t> dims);

class StridedCopy {
 public:
  static constexpr int kMaxDims = 16;

  // `dims` and both stride lists are in elements, outermost first; a stride may be 0 (broadcast)
  // or negative (reversed walk). Fails only when more than kMaxDims dims survive coalescing.
  static Result<StridedCopy> make(std::span<const int64_t> dims, std::span<const int64_t> src_strides,
                                  std::span<const int64_t> dst_strides, int64_t elem_bytes);
  // Copies every element; `src` and `dst` point at element (0, ..., 0).
  void run(const void* src, void* dst, ThreadPool* pool) const;
  int64_t numel() const { return numel_; }

 private:
  enum class Mode { kEmpty, kRun, kTile, kElems };
  Mode mode_ = Mode::kEmpty;
  int64_t numel_ = 0;
  int64_t elem_ = 0;
  // Outer loop nest (byte strides); the inner one or two dims below are handled by the mode.
  std::vector<int64_t> outer_dims_, outer_src_, outer_dst_;
  int64_t inner_n_ = 1, inner_src_ = 0, inner_dst_ = 0;  // innermost dim (bytes)
  int64_t tile_n_ = 1, tile_src_ = 0, tile_dst_ = 0;     // kTile: the src-contiguous dim (bytes)
  // Work units per outer row: slices of the run (kRun) or bands of 16 source-contiguous rows (kTile).
  int64_t pieces_ = 1;

  void run_units(const char* src, char* dst, int64_t begin, int64_t end) const;
};

// The loop nest of a copy from input 0 to output 0, in elements (see StridedCopy::make).
struct CopyLayout {
  std::vector<int64_t> dims, src_strides, dst_strides;
  int64_t src_offset = 0;  // element of input 0 that (0, ..., 0) reads
};
using CopyPlanner = std::function<Result<CopyLayout>(const PrepareContext&)>;

// A kernel whose whole run is one StridedCopy from input 0 to output 0 (Transpose, Expand, Tile,
// Slice, DepthToSpace): `planner` turns the plan-time shapes and values into the layout.
std::unique_ptr<OpKernel> make_strided_copy_kernel(CopyPlanner planner);

// The layouts of the ops that are one strided copy, shared with their CUDA kernels
// (ops/cuda/layout.cc): Transpose (layout.cc), Slice (slice.cc), Expand (shape.cc).
Result<CopyLayout> transpose_layout(const PrepareContext& ctx);
Result<CopyLayout> slice_layout(const PrepareContext& ctx);
Result<CopyLayout> expand_layout(const PrepareContext& ctx);

// A default-domain CPU kernel for every dtype (data movement never looks at the values).
KernelDef any_dtype_kernel(std::string op_type, std::function<std::unique_ptr<OpKernel>(const Node&)> create,
                           int since_version = 1, int end_version = INT_MAX);

}  // namespace onnx_genai
