// Filling a decoder's input tensors in place between runs (decoder_runner.cc, perplexity.cc).
#pragma once

#include <cstdint>

#include "onnx_genai/status.h"
#include "onnx_genai/tensor.h"

namespace onnx_genai::genai {

// `slot` as a tensor of `dtype` and `shape`, keeping its storage when it already fits.
inline Status reuse_tensor(Tensor& slot, DType dtype, const Shape& shape) {
  if (slot.defined() && slot.dtype() == dtype && slot.shape() == shape) return Status::ok();
  OG_ASSIGN_OR_RETURN(slot, Tensor::allocate(dtype, shape));
  return Status::ok();
}

// Element `index` of an int64 or int32 tensor (the integer inputs decoder_io.cc admits).
inline void set_integer(Tensor& t, int64_t index, int64_t value) {
  if (t.dtype() == DType::kI64) {
    t.data<int64_t>()[index] = value;
  } else {
    t.data<int32_t>()[index] = static_cast<int32_t>(value);
  }
}

}  // namespace onnx_genai::genai
