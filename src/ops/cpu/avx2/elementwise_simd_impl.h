// The run-time chosen SIMD kernels declared in ops/cpu/elementwise.h (vec_math, arith_f32,
// gelu_f32, f16 <-> f32 conversion) over VecF (ops/cpu/avx2/vec_f32.h), compiled once per ISA by
// avx2/elementwise_simd.cc and avx512/elementwise_simd.cc.
#pragma once

#include "ops/cpu/avx2/vec_f32.h"
#include "ops/cpu/elementwise.h"

namespace onnx_genai::simd {
namespace {

inline VecF sigmoid(VecF x) { return VecF::splat(1.0f) / (VecF::splat(1.0f) + exp(VecF::splat(0.0f) - x)); }

// tanh: the Cephes tanhf odd polynomial below |x| = 0.625 (where 1 - 2 / (e^2x + 1) would
// cancel), the exp form above.
inline VecF tanh(VecF x) {
  const VecF ax = abs(x);
  const VecF z = x * x;
  VecF p = VecF::splat(-5.70498872745e-3f);
  p = fmadd(p, z, VecF::splat(2.06390887954e-2f));
  p = fmadd(p, z, VecF::splat(-5.37397155531e-2f));
  p = fmadd(p, z, VecF::splat(1.33314422036e-1f));
  p = fmadd(p, z, VecF::splat(-3.33332819422e-1f));
  const VecF small = fmadd(p * z, x, x);
  const VecF large = VecF::splat(1.0f) - VecF::splat(2.0f) / (exp(ax + ax) + VecF::splat(1.0f));
  return select(less(ax, VecF::splat(0.625f)), small, large | sign_of(x));
}

// erf: odd/even rational approximation on [-4, 4] (as in Eigen's float erf; erf(4) rounds to 1).
inline VecF erf(VecF x) {
  const VecF xc = min(max(x, VecF::splat(-4.0f)), VecF::splat(4.0f));
  const VecF z = xc * xc;
  VecF p = VecF::splat(-2.72614225801306e-10f);
  p = fmadd(p, z, VecF::splat(2.77068142495902e-08f));
  p = fmadd(p, z, VecF::splat(-2.10102402082508e-06f));
  p = fmadd(p, z, VecF::splat(-5.69250639462346e-05f));
  p = fmadd(p, z, VecF::splat(-7.34990630326855e-04f));
  p = fmadd(p, z, VecF::splat(-2.95459980854025e-03f));
  p = fmadd(p, z, VecF::splat(-1.60960333262415e-02f));
  VecF q = VecF::splat(-1.45660718464996e-05f);
  q = fmadd(q, z, VecF::splat(-2.13374055278905e-04f));
  q = fmadd(q, z, VecF::splat(-1.68282697438203e-03f));
  q = fmadd(q, z, VecF::splat(-7.37332916720468e-03f));
  q = fmadd(q, z, VecF::splat(-1.42647390514189e-02f));
  return select(is_nan(x), x, (p * xc) / q);
}

template <VecF (*F)(VecF)>
void map_array(const float* in, float* out, int64_t n) {
  constexpr int kW = VecF::kWidth;
  int64_t i = 0;
  for (; i + kW <= n; i += kW) F(VecF::load(in + i)).store(out + i);
  if (i < n) F(VecF::load_partial(in + i, n - i, 0.0f)).store_partial(out + i, n - i);
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

// The Gelu family on one vector; alpha is QuickGelu's (the others ignore it).
inline VecF gelu_tanh(VecF x, VecF) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const VecF inner = x * fmadd(VecF::splat(kSqrt2OverPi * 0.044715f), x * x, VecF::splat(kSqrt2OverPi));
  return VecF::splat(0.5f) * x * (VecF::splat(1.0f) + tanh(inner));
}
inline VecF gelu_erf(VecF x, VecF) {
  return VecF::splat(0.5f) * x * (VecF::splat(1.0f) + erf(x * VecF::splat(0.7071067811865476f)));
}
inline VecF quick_gelu(VecF x, VecF alpha) { return x * sigmoid(alpha * x); }

template <VecF (*F)(VecF, VecF)>
void gelu_array(const float* x, const float* bias, float* y, int64_t n, float alpha) {
  constexpr int kW = VecF::kWidth;
  const VecF a = VecF::splat(alpha);
  const auto one = [&](int64_t i, int64_t width) {
    const bool full = width == kW;
    VecF v = full ? VecF::load(x + i) : VecF::load_partial(x + i, width, 0.0f);
    if (bias != nullptr) v = v + (full ? VecF::load(bias + i) : VecF::load_partial(bias + i, width, 0.0f));
    if (full) F(v, a).store(y + i);
    else F(v, a).store_partial(y + i, width);
  };
  int64_t i = 0;
  for (; i + kW <= n; i += kW) one(i, kW);
  if (i < n) one(i, n - i);
}

inline GeluFn gelu_table(GeluOp op) {
  switch (op) {
    case GeluOp::kTanh: return &gelu_array<gelu_tanh>;
    case GeluOp::kErf: return &gelu_array<gelu_erf>;
    case GeluOp::kQuick: return &gelu_array<quick_gelu>;
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
    for (; i + kW <= n; i += kW) op(VecF::load(a + i), VecF::load(b + i)).store(out + i);
  } else if (sa == 1) {
    const VecF y = VecF::splat(b[0]);
    for (; i + kW <= n; i += kW) op(VecF::load(a + i), y).store(out + i);
  } else if (sb == 1) {
    const VecF x = VecF::splat(a[0]);
    for (; i + kW <= n; i += kW) op(x, VecF::load(b + i)).store(out + i);
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
