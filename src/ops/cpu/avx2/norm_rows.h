// Contiguous f32 row kernels for LayerNormalization / RMSNormalization and the Skip norms' residual
// sum (and f32 Reduce* sums), in an AVX2 and an AVX-512 build (avx2/norm_avx2.cc,
// avx512/norm_avx512.cc) plus a scalar build for CPUs without AVX2 (ops/cpu/normalization.cc).
#pragma once

#include <cstdint>

namespace onnx_genai {

struct NormRowKernels {
  // sum of x[0..n).
  float (*sum)(const float* x, int64_t n);
  // sum of (x[i] - mean)^2 (mean = 0 gives the sum of squares).
  float (*sum_sq_dev)(const float* x, float mean, int64_t n);
  // y[i] = (x[i] - mean) * inv_std * scale[i] (+ bias[i] when bias is non-null).
  void (*affine)(const float* x, float mean, float inv_std, const float* scale, const float* bias, float* y, int64_t n);
  // out[i] = x[i] + skip[i] (+ bias[i] when bias is non-null); out may alias x or skip.
  void (*add)(const float* x, const float* skip, const float* bias, float* out, int64_t n);
};

// The fastest build this CPU runs (AVX-512, AVX2, else scalar); defined in
// ops/cpu/normalization.cc.
const NormRowKernels& best_norm_row_kernels();

namespace avx2 {
const NormRowKernels& norm_row_kernels();
}
namespace avx512 {
const NormRowKernels& norm_row_kernels();
}

}  // namespace onnx_genai
