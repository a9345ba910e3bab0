// Compile-time dtype dispatch for CPU kernels:
//   return dispatch_dtype<float, Float16, BFloat16>(dtype, [&]<typename T>() { ...; return Status::ok(); });
#pragma once

#include <type_traits>
#include <vector>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

template <typename... Ts, typename F>
Status dispatch_dtype(DType dtype, F&& fn) {
  Status result;  // the error is built only on a miss: kernels call this on every run
  const bool matched = ((dtype == DTypeOf<Ts>::value ? (result = fn.template operator()<Ts>(), true) : false) || ...);
  if (!matched) return OG_ERROR("no kernel instantiation for dtype ", dtype_name(dtype));
  return result;
}

// Element access that widens 16-bit floats to f32 and leaves other types alone.
template <typename T> struct Compute { using type = T; };
template <> struct Compute<Float16> { using type = float; };
template <> struct Compute<BFloat16> { using type = float; };
template <typename T> using compute_t = typename Compute<T>::type;

template <typename T>
inline compute_t<T> load(const T& v) { return static_cast<compute_t<T>>(v); }
template <typename T>
inline T store(compute_t<T> v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) return T(v);
  else return static_cast<T>(v);
}

inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> v{DType::kF32, DType::kF16, DType::kBF16, DType::kF64};
  return v;
}
inline const std::vector<DType>& numeric_dtypes() {
  static const std::vector<DType> v{DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI8, DType::kU8,
                                    DType::kI16, DType::kU16, DType::kI32, DType::kU32, DType::kI64, DType::kU64};
  return v;
}

}  // namespace onnx_genai
