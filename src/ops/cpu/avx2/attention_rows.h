// f32 inner loops of the attention core (ops/cpu/attention_core.cc), one table per instruction
// set: AVX2 (avx2/attention_avx2.cc), AVX-512 (avx512/attention_avx512.cc) and the scalar
// reference (attention_core.cc). Keys and values are rows of `d` floats, `stride` floats apart.
#pragma once

#include <cstdint>

namespace onnx_genai {

// Query vectors one tile call serves: each key (value) row loaded is used by all of them.
inline constexpr int kQueryTile = 4;

struct AttentionRowKernels {
  // scores[j] = dot(q[0..d), k + j * stride), j < n.
  void (*dot_rows)(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float* scores);
  // acc[0..d) = acc * correction + sum_j p[j] * (v + j * stride)[0..d), j < n.
  void (*accumulate_rows)(const float* p, const float* v, int64_t stride, int64_t n, int64_t d, float correction,
                          float* acc);
  // max of x[0..n), n >= 1.
  float (*row_max)(const float* x, int64_t n);
  // x[j] = exp(x[j] - shift) in place; returns the sum (exp(-inf) is exactly 0).
  float (*exp_sum)(float* x, int64_t n, float shift);
  // dot_rows for kQueryTile query vectors at once: scores[r][j] = dot(q[r], k + j * stride).
  void (*dot_rows_tile)(const float* const* q, const float* k, int64_t stride, int64_t n, int64_t d,
                        float* const* scores);
  // accumulate_rows for kQueryTile outputs at once, each with its own p and correction.
  void (*accumulate_rows_tile)(const float* const* p, const float* v, int64_t stride, int64_t n, int64_t d,
                               const float* correction, float* const* acc);
  // memcpy with non-temporal stores (ordered by a store fence before returning): for data this
  // thread will not read back soon, so the writes skip the read-for-ownership and keep the
  // caches for what is read next.
  void (*stream_copy)(const void* src, void* dst, int64_t bytes);
};

// The fastest table this CPU runs (AVX-512, AVX2, else scalar); defined in attention_core.cc.
const AttentionRowKernels& best_attention_row_kernels();
const AttentionRowKernels& scalar_attention_row_kernels();

namespace avx2 {
const AttentionRowKernels& attention_row_kernels();
}
namespace avx512 {
const AttentionRowKernels& attention_row_kernels();
}

}  // namespace onnx_genai
