// Launch interface of the CUDA RMS-norm kernel (normalization_kernels.cu), shared by
// SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization. No CUDA headers needed.
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// Per row r of x [rows, len]:  s = x[r] (+ skip[r % skip_rows]) (+ skip_bias)
//   y[r] = s * inv_std * scale (+ bias),  inv_std = 1 / sqrt(mean(s^2) + epsilon)
// scale and bias repeat with their periods (dividing len). Optional outputs (null when not
// wanted): sum = s in x's dtype, mean = 0 (the simplified norm is uncentred), inv_std.
// All pointers are device pointers of `dtype` except mean / inv_std (f32).
struct RmsNormArgs {
  DType dtype = DType::kF32;
  int64_t rows = 0, len = 0;
  const void* x = nullptr;
  const void* skip = nullptr;
  int64_t skip_rows = 1;
  const void* skip_bias = nullptr;
  const void* scale = nullptr;
  int64_t scale_period = 0;
  const void* bias = nullptr;
  int64_t bias_period = 0;
  float epsilon = 1e-5f;
  void* y = nullptr;
  void* sum = nullptr;
  float* mean = nullptr;
  float* inv_std = nullptr;
};

// Queues the kernel on `stream` (a cudaStream_t); no allocation, no synchronisation.
Status launch_rms_norm(const RmsNormArgs& args, void* stream);

}  // namespace onnx_genai::cuda
