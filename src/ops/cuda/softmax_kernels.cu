// Softmax / LogSoftmax on the GPU (see softmax_kernels.h).
//
// Memory-access plan: inner == 1 (the axis is the last dim: attention scores, logits) takes one
// block per row, blockDim.x = len rounded up to a warp (at most 1024), three passes over the row
// (max, sum of exps, write) with warp-shuffle + shared-memory block reductions; after the first
// pass the row is in L1/L2, so DRAM sees it about once. inner > 1 takes one thread per
// (outer, inner) column walking the axis; adjacent threads read adjacent columns (coalesced).
#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/softmax_kernels.h"

namespace onnx_genai::cuda {

namespace {

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The block-wide max (Max) or sum of one value per thread; every thread gets the result. The
// leading barrier lets consecutive calls reuse the shared slots.
template <bool Max>
__device__ float block_reduce(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = Max ? warp_max(v) : warp_sum(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const float identity = Max ? -INFINITY : 0.0f;
  v = lane < warps ? partial[lane] : identity;
  return Max ? warp_max(v) : warp_sum(v);
}

// fmaxf skips NaN as the CPU's max does; a NaN anywhere in a row makes its sum, hence the whole
// row, NaN on both sides.
template <typename T, bool Log>
__global__ void softmax_rows_kernel(SoftmaxArgs a) {
  const T* x = static_cast<const T*>(a.x) + static_cast<int64_t>(blockIdx.x) * a.len;
  T* y = static_cast<T*>(a.y) + static_cast<int64_t>(blockIdx.x) * a.len;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < a.len; j += blockDim.x) m = fmaxf(m, to_float(x[j]));
  m = block_reduce<true>(m);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < a.len; j += blockDim.x) sum += expf(to_float(x[j]) - m);
  sum = block_reduce<false>(sum);
  const float k = Log ? m + logf(sum) : 1.0f / sum;
  for (int64_t j = threadIdx.x; j < a.len; j += blockDim.x) {
    const float v = to_float(x[j]);
    y[j] = from_float<T>(Log ? v - k : expf(v - m) * k);
  }
}

template <typename T, bool Log>
__global__ void softmax_columns_kernel(SoftmaxArgs a) {
  const int64_t column = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (column >= a.outer * a.inner) return;
  const int64_t o = column / a.inner, j = column % a.inner;
  const T* x = static_cast<const T*>(a.x) + o * a.len * a.inner + j;
  T* y = static_cast<T*>(a.y) + o * a.len * a.inner + j;
  float m = -INFINITY;
  for (int64_t r = 0; r < a.len; ++r) m = fmaxf(m, to_float(x[r * a.inner]));
  float sum = 0.0f;
  for (int64_t r = 0; r < a.len; ++r) sum += expf(to_float(x[r * a.inner]) - m);
  const float k = Log ? m + logf(sum) : 1.0f / sum;
  for (int64_t r = 0; r < a.len; ++r) {
    const float v = to_float(x[r * a.inner]);
    y[r * a.inner] = from_float<T>(Log ? v - k : expf(v - m) * k);
  }
}

template <typename T, bool Log>
void launch(const SoftmaxArgs& a, cudaStream_t stream) {
  if (a.inner == 1) {
    const int threads = static_cast<int>(std::min<int64_t>(1024, (a.len + 31) / 32 * 32));
    softmax_rows_kernel<T, Log><<<static_cast<unsigned>(a.outer), threads, 0, stream>>>(a);
  } else {
    constexpr int kThreads = 256;
    const int64_t blocks = (a.outer * a.inner + kThreads - 1) / kThreads;
    softmax_columns_kernel<T, Log><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  }
}

}  // namespace

bool softmax_supported(DType dtype) { return listed(FloatTypes{}, dtype); }

Status launch_softmax(const SoftmaxArgs& a, void* stream) {
  if (a.outer * a.len * a.inner == 0) return Status::ok();
  if (a.outer > 0x7fffffff || a.outer * a.inner / 256 > 0x7fffffff) {
    return OG_ERROR("softmax: ", a.outer, " rows exceed one grid dimension");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  const bool known = dispatch_float_type(a.dtype, [&]<typename T>() {
    if (a.log) launch<T, true>(a, s);
    else launch<T, false>(a, s);
  });
  if (!known) return OG_ERROR("softmax: unsupported dtype ", dtype_name(a.dtype));
  return launch_status("softmax");
}

}  // namespace onnx_genai::cuda
