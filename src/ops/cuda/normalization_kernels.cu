// RMS norm (SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization) on the GPU.
//
// Memory-access plan: one block per row, blockDim.x = len / VEC rounded up to a warp (at most
// 1024). Each thread moves VEC elements per access, 16 bytes (VEC = 4 for f32, 8 for 16-bit
// types) when len, the parameter periods and every pointer allow, else one element. Two passes
// over the row: the first forms s = x + skip + skip_bias and reduces sum(s^2) in f32 (warp
// shuffles, then one shared-memory slot per warp); the second re-forms s (the row, at most a few
// tens of KiB, is still in L1/L2, so DRAM sees x and skip once) and writes y and the optional
// sum. scale / bias are read by every row and stay in L2. Launched as a programmatic dependent
// of the previous kernel (dependent_launch.cuh): a decode step's one-row norm is a few
// microseconds, about as long as the launch gap it hides.
#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/normalization_kernels.h"

namespace onnx_genai::cuda {

namespace {

// Sum over the block of one value per thread; every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : 0.0f;
  return warp_sum(v);
}

// s = x (+ skip) (+ skip_bias) for elements [j, j + VEC) of row `row`.
template <typename T, int VEC>
__device__ __forceinline__ void load_sum(const RmsNormArgs& a, int64_t row, int64_t j, float (&s)[VEC]) {
  load_floats<T, VEC>(static_cast<const T*>(a.x) + row * a.len + j, s);
  if (a.skip != nullptr) {
    float t[VEC];
    load_floats<T, VEC>(static_cast<const T*>(a.skip) + (row % a.skip_rows) * a.len + j, t);
#pragma unroll
    for (int i = 0; i < VEC; ++i) s[i] += t[i];
  }
  if (a.skip_bias != nullptr) {
    float t[VEC];
    load_floats<T, VEC>(static_cast<const T*>(a.skip_bias) + j, t);
#pragma unroll
    for (int i = 0; i < VEC; ++i) s[i] += t[i];
  }
}

template <typename T, int VEC>
__global__ void rms_norm_kernel(RmsNormArgs a) {
  const int64_t row = blockIdx.x;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * VEC;
  wait_for_prior_grid();
  float sum_sq = 0.0f;
  for (int64_t j = threadIdx.x * VEC; j < a.len; j += stride) {
    float s[VEC];
    load_sum<T, VEC>(a, row, j, s);
#pragma unroll
    for (int i = 0; i < VEC; ++i) sum_sq += s[i] * s[i];
  }
  sum_sq = block_sum(sum_sq);
  allow_next_grid();  // the next kernel may start reading its weights during the second pass
  const float inv_std = 1.0f / sqrtf(sum_sq / static_cast<float>(a.len) + a.epsilon);
  if (threadIdx.x == 0) {
    if (a.mean != nullptr) a.mean[row] = 0.0f;
    if (a.inv_std != nullptr) a.inv_std[row] = inv_std;
  }
  for (int64_t j = threadIdx.x * VEC; j < a.len; j += stride) {
    float s[VEC], scale[VEC], y[VEC];
    load_sum<T, VEC>(a, row, j, s);
    if (a.sum != nullptr) store_floats<T, VEC>(static_cast<T*>(a.sum) + row * a.len + j, s);
    load_floats<T, VEC>(static_cast<const T*>(a.scale) + j % a.scale_period, scale);
#pragma unroll
    for (int i = 0; i < VEC; ++i) y[i] = s[i] * inv_std * scale[i];
    if (a.bias != nullptr) {
      float bias[VEC];
      load_floats<T, VEC>(static_cast<const T*>(a.bias) + j % a.bias_period, bias);
#pragma unroll
      for (int i = 0; i < VEC; ++i) y[i] += bias[i];
    }
    store_floats<T, VEC>(static_cast<T*>(a.y) + row * a.len + j, y);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// 16-byte accesses are safe when every row start and period boundary stays 16-byte aligned.
bool can_vectorize(const RmsNormArgs& a, int vec) {
  const bool sizes = a.len % vec == 0 && a.scale_period % vec == 0 && (a.bias == nullptr || a.bias_period % vec == 0);
  return sizes && aligned16(a.x) && aligned16(a.y) && aligned16(a.scale) && (a.skip == nullptr || aligned16(a.skip)) &&
         (a.skip_bias == nullptr || aligned16(a.skip_bias)) && (a.bias == nullptr || aligned16(a.bias)) &&
         (a.sum == nullptr || aligned16(a.sum));
}

template <typename T, int VEC>
cudaError_t launch(const RmsNormArgs& a, cudaStream_t stream) {
  const int64_t threads = std::clamp<int64_t>((a.len / VEC + 31) / 32 * 32, 32, 1024);
  return launch_kernel(rms_norm_kernel<T, VEC>, dim3(static_cast<unsigned>(a.rows)),
                       dim3(static_cast<unsigned>(threads)), 0, stream, dependent_launch_allowed(), a);
}

}  // namespace

Status launch_rms_norm(const RmsNormArgs& a, void* stream) {
  if (a.rows == 0 || a.len == 0) return Status::ok();
  if (a.rows > 0x7fffffff) return OG_ERROR("RMS norm: ", a.rows, " rows exceed one grid dimension");
  if (a.scale_period <= 0 || a.skip_rows <= 0 || (a.bias != nullptr && a.bias_period <= 0)) {
    return OG_ERROR("RMS norm: invalid scale/bias period or skip rows");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  cudaError_t launched = cudaSuccess;
  const bool known = dispatch_float_type(a.dtype, [&]<typename T>() {
    constexpr int kVec = 16 / sizeof(T);
    launched = can_vectorize(a, kVec) ? launch<T, kVec>(a, s) : launch<T, 1>(a, s);
  });
  if (!known) return OG_ERROR("RMS norm: unsupported dtype ", dtype_name(a.dtype));
  return cuda_status(launched, "rms_norm_kernel launch");
}

}  // namespace onnx_genai::cuda
