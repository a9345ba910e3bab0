// The QGemmKernels implementation (qgemm_kernels.h), compiled once per instruction set: the
// vector width follows the flags of the including translation unit (AVX-512: 16 lanes, AVX2:
// 8, none: scalar). The GEMV accumulates codes times activations per block, then applies the
// block's scale once and its zero point through the activation block sum:
//   sum_k a_k (q_k - z) s = s * (sum_k a_k q_k - z * sum_k a_k)
// so the inner loop is one convert and one FMA per weight.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>

#include "ops/cpu/avx2/qgemm_kernels.h"

namespace onnx_genai::qgemm_detail {
namespace {

#if defined(__AVX512F__)
constexpr int64_t kW = 16;
using VecF = __m512;
inline VecF vzero() { return _mm512_setzero_ps(); }
inline VecF vload(const float* p) { return _mm512_loadu_ps(p); }
inline void vstore(float* p, VecF v) { _mm512_storeu_ps(p, v); }
inline VecF vsplat(float x) { return _mm512_set1_ps(x); }
inline VecF vfma(VecF a, VecF b, VecF c) { return _mm512_fmadd_ps(a, b, c); }
inline VecF vsub(VecF a, VecF b) { return _mm512_sub_ps(a, b); }
inline VecF vadd(VecF a, VecF b) { return _mm512_add_ps(a, b); }
inline VecF vmul(VecF a, VecF b) { return _mm512_mul_ps(a, b); }
inline float vsum(VecF v) { return _mm512_reduce_add_ps(v); }
// 16 four-bit codes from 8 bytes, low nibble first.
inline VecF codes4(const uint8_t* p) {
  const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(x, mask), hi = _mm_and_si128(_mm_srli_epi16(x, 4), mask);
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)));
}
inline VecF codes8(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
#elif defined(__AVX2__)
constexpr int64_t kW = 8;
using VecF = __m256;
inline VecF vzero() { return _mm256_setzero_ps(); }
inline VecF vload(const float* p) { return _mm256_loadu_ps(p); }
inline void vstore(float* p, VecF v) { _mm256_storeu_ps(p, v); }
inline VecF vsplat(float x) { return _mm256_set1_ps(x); }
inline VecF vfma(VecF a, VecF b, VecF c) { return _mm256_fmadd_ps(a, b, c); }
inline VecF vsub(VecF a, VecF b) { return _mm256_sub_ps(a, b); }
inline VecF vadd(VecF a, VecF b) { return _mm256_add_ps(a, b); }
inline VecF vmul(VecF a, VecF b) { return _mm256_mul_ps(a, b); }
inline float vsum(VecF v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// 8 four-bit codes from 4 bytes, low nibble first.
inline VecF codes4(const uint8_t* p) {
  int32_t word;
  __builtin_memcpy(&word, p, sizeof(word));
  const __m128i x = _mm_cvtsi32_si128(word);
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(x, mask), hi = _mm_and_si128(_mm_srli_epi16(x, 4), mask);
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)));
}
inline VecF codes8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
#else
constexpr int64_t kW = 1;
using VecF = float;
inline VecF vzero() { return 0.0f; }
inline VecF vload(const float* p) { return *p; }
inline void vstore(float* p, VecF v) { *p = v; }
inline VecF vsplat(float x) { return x; }
inline VecF vfma(VecF a, VecF b, VecF c) { return a * b + c; }
inline VecF vsub(VecF a, VecF b) { return a - b; }
inline VecF vadd(VecF a, VecF b) { return a + b; }
inline VecF vmul(VecF a, VecF b) { return a * b; }
inline float vsum(VecF v) { return v; }
#endif

// Code j of a block.
inline float code_at(const uint8_t* block, int64_t j, int64_t bits) {
  if (bits == 8) return static_cast<float>(block[j]);
  return static_cast<float>((block[j / 2] >> (4 * (j & 1))) & 0x0F);
}

// Byte offset of code j (j a multiple of kW, and even for 4-bit).
template <int kBits>
inline const uint8_t* code_ptr(const uint8_t* block, int64_t j) { return block + j * kBits / 8; }

template <int kBits>
inline VecF load_codes(const uint8_t* block, int64_t j) {
#if defined(__AVX2__)
  if constexpr (kBits == 4) return codes4(code_ptr<4>(block, j));
  else return codes8(code_ptr<8>(block, j));
#else
  return code_at(block, j, kBits);
#endif
}

template <int kBits>
void gemv_rows(const QWeights& w, const float* a, const float* block_sums, int64_t n0, int64_t n1, float* y) {
  const int64_t row_bytes = w.blocks * w.block_bytes;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.codes + n * row_bytes;
    const float* scales = w.scales + n * w.blocks;
    VecF acc = vzero();
    float tail = 0.0f;  // scalar part: zero-point terms and the ragged last block
    for (int64_t b = 0; b < w.blocks; ++b) {
      const uint8_t* block = row + b * w.block_bytes;
      const float* ab = a + b * w.block_size;
      const int64_t len = std::min(w.block_size, w.k - b * w.block_size);
      const int64_t vec_len = len - len % kW;
      VecF dot0 = vzero(), dot1 = vzero();
      int64_t j = 0;
      for (; j + 2 * kW <= vec_len; j += 2 * kW) {
        dot0 = vfma(vload(ab + j), load_codes<kBits>(block, j), dot0);
        dot1 = vfma(vload(ab + j + kW), load_codes<kBits>(block, j + kW), dot1);
      }
      if (j < vec_len) dot0 = vfma(vload(ab + j), load_codes<kBits>(block, j), dot0);
      float rest = 0.0f;
      for (j = vec_len; j < len; ++j) rest += ab[j] * code_at(block, j, kBits);
      const float s = scales[b];
      acc = vfma(vadd(dot0, dot1), vsplat(s), acc);
      tail += s * (rest - w.zero_point(n, b) * block_sums[b]);
    }
    y[n - n0] = vsum(acc) + tail;
  }
}

template <int kBits>
void dequantize_rows(const QWeights& w, int64_t n0, int64_t n1, float* dst) {
  const int64_t row_bytes = w.blocks * w.block_bytes;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.codes + n * row_bytes;
    float* out = dst + (n - n0) * w.k;
    for (int64_t b = 0; b < w.blocks; ++b) {
      const uint8_t* block = row + b * w.block_bytes;
      float* ob = out + b * w.block_size;
      const int64_t len = std::min(w.block_size, w.k - b * w.block_size);
      const int64_t vec_len = len - len % kW;
      const float s = w.scales[n * w.blocks + b], z = w.zero_point(n, b);
      const VecF vs = vsplat(s), vz = vsplat(z);
      for (int64_t j = 0; j < vec_len; j += kW) vstore(ob + j, vmul(vsub(load_codes<kBits>(block, j), vz), vs));
      for (int64_t j = vec_len; j < len; ++j) ob[j] = (code_at(block, j, kBits) - z) * s;
    }
  }
}

void gemv(const QWeights& w, const float* a, const float* block_sums, int64_t n0, int64_t n1, float* y) {
  if (w.bits == 4) gemv_rows<4>(w, a, block_sums, n0, n1, y);
  else gemv_rows<8>(w, a, block_sums, n0, n1, y);
}

void dequantize(const QWeights& w, int64_t n0, int64_t n1, float* dst) {
  if (w.bits == 4) dequantize_rows<4>(w, n0, n1, dst);
  else dequantize_rows<8>(w, n0, n1, dst);
}

constexpr QGemmKernels kQGemmKernels{gemv, dequantize};

}  // namespace
}  // namespace onnx_genai::qgemm_detail
