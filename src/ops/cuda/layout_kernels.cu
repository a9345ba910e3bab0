// The strided copy behind the CUDA layout ops (see layout_kernels.h).
//
// Memory-access plan: one thread per (widened) unit of the output loop nest, grid-stride. The
// linear index is split over the merged dims innermost first, so consecutive threads walk the
// innermost dim: for Slice, Expand and Concat both sides are then contiguous runs of up to 16-byte
// units (coalesced); a Transpose that moves the innermost dim writes coalesced and gathers reads
// (decode-sized tensors, where L2 absorbs it). Index arithmetic is 32-bit unless some offset or
// the count needs 64.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/layout_kernels.h"

namespace onnx_genai::cuda {

namespace {

struct Dim {
  int64_t size, src, dst;
};

// Size-1 dims dropped; neighbours merged where both sides walk them as one dim.
std::vector<Dim> merged_dims(std::span<const int64_t> dims, std::span<const int64_t> src, std::span<const int64_t> dst) {
  std::vector<Dim> out;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    const Dim cur{dims[d], src[d], dst[d]};
    if (!out.empty() && out.back().src == cur.src * cur.size && out.back().dst == cur.dst * cur.size) {
      out.back() = {out.back().size * cur.size, cur.src, cur.dst};
    } else {
      out.push_back(cur);
    }
  }
  return out;
}

// 32-bit indexing needs every offset below 2^31 and the element count well below, so the
// grid-stride increment cannot overflow.
bool needs_wide_index(const CopyLoop& loop) {
  constexpr int64_t kMax = 0x7fffffff;
  constexpr int64_t kMaxCount = int64_t{1} << 30;
  int64_t src_span = 0, dst_span = 0;
  for (int d = 0; d < loop.rank; ++d) {
    src_span += std::llabs(loop.src_strides[d]) * (loop.dims[d] - 1);
    dst_span += std::llabs(loop.dst_strides[d]) * (loop.dims[d] - 1);
  }
  return loop.numel > kMaxCount || src_span > kMax || dst_span > kMax;
}

CopyLoop make_loop(const std::vector<Dim>& dims, int64_t numel, int unit_bytes) {
  CopyLoop loop;
  loop.rank = static_cast<int>(dims.size());
  loop.numel = numel;
  loop.unit_bytes = unit_bytes;
  for (int d = 0; d < loop.rank; ++d) {
    const auto ud = static_cast<size_t>(d);
    loop.dims[d] = dims[ud].size;
    loop.src_strides[d] = dims[ud].src;
    loop.dst_strides[d] = dims[ud].dst;
  }
  loop.wide_index = needs_wide_index(loop);
  return loop;
}

// The widest unit (<= 16 bytes) the innermost run, every outer stride and the source offset
// are multiples of, when the innermost dim is contiguous on both sides; else elem_bytes.
int widest_unit(const std::vector<Dim>& dims, int64_t src_offset_bytes, int elem_bytes) {
  if (dims.empty() || dims.back().src != 1 || dims.back().dst != 1) return elem_bytes;
  for (int unit = 16; unit > elem_bytes; unit /= 2) {
    bool fits = dims.back().size * elem_bytes % unit == 0 && src_offset_bytes % unit == 0;
    for (size_t d = 0; fits && d + 1 < dims.size(); ++d) {
      fits = dims[d].src * elem_bytes % unit == 0 && dims[d].dst * elem_bytes % unit == 0;
    }
    if (fits) return unit;
  }
  return elem_bytes;
}

template <typename Unit, typename Index>
__global__ void strided_copy_kernel(CopyLoop loop, const Unit* __restrict__ src, Unit* __restrict__ dst) {
  const Index n = static_cast<Index>(loop.numel);
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    Index rem = i, s = 0, d = 0;
#pragma unroll
    for (int k = kMaxCopyDims - 1; k >= 0; --k) {
      if (k >= loop.rank) continue;
      const Index size = static_cast<Index>(loop.dims[k]);
      const Index idx = rem % size;
      rem /= size;
      s += idx * static_cast<Index>(loop.src_strides[k]);
      d += idx * static_cast<Index>(loop.dst_strides[k]);
    }
    dst[d] = src[s];
  }
}

template <typename Unit>
void launch_units(const CopyLoop& loop, const void* src, void* dst, cudaStream_t stream) {
  constexpr int kThreads = 256;
  // Enough blocks to fill an H200 many times over; the grid-stride loop covers the rest.
  const int64_t blocks = std::min<int64_t>((loop.numel + kThreads - 1) / kThreads, 8192);
  const auto* s = static_cast<const Unit*>(src);
  auto* d = static_cast<Unit*>(dst);
  if (loop.wide_index) {
    strided_copy_kernel<Unit, int64_t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(loop, s, d);
  } else {
    strided_copy_kernel<Unit, int32_t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(loop, s, d);
  }
}

}  // namespace

Result<StridedCopyPlan> StridedCopyPlan::make(std::span<const int64_t> dims, std::span<const int64_t> src_strides,
                                              std::span<const int64_t> dst_strides, int64_t src_offset, int elem_bytes) {
  if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8) {
    return OG_ERROR("strided copy: no CUDA kernel for ", elem_bytes, "-byte elements");
  }
  int64_t numel = 1;
  for (int64_t d : dims) numel *= d;
  StridedCopyPlan plan;
  plan.src_offset_bytes = src_offset * elem_bytes;
  if (numel == 0) return plan;  // loops of numel 0: nothing to launch
  const std::vector<Dim> merged = merged_dims(dims, src_strides, dst_strides);
  if (merged.size() > static_cast<size_t>(kMaxCopyDims)) {
    return OG_ERROR("strided copy spans ", merged.size(), " dims after merging; the CUDA kernel indexes at most ",
                    kMaxCopyDims);
  }
  plan.narrow = make_loop(merged, numel, elem_bytes);
  const int unit = widest_unit(merged, plan.src_offset_bytes, elem_bytes);
  std::vector<Dim> widened = merged;
  const int64_t scale = unit / elem_bytes;
  for (size_t d = 0; d + 1 < widened.size(); ++d) widened[d].src /= scale, widened[d].dst /= scale;
  if (!widened.empty()) widened.back().size /= scale;
  plan.wide = make_loop(widened, numel / scale, unit);
  return plan;
}

Status launch_strided_copy(const StridedCopyPlan& plan, const void* src, void* dst, void* stream) {
  if (plan.narrow.numel == 0) return Status::ok();
  const auto* s = static_cast<const char*>(src) + plan.src_offset_bytes;
  const auto unit = static_cast<uintptr_t>(plan.wide.unit_bytes);
  const bool aligned = (reinterpret_cast<uintptr_t>(s) % unit == 0) && (reinterpret_cast<uintptr_t>(dst) % unit == 0);
  const CopyLoop& loop = aligned ? plan.wide : plan.narrow;
  const auto cs = static_cast<cudaStream_t>(stream);
  switch (loop.unit_bytes) {
    case 1: launch_units<uint8_t>(loop, s, dst, cs); break;
    case 2: launch_units<uint16_t>(loop, s, dst, cs); break;
    case 4: launch_units<uint32_t>(loop, s, dst, cs); break;
    case 8: launch_units<uint2>(loop, s, dst, cs); break;
    default: launch_units<uint4>(loop, s, dst, cs); break;
  }
  return launch_status("strided copy");
}

}  // namespace onnx_genai::cuda
