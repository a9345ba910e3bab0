// ReduceMean on the GPU (see mean_kernels.h).
//
// Memory-access plan: inner == 1 (the RMS-norm decomposition's mean over the hidden dim) takes
// one block per row, blockDim.x = len rounded up to a warp (at most 1024), strided f32 partial
// sums reduced by warp shuffles and one shared-memory slot per warp. inner > 1 takes one thread
// per (outer, inner) column walking the reduced axis; adjacent threads read adjacent columns.
#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/mean_kernels.h"

namespace onnx_genai::cuda {

namespace {

template <typename T>
__global__ void mean_rows_kernel(MeanArgs a) {
  __shared__ float partial[32];
  const T* x = static_cast<const T*>(a.x) + static_cast<int64_t>(blockIdx.x) * a.len;
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < a.len; j += blockDim.x) sum += to_float(x[j]);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  sum = warp_sum(sum);
  if (lane == 0) partial[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    sum = warp_sum(lane < warps ? partial[lane] : 0.0f);
    if (lane == 0) static_cast<T*>(a.y)[blockIdx.x] = from_float<T>(sum / static_cast<float>(a.count));
  }
}

template <typename T>
__global__ void mean_columns_kernel(MeanArgs a) {
  const int64_t column = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (column >= a.outer * a.inner) return;
  const int64_t o = column / a.inner, j = column % a.inner;
  const T* x = static_cast<const T*>(a.x) + o * a.len * a.inner + j;
  float sum = 0.0f;
  for (int64_t r = 0; r < a.len; ++r) sum += to_float(x[r * a.inner]);
  static_cast<T*>(a.y)[column] = from_float<T>(sum / static_cast<float>(a.count));
}

}  // namespace

bool mean_supported(DType dtype) { return listed(FloatTypes{}, dtype); }

Status launch_mean(const MeanArgs& a, void* stream) {
  if (a.outer * a.inner == 0) return Status::ok();
  if (a.outer > 0x7fffffff || a.outer * a.inner / 256 > 0x7fffffff) {
    return OG_ERROR("mean: ", a.outer, " rows exceed one grid dimension");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  const bool known = dispatch_float_type(a.dtype, [&]<typename T>() {
    if (a.inner == 1) {
      const int threads = static_cast<int>(std::clamp<int64_t>((a.len + 31) / 32 * 32, 32, 1024));
      mean_rows_kernel<T><<<static_cast<unsigned>(a.outer), threads, 0, s>>>(a);
    } else {
      constexpr int kThreads = 256;
      const int64_t blocks = (a.outer * a.inner + kThreads - 1) / kThreads;
      mean_columns_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(a);
    }
  });
  if (!known) return OG_ERROR("mean: unsupported dtype ", dtype_name(a.dtype));
  return launch_status("mean");
}

}  // namespace onnx_genai::cuda
