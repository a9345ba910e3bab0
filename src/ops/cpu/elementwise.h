// Building blocks shared by the elementwise op families (ops/cpu/unary.cc, ops/cpu/binary.cc)
// and their AVX2 / AVX-512 translation units (ops/cpu/avx2|avx512/elementwise_*.cc):
//
//   TypeList       the storage types an op accepts: one list drives registration and dispatch.
//   for_each_span  walks a broadcast output as contiguous spans, split across threads.
//   binary_span    one span of out = op(a, b) where each input stride is 0 or 1; each stride
//                  pair has its own loop so the contiguous and scalar-operand cases vectorise.
//   vec_math       f32 exp / tanh / sigmoid / erf over arrays (AVX-512 or AVX2, chosen at run
//                  time), arith_f32 for f32 add / sub / mul / div spans, and f16 <-> f32
//                  array conversion (F16C).
//
// The SIMD section at the bottom is compiled only inside the ISA translation units (it is
// guarded by __AVX2__ / __AVX512F__) and lives in an anonymous namespace, so its inline
// functions can never be merged with a copy built for a lower ISA.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/broadcast.h"
#include "ops/cpu/dispatch.h"

namespace onnx_genai {

template <typename... Ts>
struct TypeList {
  static std::vector<DType> dtypes() { return {DTypeOf<Ts>::value...}; }
  template <typename F>
  static Status dispatch(DType dtype, F&& fn) {
    return dispatch_dtype<Ts...>(dtype, std::forward<F>(fn));
  }
};

using FloatTypes = TypeList<float, Float16, BFloat16, double>;
using SignedTypes = TypeList<float, Float16, BFloat16, double, int8_t, int16_t, int32_t, int64_t>;
using NumericTypes = TypeList<float, Float16, BFloat16, double, int8_t, int16_t, int32_t, int64_t, uint8_t,
                              uint16_t, uint32_t, uint64_t>;
using UnsignedTypes = TypeList<uint8_t, uint16_t, uint32_t, uint64_t>;
using BoolTypes = TypeList<bool>;
using AllTypes = TypeList<float, Float16, BFloat16, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                          uint32_t, uint64_t, bool>;

// Elements below which a loop stays on the calling thread: waking workers costs a few
// microseconds, about what 32K simple elementwise operations take. Transcendental ops pass
// a smaller grain.
inline constexpr int64_t kElementwiseGrain = 1 << 15;

using SpanOffsets = std::array<int64_t, BroadcastPlan::kMaxInputs>;

// Calls fn(out_offset, offsets, len) for contiguous output spans covering the output of `plan`,
// in parallel on `pool`. Input i's elements for a span start at offsets[i] and advance by
// plan.strides[i].back() (0 or 1). A span never crosses a row of the plan.
template <typename Fn>
void for_each_span(const BroadcastPlan& plan, ThreadPool* pool, int64_t grain, const Fn& fn) {
  const int64_t inner = plan.inner();
  parallel_for(pool, plan.rows() * inner, grain, [&](int64_t begin, int64_t end) {
    plan.for_each_row(begin / inner, (end - 1) / inner + 1, [&](int64_t row_start, const SpanOffsets& offsets) {
      const int64_t lo = std::max(begin, row_start);
      const int64_t hi = std::min(end, row_start + inner);
      SpanOffsets at = offsets;
      for (int i = 0; i < plan.num_inputs; ++i) {
        at[static_cast<size_t>(i)] += (lo - row_start) * plan.strides[static_cast<size_t>(i)].back();
      }
      fn(lo, at, hi - lo);
    });
  });
}

// A type-erased span of a binary op: out[k] = op(a[k * sa], b[k * sb]), k < n, sa and sb in {0, 1}.
using BinarySpanFn = void (*)(const void* a, int64_t sa, const void* b, int64_t sb, void* out, int64_t n);

template <typename Op, typename TA, typename TB, typename TO>
void binary_span(const TA* a, int64_t sa, const TB* b, int64_t sb, TO* out, int64_t n) {
  const Op op;
  const auto f = [&op](auto x, auto y) { return store<TO>(static_cast<compute_t<TO>>(op(x, y))); };
  if (sa == 1 && sb == 1) {
    for (int64_t k = 0; k < n; ++k) out[k] = f(load(a[k]), load(b[k]));
  } else if (sa == 1) {
    const auto y = load(b[0]);
    for (int64_t k = 0; k < n; ++k) out[k] = f(load(a[k]), y);
  } else if (sb == 1) {
    const auto x = load(a[0]);
    for (int64_t k = 0; k < n; ++k) out[k] = f(x, load(b[k]));
  } else {
    const TO v = f(load(a[0]), load(b[0]));
    for (int64_t k = 0; k < n; ++k) out[k] = v;
  }
}

template <typename Op, typename TA, typename TB, typename TO>
void binary_span_erased(const void* a, int64_t sa, const void* b, int64_t sb, void* out, int64_t n) {
  binary_span<Op>(static_cast<const TA*>(a), sa, static_cast<const TB*>(b), sb, static_cast<TO*>(out), n);
}

// ---- Run-time chosen SIMD kernels ------------------------------------------------------------

enum class VecMathOp { kNone, kExp, kTanh, kSigmoid, kErf };
enum class ArithOp { kAdd, kSub, kMul, kDiv };
// out[i] = op(in[i]) for i < n; in and out may be the same array.
using VecMathFn = void (*)(const float* in, float* out, int64_t n);
// f16 <-> f32 over arrays with F16C (round to nearest even, like Float16::from_float).
struct HalfConverters {
  void (*to_f32)(const uint16_t* in, float* out, int64_t n) = nullptr;
  void (*from_f32)(const float* in, uint16_t* out, int64_t n) = nullptr;
};

// Defined in ops/cpu/avx2/elementwise_simd.cc and ops/cpu/avx512/elementwise_simd.cc.
namespace avx2 {
VecMathFn vec_math(VecMathOp op);
BinarySpanFn arith_f32(ArithOp op);
HalfConverters half_converters();
}  // namespace avx2
namespace avx512 {
VecMathFn vec_math(VecMathOp op);
BinarySpanFn arith_f32(ArithOp op);
}  // namespace avx512

// The widest implementation this CPU runs, or null when it has no AVX2 (callers then loop in C++).
inline VecMathFn vec_math(VecMathOp op) {
  if (op == VecMathOp::kNone) return nullptr;
  if (cpu_features().avx512) return avx512::vec_math(op);
  if (cpu_features().avx2) return avx2::vec_math(op);
  return nullptr;
}
inline BinarySpanFn arith_f32(ArithOp op) {
  if (cpu_features().avx512) return avx512::arith_f32(op);
  if (cpu_features().avx2) return avx2::arith_f32(op);
  return nullptr;
}

static_assert(sizeof(Float16) == sizeof(uint16_t), "Float16 arrays are read as raw bits");
inline void convert_f16_to_f32(const Float16* in, float* out, int64_t n) {
  static const HalfConverters simd = cpu_features().avx2 ? avx2::half_converters() : HalfConverters{};
  if (simd.to_f32 != nullptr) return simd.to_f32(&in->bits, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = Float16::to_float(in[i].bits);
}
inline void convert_f32_to_f16(const float* in, Float16* out, int64_t n) {
  static const HalfConverters simd = cpu_features().avx2 ? avx2::half_converters() : HalfConverters{};
  if (simd.from_f32 != nullptr) return simd.from_f32(in, &out->bits, n);
  for (int64_t i = 0; i < n; ++i) out[i].bits = Float16::from_float(in[i]);
}

}  // namespace onnx_genai

#if defined(__AVX2__)
#include <immintrin.h>

namespace onnx_genai::simd {
namespace {

// A register of f32 lanes and the few operations the math below needs, for the ISA this
// translation unit is compiled for.
#if defined(__AVX512F__)
struct VecF {
  static constexpr int kWidth = 16;
  __m512 v;
};
using MaskF = __mmask16;
inline VecF load(const float* p) { return {_mm512_loadu_ps(p)}; }
inline void store(float* p, VecF a) { _mm512_storeu_ps(p, a.v); }
inline VecF splat(float x) { return {_mm512_set1_ps(x)}; }
inline VecF operator+(VecF a, VecF b) { return {_mm512_add_ps(a.v, b.v)}; }
inline VecF operator-(VecF a, VecF b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline VecF operator*(VecF a, VecF b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline VecF operator/(VecF a, VecF b) { return {_mm512_div_ps(a.v, b.v)}; }
inline VecF fmadd(VecF a, VecF b, VecF c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
// The maskz forms with a full mask: the plain intrinsics pass GCC 12 an undefined source
// register, which trips -Wmaybe-uninitialized.
constexpr __mmask16 kAll = 0xffff;
inline VecF vmin(VecF a, VecF b) { return {_mm512_maskz_min_ps(kAll, a.v, b.v)}; }
inline VecF vmax(VecF a, VecF b) { return {_mm512_maskz_max_ps(kAll, a.v, b.v)}; }
inline VecF vabs(VecF a) { return {_mm512_abs_ps(a.v)}; }
inline VecF sign_of(VecF a) { return {_mm512_and_ps(a.v, _mm512_set1_ps(-0.0f))}; }
inline VecF vor(VecF a, VecF b) { return {_mm512_or_ps(a.v, b.v)}; }
inline VecF round_even(VecF a) {
  return {_mm512_maskz_roundscale_ps(kAll, a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
// a * 2^n for integral n; scalef handles overflow to inf and gradual underflow itself.
inline VecF ldexp(VecF a, VecF n) { return {_mm512_maskz_scalef_ps(kAll, a.v, n.v)}; }
inline MaskF less(VecF a, VecF b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ); }
inline MaskF is_nan(VecF a) { return _mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q); }
inline VecF select(MaskF m, VecF if_true, VecF if_false) { return {_mm512_mask_blend_ps(m, if_false.v, if_true.v)}; }
#else
struct VecF {
  static constexpr int kWidth = 8;
  __m256 v;
};
using MaskF = __m256;
inline VecF load(const float* p) { return {_mm256_loadu_ps(p)}; }
inline void store(float* p, VecF a) { _mm256_storeu_ps(p, a.v); }
inline VecF splat(float x) { return {_mm256_set1_ps(x)}; }
inline VecF operator+(VecF a, VecF b) { return {_mm256_add_ps(a.v, b.v)}; }
inline VecF operator-(VecF a, VecF b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline VecF operator*(VecF a, VecF b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline VecF operator/(VecF a, VecF b) { return {_mm256_div_ps(a.v, b.v)}; }
inline VecF fmadd(VecF a, VecF b, VecF c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline VecF vmin(VecF a, VecF b) { return {_mm256_min_ps(a.v, b.v)}; }
inline VecF vmax(VecF a, VecF b) { return {_mm256_max_ps(a.v, b.v)}; }
inline VecF vabs(VecF a) { return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), a.v)}; }
inline VecF sign_of(VecF a) { return {_mm256_and_ps(a.v, _mm256_set1_ps(-0.0f))}; }
inline VecF vor(VecF a, VecF b) { return {_mm256_or_ps(a.v, b.v)}; }
inline VecF round_even(VecF a) { return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
// a * 2^n for integral n in [-252, 254]: two steps of 2^(n/2) keep each factor a normal float,
// so results that overflow or underflow still round like a single scaling would.
inline VecF ldexp(VecF a, VecF n) {
  const __m256i ni = _mm256_cvtps_epi32(n.v);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256i rest = _mm256_sub_epi32(ni, half);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23));
  return {_mm256_mul_ps(_mm256_mul_ps(a.v, s1), s2)};
}
inline MaskF less(VecF a, VecF b) { return _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ); }
inline MaskF is_nan(VecF a) { return _mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q); }
inline VecF select(MaskF m, VecF if_true, VecF if_false) { return {_mm256_blendv_ps(if_false.v, if_true.v, m)}; }
#endif

// exp(x) = 2^n * e^r with n = round(x / ln2) and |r| <= ln2 / 2; e^r from the Cephes expf
// polynomial (about 1 ulp). ln2 is split in two so x - n * ln2 stays exact.
inline VecF exp(VecF x) {
  // Outside [-104, 89] the result is 0 or inf anyway; the clamp keeps n in ldexp's range.
  const VecF xc = vmin(vmax(x, splat(-104.0f)), splat(89.0f));
  const VecF n = round_even(xc * splat(1.44269504088896341f));
  VecF r = fmadd(n, splat(-0.693359375f), xc);
  r = fmadd(n, splat(2.12194440e-4f), r);
  VecF p = splat(1.9875691500e-4f);
  p = fmadd(p, r, splat(1.3981999507e-3f));
  p = fmadd(p, r, splat(8.3334519073e-3f));
  p = fmadd(p, r, splat(4.1665795894e-2f));
  p = fmadd(p, r, splat(1.6666665459e-1f));
  p = fmadd(p, r, splat(5.0000001201e-1f));
  p = fmadd(p, r * r, r + splat(1.0f));
  return select(is_nan(x), x, ldexp(p, n));
}

inline VecF sigmoid(VecF x) { return splat(1.0f) / (splat(1.0f) + exp(splat(0.0f) - x)); }

// tanh: the Cephes tanhf odd polynomial below |x| = 0.625 (where 1 - 2 / (e^2x + 1) would
// cancel), the exp form above.
inline VecF tanh(VecF x) {
  const VecF ax = vabs(x);
  const VecF z = x * x;
  VecF p = splat(-5.70498872745e-3f);
  p = fmadd(p, z, splat(2.06390887954e-2f));
  p = fmadd(p, z, splat(-5.37397155531e-2f));
  p = fmadd(p, z, splat(1.33314422036e-1f));
  p = fmadd(p, z, splat(-3.33332819422e-1f));
  const VecF small = fmadd(p * z, x, x);
  const VecF large = splat(1.0f) - splat(2.0f) / (exp(ax + ax) + splat(1.0f));
  return select(less(ax, splat(0.625f)), small, vor(large, sign_of(x)));
}

// erf: odd/even rational approximation on [-4, 4] (as in Eigen's float erf; erf(4) rounds to 1).
inline VecF erf(VecF x) {
  const VecF xc = vmin(vmax(x, splat(-4.0f)), splat(4.0f));
  const VecF z = xc * xc;
  VecF p = splat(-2.72614225801306e-10f);
  p = fmadd(p, z, splat(2.77068142495902e-08f));
  p = fmadd(p, z, splat(-2.10102402082508e-06f));
  p = fmadd(p, z, splat(-5.69250639462346e-05f));
  p = fmadd(p, z, splat(-7.34990630326855e-04f));
  p = fmadd(p, z, splat(-2.95459980854025e-03f));
  p = fmadd(p, z, splat(-1.60960333262415e-02f));
  VecF q = splat(-1.45660718464996e-05f);
  q = fmadd(q, z, splat(-2.13374055278905e-04f));
  q = fmadd(q, z, splat(-1.68282697438203e-03f));
  q = fmadd(q, z, splat(-7.37332916720468e-03f));
  q = fmadd(q, z, splat(-1.42647390514189e-02f));
  return select(is_nan(x), x, (p * xc) / q);
}

template <VecF (*F)(VecF)>
void map_array(const float* in, float* out, int64_t n) {
  constexpr int kW = VecF::kWidth;
  int64_t i = 0;
  for (; i + kW <= n; i += kW) store(out + i, F(load(in + i)));
  if (i < n) {  // tail through a padded register-sized buffer
    float buf[kW] = {};
    for (int64_t j = i; j < n; ++j) buf[j - i] = in[j];
    store(buf, F(load(buf)));
    for (int64_t j = i; j < n; ++j) out[j] = buf[j - i];
  }
}

inline VecMathFn vec_math_table(VecMathOp op) {
  switch (op) {
    case VecMathOp::kExp: return &map_array<exp>;
    case VecMathOp::kTanh: return &map_array<tanh>;
    case VecMathOp::kSigmoid: return &map_array<sigmoid>;
    case VecMathOp::kErf: return &map_array<erf>;
    case VecMathOp::kNone: break;
  }
  return nullptr;
}

// out = a op b over a span, sa / sb in {0, 1} as in binary_span.
template <typename Op>
void arith_span(const void* av, int64_t sa, const void* bv, int64_t sb, void* outv, int64_t n) {
  constexpr int kW = VecF::kWidth;
  const float* a = static_cast<const float*>(av);
  const float* b = static_cast<const float*>(bv);
  float* out = static_cast<float*>(outv);
  const Op op;
  int64_t i = 0;
  if (sa == 1 && sb == 1) {
    for (; i + kW <= n; i += kW) store(out + i, op(load(a + i), load(b + i)));
  } else if (sa == 1) {
    const VecF y = splat(b[0]);
    for (; i + kW <= n; i += kW) store(out + i, op(load(a + i), y));
  } else if (sb == 1) {
    const VecF x = splat(a[0]);
    for (; i + kW <= n; i += kW) store(out + i, op(x, load(b + i)));
  }
  for (; i < n; ++i) out[i] = op(a[i * sa], b[i * sb]);
}

struct AddF { template <typename V> V operator()(V a, V b) const { return a + b; } };
struct SubF { template <typename V> V operator()(V a, V b) const { return a - b; } };
struct MulF { template <typename V> V operator()(V a, V b) const { return a * b; } };
struct DivF { template <typename V> V operator()(V a, V b) const { return a / b; } };

inline BinarySpanFn arith_table(ArithOp op) {
  switch (op) {
    case ArithOp::kAdd: return &arith_span<AddF>;
    case ArithOp::kSub: return &arith_span<SubF>;
    case ArithOp::kMul: return &arith_span<MulF>;
    case ArithOp::kDiv: return &arith_span<DivF>;
  }
  return nullptr;
}

// F16C converts 8 lanes per instruction; only the AVX2 build exports these (16-lane AVX-512
// forms gain little on a conversion bound by memory).
inline void half_to_float(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
  if (i < n) {
    uint16_t buf[8] = {};
    float wide[8];
    for (int64_t j = i; j < n; ++j) buf[j - i] = in[j];
    _mm256_storeu_ps(wide, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf))));
    for (int64_t j = i; j < n; ++j) out[j] = wide[j - i];
  }
}

inline void float_to_half(const float* in, uint16_t* out, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), kRound));
  }
  if (i < n) {
    float buf[8] = {};
    uint16_t narrow[8];
    for (int64_t j = i; j < n; ++j) buf[j - i] = in[j];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(narrow), _mm256_cvtps_ph(_mm256_loadu_ps(buf), kRound));
    for (int64_t j = i; j < n; ++j) out[j] = narrow[j - i];
  }
}

}  // namespace
}  // namespace onnx_genai::simd
#endif  // __AVX2__
