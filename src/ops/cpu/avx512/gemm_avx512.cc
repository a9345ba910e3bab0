// AVX-512 GEMM kernels: a 14 x 32 tile = 28 zmm accumulators + 2 B registers + 1 broadcast,
// 28 FMAs per k step against 2 loads and 14 broadcasts. On the Zen 5 this was tuned on, a zmm FMA
// issues once per cycle (116 GFLOP/s per core measured); the tile runs at about 90% of that.
#include <immintrin.h>

#include "ops/cpu/gemm_impl.h"

namespace onnx_genai {

namespace {

struct Avx512 {
  using reg = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kVecs = 2;
  static constexpr int kRows = 14;
  // A B panel slice of kKc x 32 floats (32 KiB) plus the A tile sit in L1/L2; a packed A block
  // of kMc x kKc (336 KiB) and a B block of kKc x kNc (512 KiB) share the 1 MiB L2.
  static constexpr int64_t kKc = 256;
  static constexpr int64_t kMc = 336;
  static constexpr int64_t kNc = 512;

  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }

  static reg widen_bf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  // f32 -> bf16 bits, round to nearest even, NaN stays a quiet NaN (as BFloat16::from_float).
  static __m256i narrow_bf16(reg v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i hi = _mm512_srli_epi32(u, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
    return _mm512_cvtepi32_epi16(r);
  }
  static __m256i narrow_f16(reg v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static const __m256i* ptr(const void* p) { return static_cast<const __m256i*>(p); }

  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static reg load(const Float16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(ptr(p))); }
  static reg load(const BFloat16* p) { return widen_bf16(_mm256_loadu_si256(ptr(p))); }
  static reg load_partial(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static reg load_partial(const Float16* p, int n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask(n), p)); }
  static reg load_partial(const BFloat16* p, int n) { return widen_bf16(_mm256_maskz_loadu_epi16(mask(n), p)); }
  static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static void store(Float16* p, reg v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow_f16(v)); }
  static void store(BFloat16* p, reg v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow_bf16(v)); }
  static void store_partial(float* p, reg v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static void store_partial(Float16* p, reg v, int n) { _mm256_mask_storeu_epi16(p, mask(n), narrow_f16(v)); }
  static void store_partial(BFloat16* p, reg v, int n) { _mm256_mask_storeu_epi16(p, mask(n), narrow_bf16(v)); }
};

}  // namespace

const GemmKernelSet& gemm_kernels_avx512() {
  static const GemmKernelSet set = gemm_impl::Gemm<Avx512>::kernel_set();
  return set;
}

}  // namespace onnx_genai
