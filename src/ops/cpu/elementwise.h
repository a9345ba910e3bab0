// Building blocks shared by the elementwise op families (ops/cpu/unary.cc, ops/cpu/binary.cc):
//
//   TypeList       the storage types an op accepts: one list drives registration and dispatch.
//   for_each_span  walks a broadcast output as contiguous spans, split across threads.
//   binary_span    one span of out = op(a, b) where each input stride is 0 or 1; each stride
//                  pair has its own loop so the contiguous and scalar-operand cases vectorise.
//   vec_math       f32 exp / tanh / sigmoid / erf over arrays (AVX-512 or AVX2, chosen at run
//                  time), arith_f32 for f32 add / sub / mul / div spans, gelu_f32 for the Gelu
//                  family with a fused bias, and f16 <-> f32 array conversion (F16C).
//
// The SIMD kernels themselves are in ops/cpu/avx2/elementwise_simd_impl.h, compiled only inside
// the ISA translation units (ops/cpu/avx2|avx512/elementwise_simd.cc).
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
// The Gelu family (com.microsoft FastGelu, BiasGelu, QuickGelu): tanh-approximated Gelu, exact
// (erf) Gelu, and x * sigmoid(alpha * x).
enum class GeluOp { kTanh, kErf, kQuick };
enum class ArithOp { kAdd, kSub, kMul, kDiv };
// out[i] = op(in[i]) for i < n; in and out may be the same array.
using VecMathFn = void (*)(const float* in, float* out, int64_t n);
// y[i] = gelu(x[i] + bias[i]) for i < n; bias may be null, alpha is QuickGelu's; x and y may alias.
using GeluFn = void (*)(const float* x, const float* bias, float* y, int64_t n, float alpha);
// f16 <-> f32 over arrays with F16C (round to nearest even, like Float16::from_float).
struct HalfConverters {
  void (*to_f32)(const uint16_t* in, float* out, int64_t n) = nullptr;
  void (*from_f32)(const float* in, uint16_t* out, int64_t n) = nullptr;
};

// Defined in ops/cpu/avx2/elementwise_simd.cc and ops/cpu/avx512/elementwise_simd.cc.
namespace avx2 {
VecMathFn vec_math(VecMathOp op);
BinarySpanFn arith_f32(ArithOp op);
GeluFn gelu_f32(GeluOp op);
HalfConverters half_converters();
}  // namespace avx2
namespace avx512 {
VecMathFn vec_math(VecMathOp op);
BinarySpanFn arith_f32(ArithOp op);
GeluFn gelu_f32(GeluOp op);
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
inline GeluFn gelu_f32(GeluOp op) {
  if (cpu_features().avx512) return avx512::gelu_f32(op);
  if (cpu_features().avx2) return avx2::gelu_f32(op);
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

// 16-bit float arrays to and from f32, for kernels that compute a block at a time in f32.
inline void widen_to_f32(const Float16* in, float* out, int64_t n) { convert_f16_to_f32(in, out, n); }
inline void widen_to_f32(const BFloat16* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = BFloat16::to_float(in[i].bits);
}
inline void narrow_from_f32(const float* in, Float16* out, int64_t n) { convert_f32_to_f16(in, out, n); }
inline void narrow_from_f32(const float* in, BFloat16* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i].bits = BFloat16::from_float(in[i]);
}

}  // namespace onnx_genai
