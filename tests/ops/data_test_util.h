// Helpers shared by the data-movement op tests (shape, gather, concat_split, slice, layout,
// generator): small tensor builders (values_of is in ops/op_test_util.h).
#pragma once

#include <numeric>
#include <vector>

#include "onnx_genai/tensor.h"

namespace onnx_genai::testing {

// 0, 1, 2, ... of type T in `shape`.
template <typename T>
Tensor iota_tensor(Shape shape) {
  std::vector<T> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(i);
  return Tensor::from_vector<T>(std::move(shape), v);
}

// A 1-D int64 tensor (shape-like inputs: axes, starts, repeats...).
inline Tensor i64s(std::vector<int64_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<int64_t>(Shape{n}, v);
}

inline Tensor i64_scalar(int64_t v) { return Tensor::scalar_i64(v); }

}  // namespace onnx_genai::testing
