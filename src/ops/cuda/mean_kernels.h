// Launch interface of the CUDA ReduceMean pass (mean_kernels.cu). No CUDA headers needed.
//
// One pass of the CPU kernel's (ops/cpu/reduce.cc) reduction plan: x viewed as [outer, len,
// inner], y[o, j] = (Σ_r x[o, r, j]) / count, summed in f32 and rounded to the dtype (f32, f16,
// bf16). `count` is the number of reduced elements (len, or 1 for a no-op reduction).
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

struct MeanArgs {
  DType dtype = DType::kF32;
  int64_t outer = 0, len = 0, inner = 1;
  int64_t count = 1;
  const void* x = nullptr;
  void* y = nullptr;
};

bool mean_supported(DType dtype);
Status launch_mean(const MeanArgs& args, void* stream);

}  // namespace onnx_genai::cuda
