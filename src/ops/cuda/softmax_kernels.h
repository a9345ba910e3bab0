// Launch interface of the CUDA Softmax / LogSoftmax (softmax_kernels.cu). No CUDA headers needed.
//
// Semantics are the CPU kernel's (ops/cpu/softmax.cc) over x viewed as [outer, len, inner]:
// per (outer, inner) column m = max, s = sum exp(x - m), both in f32; Softmax writes
// exp(x - m) * (1 / s), LogSoftmax x - (m + log s), rounded to the dtype (f32, f16, bf16).
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

struct SoftmaxArgs {
  DType dtype = DType::kF32;
  bool log = false;  // LogSoftmax
  int64_t outer = 0, len = 0, inner = 1;
  const void* x = nullptr;
  void* y = nullptr;
};

bool softmax_supported(DType dtype);
Status launch_softmax(const SoftmaxArgs& args, void* stream);

}  // namespace onnx_genai::cuda
