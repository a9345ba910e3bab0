// RotaryEmbedding on the GPU (see rotary_kernels.h), rounding as the CPU's rotate_head does
// (ops/cpu/rotary_rows.h): each pair in f32 by the GroupQueryAttention kernels' rotate_pair.
//
// Memory-access plan: one thread per work item, grid-stride. A head vector of head_size elements
// has half = rotary_dim / 2 rotary pairs and head_size - rotary_dim elements past them, so
// width = head_size - half items; item k < half rotates pair k (reads x[ia], x[ib] and element k
// of the token's cos and sin rows, writes y[ia], y[ib]), item k >= half copies element k + half.
// Items are numbered [B * S * heads vectors, width] with a vector's items adjacent:
//
//   vector v (token v / heads, head v % heads):  | pair 0 .. half-1 | copy rotary_dim .. head_size-1 |
//
// so a warp reads a head's pairs (rotate-half: two contiguous runs; interleaved: one) and its
// cache rows contiguously. A pair belongs to one thread, which reads both elements before writing
// either: y may alias x. A decode step is a few thousand items, a prefill millions.
#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/attention_device.cuh"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/rotary_kernels.h"

namespace onnx_genai::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;  // the grid-stride loop covers the rest

// The cache row of token b * S + s (see RotaryPositions), clamped into the cache.
__device__ __forceinline__ int64_t cache_row(const RotaryArgs& a, int64_t token) {
  int64_t row = token;
  if (a.positions == RotaryPositions::kBase) row = a.position_ids[0] + token % a.seq;
  if (a.positions == RotaryPositions::kPerToken) row = a.position_ids[token];
  return imin(imax(row, 0), a.cache_rows - 1);
}

template <typename T>
__global__ void rotary_kernel(RotaryArgs a) {
  const int64_t half = a.rotary_dim / 2;
  const int64_t width = a.head_size - half;
  const int64_t total = a.batch * a.seq * a.heads * width;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; item < total; item += step) {
    const int64_t vector = item / width, k = item % width;
    const int64_t token = vector / a.heads, head = vector % a.heads;  // token = b * S + s
    const int64_t offset = a.heads_first ? ((token / a.seq * a.heads + head) * a.seq + token % a.seq) * a.head_size
                                         : vector * a.head_size;
    const T* x = static_cast<const T*>(a.x) + offset;
    T* y = static_cast<T*>(a.y) + offset;
    if (k >= half) {
      y[k + half] = x[k + half];
      continue;
    }
    const int64_t at = cache_row(a, token) * half + k;
    int64_t ia, ib;
    rotary_pair(k, a.rotary_dim, a.interleaved, ia, ib);
    float ya, yb;
    rotate_pair(to_float(x[ia]), to_float(x[ib]), to_float(static_cast<const T*>(a.cos)[at]),
                to_float(static_cast<const T*>(a.sin)[at]), ya, yb);
    y[ia] = from_float<T>(ya);
    y[ib] = from_float<T>(yb);
  }
}

}  // namespace

Status launch_rotary(const RotaryArgs& a, void* stream) {
  const int64_t half = a.rotary_dim / 2;
  const int64_t total = a.batch * a.seq * a.heads * (a.head_size - half);
  if (total == 0) return Status::ok();
  if (a.rotary_dim % 2 != 0 || a.rotary_dim > a.head_size || a.cache_rows <= 0 ||
      (a.positions != RotaryPositions::kGathered && a.position_ids == nullptr)) {
    return OG_ERROR("RotaryEmbedding: invalid arguments (rotary_dim ", a.rotary_dim, ", head_size ", a.head_size,
                    ", ", a.cache_rows, " cache rows)");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, kMaxBlocks));
  const bool known =
      dispatch_float_type(a.dtype, [&]<typename T>() { rotary_kernel<T><<<blocks, kThreads, 0, s>>>(a); });
  if (!known) return OG_ERROR("RotaryEmbedding: unsupported dtype ", dtype_name(a.dtype));
  return launch_status("rotary_kernel");
}

}  // namespace onnx_genai::cuda
