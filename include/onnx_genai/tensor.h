// A typed, shaped view of memory plus (optionally) an owner that keeps that memory alive.
// Tensors are cheap to copy: copies share storage. Initializers point into the mapped model
// file; plan intermediates point into the session arena and own nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "onnx_genai/device.h"
#include "onnx_genai/dtype.h"
#include "onnx_genai/shape.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-filled storage from `allocator` (CPU by default).
  static Result<Tensor> allocate(DType dtype, Shape shape, Allocator& allocator = cpu_allocator());
  // Wraps memory owned elsewhere; `owner` (may be null) is kept alive as long as the tensor.
  static Tensor view(DType dtype, Shape shape, void* data, std::shared_ptr<const void> owner = nullptr,
                     Device device = Device::cpu());
  // Host tensor holding a copy of `values` (tests, constants, shape values).
  template <typename T>
  static Tensor from_vector(Shape shape, std::span<const T> values);
  template <typename T>
  static Tensor from_vector(Shape shape, const std::vector<T>& values) {
    return from_vector<T>(std::move(shape), std::span<const T>(values));
  }
  static Tensor scalar_i64(int64_t v) { return from_vector<int64_t>(Shape{}, std::vector<int64_t>{v}); }

  bool defined() const { return dtype_ != DType::kUndefined; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t numel() const { return shape_.numel(); }
  int64_t nbytes() const { return dtype_storage_bytes(dtype_, numel()); }
  Device device() const { return device_; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T> T* data() { return static_cast<T*>(data_); }
  template <typename T> const T* data() const { return static_cast<const T*>(data_); }

  // Same storage, new shape of equal element count.
  Result<Tensor> reshaped(Shape shape) const;
  // Deep copy into fresh host storage.
  Result<Tensor> clone() const;
  // Integer tensor (any int width) read as int64 values; for shape-like inputs.
  std::vector<int64_t> to_i64_vector() const;

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  void* data_ = nullptr;
  Device device_;
  std::shared_ptr<const void> owner_;
};

template <typename T>
Tensor Tensor::from_vector(Shape shape, std::span<const T> values) {
  auto result = allocate(DTypeOf<T>::value, std::move(shape));
  Tensor t = std::move(result).value();  // host allocation of a small vector
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

}  // namespace onnx_genai
