// Device-side element types and conversions shared by the CUDA kernels (.cu files only).
// Our DType::kF16 / kBF16 are bit-compatible with __half / __nv_bfloat16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "onnx_genai/dtype.h"

namespace onnx_genai::cuda {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// VEC elements moved as one aligned access (16 bytes when VEC * sizeof(T) == 16).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ void load_floats(const T* p, float (&out)[VEC]) {
  const Pack<T, VEC> pack = *reinterpret_cast<const Pack<T, VEC>*>(p);
#pragma unroll
  for (int i = 0; i < VEC; ++i) out[i] = to_float(pack.v[i]);
}

template <typename T, int VEC>
__device__ __forceinline__ void store_floats(T* p, const float (&in)[VEC]) {
  Pack<T, VEC> pack;
#pragma unroll
  for (int i = 0; i < VEC; ++i) pack.v[i] = from_float<T>(in[i]);
  *reinterpret_cast<Pack<T, VEC>*>(p) = pack;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// A kernel family's element types, and the DType of each device type.
template <typename... Ts> struct TypeList {};
template <typename T> constexpr DType kDTypeOf = DType::kUndefined;
template <> constexpr DType kDTypeOf<float> = DType::kF32;
template <> constexpr DType kDTypeOf<__half> = DType::kF16;
template <> constexpr DType kDTypeOf<__nv_bfloat16> = DType::kBF16;
template <> constexpr DType kDTypeOf<double> = DType::kF64;
template <> constexpr DType kDTypeOf<int8_t> = DType::kI8;
template <> constexpr DType kDTypeOf<uint8_t> = DType::kU8;
template <> constexpr DType kDTypeOf<int32_t> = DType::kI32;
template <> constexpr DType kDTypeOf<int64_t> = DType::kI64;
template <> constexpr DType kDTypeOf<bool> = DType::kBool;

// Calls fn.template operator()<T>() for the T of the list whose DType is `dtype`; false if none.
template <typename... Ts, typename F>
bool dispatch(TypeList<Ts...>, DType dtype, F&& fn) {
  return ((dtype == kDTypeOf<Ts> ? (fn.template operator()<Ts>(), true) : false) || ...);
}

template <typename... Ts>
constexpr bool listed(TypeList<Ts...>, DType dtype) {
  return ((dtype == kDTypeOf<Ts>) || ...);
}

using FloatTypes = TypeList<float, __half, __nv_bfloat16>;

// dispatch over f32, f16 and bf16.
template <typename F>
bool dispatch_float_type(DType dtype, F&& fn) {
  return dispatch(FloatTypes{}, dtype, fn);
}

}  // namespace onnx_genai::cuda
