#include "onnx_genai/tensor.h"

#include <cstring>

namespace onnx_genai {

Result<Tensor> Tensor::allocate(DType dtype, Shape shape, Allocator& allocator) {
  for (int64_t d : shape.dims()) {
    if (d < 0) return OG_ERROR("cannot allocate tensor of shape ", shape.to_string(), ": negative dimension");
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.device_ = allocator.device();
  const int64_t bytes = t.nbytes();
  void* data = allocator.allocate(static_cast<size_t>(bytes));
  if (data == nullptr) {
    return OG_ERROR("out of memory allocating ", bytes, " bytes on ", t.device_.to_string());
  }
  if (t.device_.type == DeviceType::kCpu) std::memset(data, 0, static_cast<size_t>(bytes));
  Allocator* owner_allocator = &allocator;
  t.data_ = data;
  t.owner_ = std::shared_ptr<const void>(data, [owner_allocator](const void* p) {
    owner_allocator->deallocate(const_cast<void*>(p));
  });
  return t;
}

Tensor Tensor::view(DType dtype, Shape shape, void* data, std::shared_ptr<const void> owner, Device device) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.device_ = device;
  t.owner_ = std::move(owner);
  return t;
}

Result<Tensor> Tensor::reshaped(Shape shape) const {
  if (shape.numel() != numel()) {
    return OG_ERROR("cannot reshape ", shape_.to_string(), " to ", shape.to_string());
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Result<Tensor> Tensor::clone() const {
  OG_ASSIGN_OR_RETURN(Tensor t, allocate(dtype_, shape_));
  if (nbytes() > 0) std::memcpy(t.data_, data_, static_cast<size_t>(nbytes()));
  return t;
}

std::vector<int64_t> Tensor::to_i64_vector() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (dtype_) {
      case DType::kI64: out[i] = data<int64_t>()[i]; break;
      case DType::kI32: out[i] = data<int32_t>()[i]; break;
      case DType::kI16: out[i] = data<int16_t>()[i]; break;
      case DType::kI8: out[i] = data<int8_t>()[i]; break;
      case DType::kU8: case DType::kBool: out[i] = data<uint8_t>()[i]; break;
      case DType::kU16: out[i] = data<uint16_t>()[i]; break;
      case DType::kU32: out[i] = data<uint32_t>()[i]; break;
      case DType::kU64: out[i] = static_cast<int64_t>(data<uint64_t>()[i]); break;
      default: out[i] = 0; break;
    }
  }
  return out;
}

}  // namespace onnx_genai
