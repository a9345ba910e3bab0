// f32 vector primitives and the vector exp shared by every SIMD kernel family (elementwise math,
// softmax rows, normalization rows), written once and compiled twice: by avx2/*.cc (8 lanes,
// __AVX2__) and by avx512/*.cc (16 lanes, __AVX512F__). It sits in avx2/ because it needs at
// least AVX2; include it only from translation units compiled with the ISA flags. Everything is
// in an anonymous namespace, so the two builds never meet at link time.
#pragma once

// GCC 12 flags the deliberately undefined merge source inside the AVX-512 intrinsics
// (_mm512_undefined_ps) when they are inlined here; the warning is about the header, not us.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

namespace onnx_genai::simd {
namespace {

#if defined(__AVX512F__)
using MaskF = __mmask16;
struct VecF {
  static constexpr int kWidth = 16;
  __m512 v;
  static VecF splat(float x) { return {_mm512_set1_ps(x)}; }
  static VecF load(const float* p) { return {_mm512_loadu_ps(p)}; }
  // Lanes at and past `n` read as `fill` (no memory is touched there).
  static VecF load_partial(const float* p, int64_t n, float fill) {
    return {_mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail_mask(n), p)};
  }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  void store_partial(float* p, int64_t n) const { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
  static __mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
};
inline VecF operator+(VecF a, VecF b) { return {_mm512_add_ps(a.v, b.v)}; }
inline VecF operator-(VecF a, VecF b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline VecF operator*(VecF a, VecF b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline VecF operator/(VecF a, VecF b) { return {_mm512_div_ps(a.v, b.v)}; }
inline VecF operator|(VecF a, VecF b) { return {_mm512_or_ps(a.v, b.v)}; }
inline VecF fmadd(VecF a, VecF b, VecF c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline VecF fmsub(VecF a, VecF b, VecF c) { return {_mm512_fmsub_ps(a.v, b.v, c.v)}; }  // a * b - c
inline VecF max(VecF a, VecF b) { return {_mm512_max_ps(a.v, b.v)}; }
inline VecF min(VecF a, VecF b) { return {_mm512_min_ps(a.v, b.v)}; }
inline VecF abs(VecF a) { return {_mm512_abs_ps(a.v)}; }
inline VecF sign_of(VecF a) { return {_mm512_and_ps(a.v, _mm512_set1_ps(-0.0f))}; }
inline VecF round(VecF a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
inline MaskF less(VecF a, VecF b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ); }
inline MaskF is_nan(VecF a) { return _mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q); }
inline VecF select(MaskF m, VecF if_true, VecF if_false) { return {_mm512_mask_blend_ps(m, if_false.v, if_true.v)}; }
inline float reduce_add(VecF a) { return _mm512_reduce_add_ps(a.v); }
// out[i] = reduce_add of the i-th argument, sharing the shuffles of four reductions.
inline void reduce_add4(VecF a, VecF b, VecF c, VecF d, float* out) {
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a.v, b.v), _mm512_unpackhi_ps(a.v, b.v));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c.v, d.v), _mm512_unpackhi_ps(c.v, d.v));
  const __m512 abcd = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xEE));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(abcd), _mm512_extractf32x8_ps(abcd, 1));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}
inline float reduce_max(VecF a) { return _mm512_reduce_max_ps(a.v); }
// a * 2^n; scalef handles overflow to inf and underflow through denormals to 0.
inline VecF ldexp(VecF a, VecF n) { return {_mm512_scalef_ps(a.v, n.v)}; }

// int32 lanes, as many as VecF has (quantised-weight decoding, lane indices).
struct VecI32 {
  static constexpr int kWidth = 16;
  __m512i v;
  static VecI32 splat(int32_t x) { return {_mm512_set1_epi32(x)}; }
  static VecI32 load(const int32_t* p) { return {_mm512_loadu_si512(p)}; }
  void store(int32_t* p) const { _mm512_storeu_si512(p, v); }
  // kWidth bytes, each zero-extended into its lane.
  static VecI32 load_u8(const uint8_t* p) {
    return {_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
  }
};
inline VecI32 operator&(VecI32 a, VecI32 b) { return {_mm512_and_si512(a.v, b.v)}; }
inline VecI32 operator+(VecI32 a, VecI32 b) { return {_mm512_add_epi32(a.v, b.v)}; }
inline VecI32 operator-(VecI32 a, VecI32 b) { return {_mm512_sub_epi32(a.v, b.v)}; }
inline VecF to_float(VecI32 a) { return {_mm512_cvtepi32_ps(a.v)}; }
// Rounds to the nearest integer, ties to even (the default MXCSR mode).
inline VecI32 to_int(VecF a) { return {_mm512_cvtps_epi32(a.v)}; }
// Lane l of the result is lane idx[l] of v (idx in [0, kWidth)).
inline VecF permute(VecF v, VecI32 idx) { return {_mm512_permutexvar_ps(idx.v, v.v)}; }
#else
using MaskF = __m256;
struct VecF {
  static constexpr int kWidth = 8;
  __m256 v;
  static VecF splat(float x) { return {_mm256_set1_ps(x)}; }
  static VecF load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static VecF load_partial(const float* p, int64_t n, float fill) {
    const __m256i mask = tail_mask(n);
    return {_mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, mask), _mm256_castsi256_ps(mask))};
  }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  void store_partial(float* p, int64_t n) const { _mm256_maskstore_ps(p, tail_mask(n), v); }
  static __m256i tail_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};
inline VecF operator+(VecF a, VecF b) { return {_mm256_add_ps(a.v, b.v)}; }
inline VecF operator-(VecF a, VecF b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline VecF operator*(VecF a, VecF b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline VecF operator/(VecF a, VecF b) { return {_mm256_div_ps(a.v, b.v)}; }
inline VecF operator|(VecF a, VecF b) { return {_mm256_or_ps(a.v, b.v)}; }
inline VecF fmadd(VecF a, VecF b, VecF c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline VecF fmsub(VecF a, VecF b, VecF c) { return {_mm256_fmsub_ps(a.v, b.v, c.v)}; }
inline VecF max(VecF a, VecF b) { return {_mm256_max_ps(a.v, b.v)}; }
inline VecF min(VecF a, VecF b) { return {_mm256_min_ps(a.v, b.v)}; }
inline VecF abs(VecF a) { return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), a.v)}; }
inline VecF sign_of(VecF a) { return {_mm256_and_ps(a.v, _mm256_set1_ps(-0.0f))}; }
inline VecF round(VecF a) { return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
inline MaskF less(VecF a, VecF b) { return _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ); }
inline MaskF is_nan(VecF a) { return _mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q); }
inline VecF select(MaskF m, VecF if_true, VecF if_false) { return {_mm256_blendv_ps(if_false.v, if_true.v, m)}; }
inline float reduce_add(VecF a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline void reduce_add4(VecF a, VecF b, VecF c, VecF d, float* out) {
  const __m256 ab = _mm256_add_ps(_mm256_unpacklo_ps(a.v, b.v), _mm256_unpackhi_ps(a.v, b.v));
  const __m256 cd = _mm256_add_ps(_mm256_unpacklo_ps(c.v, d.v), _mm256_unpackhi_ps(c.v, d.v));
  const __m256 abcd = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44), _mm256_shuffle_ps(ab, cd, 0xEE));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}
inline float reduce_max(VecF a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
// a * 2^n for integral n in [-252, 254]: two exponent-field multiplies, so results in the
// denormal range stay (approximately) right instead of wrapping.
inline VecF ldexp(VecF a, VecF n) {
  const __m256i ni = _mm256_cvtps_epi32(n.v);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const auto pow2 = [](__m256i e) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23)); };
  return {_mm256_mul_ps(_mm256_mul_ps(a.v, pow2(half)), pow2(_mm256_sub_epi32(ni, half)))};
}

struct VecI32 {
  static constexpr int kWidth = 8;
  __m256i v;
  static VecI32 splat(int32_t x) { return {_mm256_set1_epi32(x)}; }
  static VecI32 load(const int32_t* p) { return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))}; }
  void store(int32_t* p) const { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static VecI32 load_u8(const uint8_t* p) {
    return {_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))};
  }
};
inline VecI32 operator&(VecI32 a, VecI32 b) { return {_mm256_and_si256(a.v, b.v)}; }
inline VecI32 operator+(VecI32 a, VecI32 b) { return {_mm256_add_epi32(a.v, b.v)}; }
inline VecI32 operator-(VecI32 a, VecI32 b) { return {_mm256_sub_epi32(a.v, b.v)}; }
inline VecF to_float(VecI32 a) { return {_mm256_cvtepi32_ps(a.v)}; }
inline VecI32 to_int(VecF a) { return {_mm256_cvtps_epi32(a.v)}; }
inline VecF permute(VecF v, VecI32 idx) { return {_mm256_permutevar8x32_ps(v.v, idx.v)}; }
#endif

// exp(x) = 2^n * e^r with n = round(x / ln2), |r| <= ln2 / 2, and e^r from the Cephes expf
// polynomial (about 1 ulp). Inputs are clamped to [-104, 89] (keeping n in ldexp's range): below,
// the result is 0 anyway (so -inf, a masked logit, gives exactly 0); above, it is inf. NaN
// propagates without a blend: max/min return their second operand when either is NaN, so x goes
// second.
inline VecF exp(VecF x) {
  x = min(VecF::splat(89.0f), max(VecF::splat(-104.0f), x));
  const VecF n = round(x * VecF::splat(1.44269504088896341f));
  // r = x - n * ln2 in two steps (ln2 = hi + lo) to keep r exact.
  VecF r = fmadd(n, VecF::splat(-0.693359375f), x);
  r = fmadd(n, VecF::splat(2.12194440e-4f), r);
  VecF p = VecF::splat(1.9875691500e-4f);
  p = fmadd(p, r, VecF::splat(1.3981999507e-3f));
  p = fmadd(p, r, VecF::splat(8.3334519073e-3f));
  p = fmadd(p, r, VecF::splat(4.1665795894e-2f));
  p = fmadd(p, r, VecF::splat(1.6666665459e-1f));
  p = fmadd(p, r, VecF::splat(5.0000001201e-1f));
  p = fmadd(p, r * r, r + VecF::splat(1.0f));
  return ldexp(p, n);
}

}  // namespace
}  // namespace onnx_genai::simd
