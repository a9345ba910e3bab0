// Filling a decoder's input tensors in place between runs, and reading its logits (decoder_runner.cc,
// perplexity.cc, the serving engine's runner).
#pragma once

#include <cstdint>
#include <vector>

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

// Logits [offset, offset + vocab) of a host f32, f16 or bf16 tensor, as floats in `out`.
inline void read_logit_row(const Tensor& logits, int64_t offset, int64_t vocab, std::vector<float>& out) {
  out.resize(static_cast<size_t>(vocab));
  const auto widen = [&](const auto* row) {
    for (int64_t i = 0; i < vocab; ++i) out[static_cast<size_t>(i)] = static_cast<float>(row[i]);
  };
  switch (logits.dtype()) {
    case DType::kF16: widen(logits.data<Float16>() + offset); break;
    case DType::kBF16: widen(logits.data<BFloat16>() + offset); break;
    default: widen(logits.data<float>() + offset); break;
  }
}

}  // namespace onnx_genai::genai
