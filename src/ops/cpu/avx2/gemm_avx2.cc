// AVX2 GEMM kernels: a 6 x 16 tile = 12 ymm accumulators + 2 B registers + 1 broadcast, the
// most the 16 ymm registers hold.
#include <immintrin.h>

#include <cstring>

#include "ops/cpu/gemm_impl.h"

namespace onnx_genai {

namespace {

struct Avx2 {
  using reg = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kVecs = 2;
  static constexpr int kRows = 6;
  static constexpr int64_t kKc = 256;
  static constexpr int64_t kMc = 144;
  static constexpr int64_t kNc = 512;

  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }

  static reg widen_bf16(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
  // f32 -> bf16 bits, round to nearest even, NaN stays a quiet NaN (as BFloat16::from_float).
  static __m128i narrow_bf16(reg v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i bias = _mm256_add_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7fff));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  }
  static __m128i narrow_f16(reg v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static __m128i load8(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
  // Partial 16-bit loads/stores go through a zeroed 8-element buffer (AVX2 has no 16-bit masks).
  static __m128i load8_partial(const void* p, int n) {
    alignas(16) uint16_t tmp[8] = {};
    std::memcpy(tmp, p, static_cast<size_t>(n) * 2);
    return load8(tmp);
  }
  static void store8_partial(void* p, __m128i v, int n) {
    alignas(16) uint16_t tmp[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), v);
    std::memcpy(p, tmp, static_cast<size_t>(n) * 2);
  }

  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static reg load(const Float16* p) { return _mm256_cvtph_ps(load8(p)); }
  static reg load(const BFloat16* p) { return widen_bf16(load8(p)); }
  static reg load_partial(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static reg load_partial(const Float16* p, int n) { return _mm256_cvtph_ps(load8_partial(p, n)); }
  static reg load_partial(const BFloat16* p, int n) { return widen_bf16(load8_partial(p, n)); }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static void store(Float16* p, reg v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow_f16(v)); }
  static void store(BFloat16* p, reg v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow_bf16(v)); }
  static void store_partial(float* p, reg v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  static void store_partial(Float16* p, reg v, int n) { store8_partial(p, narrow_f16(v), n); }
  static void store_partial(BFloat16* p, reg v, int n) { store8_partial(p, narrow_bf16(v), n); }
};

}  // namespace

const GemmKernelSet& gemm_kernels_avx2() {
  static const GemmKernelSet set = gemm_impl::Gemm<Avx2>::kernel_set();
  return set;
}

}  // namespace onnx_genai
