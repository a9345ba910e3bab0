// Contiguous f32 row kernels for Softmax / LogSoftmax (and ReduceLogSumExp, ReduceMax), in an AVX2 and an
// AVX-512 build (avx2/softmax_avx2.cc, avx512/softmax_avx512.cc) plus a scalar build for CPUs
// without AVX2 (ops/cpu/softmax.cc).
#pragma once

#include <cstdint>

namespace onnx_genai {

struct SoftmaxRowKernels {
  // max(x[0..n)), n >= 1.
  float (*max)(const float* x, int64_t n);
  // y[i] = exp(x[i] - shift) when y is non-null; returns the sum of exp(x[i] - shift).
  float (*exp_sum)(const float* x, float shift, float* y, int64_t n);
  // y[i] = x[i] * s (in place allowed).
  void (*scale)(const float* x, float s, float* y, int64_t n);
  // y[i] = x[i] + c (in place allowed).
  void (*add)(const float* x, float c, float* y, int64_t n);
  // y[i] = exp(x[i] - shift[i]): one exp per column of a tile of columns (softmax along an
  // outer axis).
  void (*exp_shifted)(const float* x, const float* shift, float* y, int64_t n);
};

// The fastest build this CPU runs (AVX-512, AVX2, else scalar); defined in ops/cpu/softmax.cc.
const SoftmaxRowKernels& best_softmax_row_kernels();

namespace avx2 {
const SoftmaxRowKernels& softmax_row_kernels();
}
namespace avx512 {
const SoftmaxRowKernels& softmax_row_kernels();
}

}  // namespace onnx_genai
