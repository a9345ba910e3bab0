// Shared by the files of the 4-bit MatMulNBits kernels (quantized_matmul_kernels.cu: planning and
// the tensor-core kernel; quantized_matmul_cuda_core.cu: the CUDA-core kernel): how outputs are
// written, epilogues included, so both kernels write them alike. .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda/device_types.cuh"
#include "ops/cuda/quantized_matmul_kernels.h"

namespace onnx_genai::cuda::nbits4 {

template <int V>
using Int = std::integral_constant<int, V>;

inline bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Column n's sum (+ bias) in f32.
template <typename T>
__device__ __forceinline__ float with_bias(const MatMulNBits4Args& p, int64_t n, float sum) {
  return sum + (p.bias != nullptr ? to_float(static_cast<const T*>(p.bias)[n]) : 0.0f);
}

// Writes y[m][n] (+ bias) where (n, m) is inside the output.
template <typename T>
__device__ __forceinline__ void store_output(const MatMulNBits4Args& p, int64_t n, int64_t m, float sum) {
  if (n < p.n && m < p.m) static_cast<T*>(p.y)[m * p.n + n] = from_float<T>(with_bias<T>(p, n, sum));
}

// silu(gate) * up in f32.
__device__ __forceinline__ float silu_product(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// The SwiGLU epilogue of columns n (even: gate) and n + 1 (up) where they are inside the output:
// both rounded to T as the unfused projections' outputs are, then one rounding of the product.
template <typename T>
__device__ __forceinline__ void store_swiglu(const MatMulNBits4Args& p, int64_t n, int64_t m, float gate_sum,
                                             float up_sum) {
  if (n >= p.n || m >= p.m) return;
  const float gate = to_float(from_float<T>(with_bias<T>(p, n, gate_sum)));
  const float up = to_float(from_float<T>(with_bias<T>(p, n + 1, up_sum)));
  static_cast<T*>(p.y)[m * (p.n / 2) + n / 2] = from_float<T>(silu_product(gate, up));
}

// Queues the CUDA-core kernel (any M, 4- or 8-bit codes: quantized_matmul_cuda_core.cu) for `p` on `s`.
Status launch_cuda_core(const MatMulNBits4Args& p, int bits, cudaStream_t s);

// The many-row tensor-core kernel (quantized_matmul_many_rows.cu: 4-bit codes, M = 17..64, f16 /
// bf16 activations, no float zero points, the tensor-core kernel's layout rules): picks the blocks
// splitting K (or takes `forced_splits`) and the workspace; then queues it for `p` on `s`.
Status plan_many_rows(MatMulNBits4Args& p, int forced_splits);
Status launch_many_rows(const MatMulNBits4Args& p, cudaStream_t s);

}  // namespace onnx_genai::cuda::nbits4
