// CPU kernels of the one-tensor elementwise ops. Each op is a functor on compute values (float
// for f32/f16/bf16, double, or the integer type itself); UnaryKernel maps it over the tensor in
// parallel chunks. f16/bf16 are widened a block at a time so they share the f32 path, and f32
// exp/tanh/sigmoid/erf run on the AVX2/AVX-512 polynomial kernels when the CPU has them.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "ops/cpu/elementwise.h"
#include "ops/op.h"

namespace onnx_genai {

namespace {

// What a functor declares, with the common defaults. Functors without attributes inherit the
// Attributes constructor.
struct UnaryOp {
  using Types = FloatTypes;                              // storage types it accepts
  static constexpr VecMathOp kVec = VecMathOp::kNone;    // SIMD f32 array version, if any
  static constexpr bool kBoolOut = false;                // output is bool (IsNaN, IsInf)
  static constexpr int64_t kGrain = kElementwiseGrain;   // smaller for costly functions
  UnaryOp() = default;
  explicit UnaryOp(const Attributes&) {}
};
inline constexpr int64_t kMathGrain = kElementwiseGrain / 8;

template <typename C>
C negate(C x) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(0 - static_cast<std::make_unsigned_t<C>>(x));  // wraps at MIN
  else return -x;
}

struct Sqrt : UnaryOp { using UnaryOp::UnaryOp; template <typename C> C operator()(C x) const { return std::sqrt(x); } };
struct Reciprocal : UnaryOp { using UnaryOp::UnaryOp; template <typename C> C operator()(C x) const { return C(1) / x; } };
struct Log : UnaryOp { using UnaryOp::UnaryOp; static constexpr int64_t kGrain = kMathGrain; template <typename C> C operator()(C x) const { return std::log(x); } };
struct Sin : UnaryOp { using UnaryOp::UnaryOp; static constexpr int64_t kGrain = kMathGrain; template <typename C> C operator()(C x) const { return std::sin(x); } };
struct Cos : UnaryOp { using UnaryOp::UnaryOp; static constexpr int64_t kGrain = kMathGrain; template <typename C> C operator()(C x) const { return std::cos(x); } };
struct Floor : UnaryOp { using UnaryOp::UnaryOp; template <typename C> C operator()(C x) const { return std::floor(x); } };
struct Ceil : UnaryOp { using UnaryOp::UnaryOp; template <typename C> C operator()(C x) const { return std::ceil(x); } };
// Halves round to even: nearbyint under the default rounding mode.
struct Round : UnaryOp { using UnaryOp::UnaryOp; template <typename C> C operator()(C x) const { return std::nearbyint(x); } };

struct Exp : UnaryOp {
  using UnaryOp::UnaryOp;
  static constexpr VecMathOp kVec = VecMathOp::kExp;
  static constexpr int64_t kGrain = kMathGrain;
  template <typename C> C operator()(C x) const { return std::exp(x); }
};
struct Tanh : UnaryOp {
  using UnaryOp::UnaryOp;
  static constexpr VecMathOp kVec = VecMathOp::kTanh;
  static constexpr int64_t kGrain = kMathGrain;
  template <typename C> C operator()(C x) const { return std::tanh(x); }
};
struct Sigmoid : UnaryOp {
  using UnaryOp::UnaryOp;
  static constexpr VecMathOp kVec = VecMathOp::kSigmoid;
  static constexpr int64_t kGrain = kMathGrain;
  template <typename C> C operator()(C x) const { return C(1) / (C(1) + std::exp(-x)); }
};
struct Erf : UnaryOp {
  using UnaryOp::UnaryOp;
  static constexpr VecMathOp kVec = VecMathOp::kErf;
  static constexpr int64_t kGrain = kMathGrain;
  template <typename C> C operator()(C x) const { return std::erf(x); }
};

struct Neg : UnaryOp { using UnaryOp::UnaryOp; using Types = SignedTypes; template <typename C> C operator()(C x) const { return negate(x); } };
struct Abs : UnaryOp {
  using UnaryOp::UnaryOp;
  using Types = NumericTypes;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) return x;
    else if constexpr (std::is_integral_v<C>) return x < 0 ? negate(x) : x;
    else return std::fabs(x);
  }
};
// -1, 0 or 1 (NaN stays NaN).
struct Sign : UnaryOp {
  using UnaryOp::UnaryOp;
  using Types = NumericTypes;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) return x > 0 ? C(1) : C(0);
    else return x > C(0) ? C(1) : x < C(0) ? C(-1) : x;
  }
};
struct Relu : UnaryOp { using UnaryOp::UnaryOp; using Types = SignedTypes; template <typename C> C operator()(C x) const { return x > C(0) ? x : C(0); } };
struct Not : UnaryOp { using UnaryOp::UnaryOp; using Types = BoolTypes; bool operator()(bool x) const { return !x; } };

struct IsNaN : UnaryOp {
  using UnaryOp::UnaryOp;
  static constexpr bool kBoolOut = true;
  template <typename C> bool operator()(C x) const { return std::isnan(x); }
};
struct IsInf : UnaryOp {
  static constexpr bool kBoolOut = true;
  bool positive, negative;
  explicit IsInf(const Attributes& a)
      : positive(a.get_int("detect_positive", 1) != 0), negative(a.get_int("detect_negative", 1) != 0) {}
  template <typename C> bool operator()(C x) const { return std::isinf(x) && (x > 0 ? positive : negative); }
};

struct LeakyRelu : UnaryOp {
  float alpha;
  explicit LeakyRelu(const Attributes& a) : alpha(a.get_float("alpha", 0.01f)) {}
  template <typename C> C operator()(C x) const { return x >= C(0) ? x : C(alpha) * x; }
};
struct Elu : UnaryOp {
  static constexpr int64_t kGrain = kMathGrain;
  float alpha;
  explicit Elu(const Attributes& a) : alpha(a.get_float("alpha", 1.0f)) {}
  template <typename C> C operator()(C x) const { return x >= C(0) ? x : C(alpha) * std::expm1(x); }
};
struct Selu : UnaryOp {
  static constexpr int64_t kGrain = kMathGrain;
  float alpha, gamma;
  explicit Selu(const Attributes& a)
      : alpha(a.get_float("alpha", 1.67326319217681884765625f)), gamma(a.get_float("gamma", 1.05070102214813232421875f)) {}
  template <typename C> C operator()(C x) const { return C(gamma) * (x > C(0) ? x : C(alpha) * std::expm1(x)); }
};
struct Celu : UnaryOp {
  static constexpr int64_t kGrain = kMathGrain;
  float alpha;
  explicit Celu(const Attributes& a) : alpha(a.get_float("alpha", 1.0f)) {}
  template <typename C> C operator()(C x) const { return x >= C(0) ? x : C(alpha) * std::expm1(x / C(alpha)); }
};
// log(1 + e^x) without overflow for large x.
struct Softplus : UnaryOp {
  using UnaryOp::UnaryOp;
  static constexpr int64_t kGrain = kMathGrain;
  template <typename C> C operator()(C x) const { return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
};
struct Softsign : UnaryOp { using UnaryOp::UnaryOp; template <typename C> C operator()(C x) const { return x / (C(1) + std::fabs(x)); } };
struct HardSigmoid : UnaryOp {
  float alpha, beta;
  explicit HardSigmoid(const Attributes& a) : alpha(a.get_float("alpha", 0.2f)), beta(a.get_float("beta", 0.5f)) {}
  template <typename C> C operator()(C x) const { return std::fmin(C(1), std::fmax(C(0), C(alpha) * x + C(beta))); }
};
struct HardSwish : UnaryOp {
  using UnaryOp::UnaryOp;
  template <typename C> C operator()(C x) const { return x * std::fmin(C(1), std::fmax(C(0), x / C(6) + C(0.5))); }
};
struct ThresholdedRelu : UnaryOp {
  float alpha;
  explicit ThresholdedRelu(const Attributes& a) : alpha(a.get_float("alpha", 1.0f)) {}
  template <typename C> C operator()(C x) const { return x > C(alpha) ? x : C(0); }
};

// ---- Mapping a functor over a span -------------------------------------------------------------

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

template <typename F>
void float_span(const F& f, const float* in, float* out, int64_t n) {
  if constexpr (F::kVec != VecMathOp::kNone) {
    if (VecMathFn simd = vec_math(F::kVec)) return simd(in, out, n);
  }
  for (int64_t k = 0; k < n; ++k) out[k] = f(in[k]);
}

// Type-erased span: op points at the functor (it may carry attributes).
using UnarySpanFn = void (*)(const void* op, const void* in, void* out, int64_t n);

template <typename F, typename T>
void unary_span(const void* op, const void* in, void* out, int64_t n) {
  const F& f = *static_cast<const F*>(op);
  using TO = std::conditional_t<F::kBoolOut, bool, T>;
  const T* x = static_cast<const T*>(in);
  TO* y = static_cast<TO*>(out);
  if constexpr (std::is_same_v<T, float> && !F::kBoolOut) {
    float_span(f, x, y, n);
  } else if constexpr (kIsHalf<T> && !F::kBoolOut) {
    // Widen a stack block to f32, run the f32 path in place, narrow back.
    constexpr int64_t kBlock = 512;
    float buf[kBlock];
    for (int64_t base = 0; base < n; base += kBlock) {
      const int64_t m = std::min(kBlock, n - base);
      widen_to_f32(x + base, buf, m);
      float_span(f, buf, buf, m);
      narrow_from_f32(buf, y + base, m);
    }
  } else {
    for (int64_t k = 0; k < n; ++k) y[k] = store<TO>(static_cast<compute_t<TO>>(f(load(x[k]))));
  }
}

template <typename F>
class UnaryKernel final : public OpKernel {
 public:
  explicit UnaryKernel(const Node& node) : f_(node.attrs) {}

  Status prepare(PrepareContext& ctx) override {
    const DType dtype = ctx.input(0).dtype;
    span_ = nullptr;
    (void)F::Types::dispatch(dtype, [&]<typename T>() {
      span_ = &unary_span<F, T>;
      return Status::ok();
    });
    if (span_ == nullptr) return ctx.fail("no CPU kernel for dtype ", dtype_name(dtype));
    in_bytes_ = dtype_bits(dtype) / 8;
    out_bytes_ = dtype_bits(ctx.output(0).dtype) / 8;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const auto* in = static_cast<const char*>(ctx.input(0).data);
    auto* out = static_cast<char*>(ctx.output(0).data);
    parallel_for(ctx.pool, ctx.output(0).numel(), F::kGrain, [&](int64_t begin, int64_t end) {
      span_(&f_, in + begin * in_bytes_, out + begin * out_bytes_, end - begin);
    });
    return Status::ok();
  }

 private:
  F f_;
  UnarySpanFn span_ = nullptr;
  int64_t in_bytes_ = 0, out_bytes_ = 0;
};

// ---- Clip --------------------------------------------------------------------------------------

// out = min(max(x, lo), hi); NaN passes through.
template <typename T>
void clip_span(const void* in, void* out, int64_t n, const void* lo_ptr, const void* hi_ptr) {
  const T* x = static_cast<const T*>(in);
  T* y = static_cast<T*>(out);
  const auto lo = load(*static_cast<const T*>(lo_ptr));
  const auto hi = load(*static_cast<const T*>(hi_ptr));
  for (int64_t k = 0; k < n; ++k) {
    auto v = load(x[k]);
    v = v < lo ? lo : v;
    y[k] = store<T>(v > hi ? hi : v);
  }
}

class ClipKernel final : public OpKernel {
 public:
  // Bounds default to the type's range, or the min/max attributes before opset 11; from opset
  // 11 they are optional scalar inputs read at run time.
  explicit ClipKernel(const Node& node) {
    if (node.opset < 11) {
      if (node.attrs.has("min")) attr_min_ = node.attrs.get_float("min", 0);
      if (node.attrs.has("max")) attr_max_ = node.attrs.get_float("max", 0);
    }
  }

  Status prepare(PrepareContext& ctx) override {
    const DType dtype = ctx.input(0).dtype;
    const Status status = NumericTypes::dispatch(dtype, [&]<typename T>() {
      using C = compute_t<T>;
      constexpr bool kFloat = std::numeric_limits<C>::has_infinity;
      C lo = kFloat ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::lowest();
      C hi = kFloat ? std::numeric_limits<C>::infinity() : std::numeric_limits<C>::max();
      if (attr_min_) lo = static_cast<C>(*attr_min_);
      if (attr_max_) hi = static_cast<C>(*attr_max_);
      const T lo_t = store<T>(lo), hi_t = store<T>(hi);
      std::memcpy(lo_.data(), &lo_t, sizeof(T));
      std::memcpy(hi_.data(), &hi_t, sizeof(T));
      span_ = &clip_span<T>;
      return Status::ok();
    });
    if (!status) return ctx.fail(status.message());
    bytes_ = dtype_bits(dtype) / 8;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const auto* in = static_cast<const char*>(ctx.input(0).data);
    auto* out = static_cast<char*>(ctx.output(0).data);
    const void* lo = ctx.has_input(1) ? ctx.input(1).data : lo_.data();
    const void* hi = ctx.has_input(2) ? ctx.input(2).data : hi_.data();
    parallel_for(ctx.pool, ctx.output(0).numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
      span_(in + begin * bytes_, out + begin * bytes_, end - begin, lo, hi);
    });
    return Status::ok();
  }

 private:
  std::optional<float> attr_min_, attr_max_;
  void (*span_)(const void*, void*, int64_t, const void*, const void*) = nullptr;
  int64_t bytes_ = 0;
  alignas(8) std::array<char, 8> lo_{}, hi_{};
};

// ---- Cast / CastLike -----------------------------------------------------------------------------

// Float to integer truncates toward zero; anything to bool is `!= 0`; 16-bit floats go
// through f32.
template <typename S, typename D>
D convert(S x) {
  if constexpr (std::is_same_v<D, bool>) return load(x) != compute_t<S>(0);
  else return store<D>(static_cast<compute_t<D>>(load(x)));
}

template <typename S, typename D>
void cast_span(const void* in, void* out, int64_t n) {
  const S* x = static_cast<const S*>(in);
  D* y = static_cast<D*>(out);
  if constexpr (std::is_same_v<S, Float16> && std::is_same_v<D, float>) {
    convert_f16_to_f32(x, y, n);  // F16C where available
  } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, Float16>) {
    convert_f32_to_f16(x, y, n);
  } else {
    for (int64_t k = 0; k < n; ++k) y[k] = convert<S, D>(x[k]);
  }
}

// Cast (target from `to`) and CastLike (target from input 1): the output dtype says which.
class CastKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const DType from = ctx.input(0).dtype, to = ctx.output(0).dtype;
    span_ = nullptr;
    if (from != to) {
      (void)AllTypes::dispatch(from, [&]<typename S>() {
        return AllTypes::dispatch(to, [&]<typename D>() {
          span_ = &cast_span<S, D>;
          return Status::ok();
        });
      });
      if (span_ == nullptr) return ctx.fail("cannot cast ", dtype_name(from), " to ", dtype_name(to));
    }
    in_bytes_ = dtype_bits(from) / 8;
    out_bytes_ = dtype_bits(to) / 8;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const auto* in = static_cast<const char*>(ctx.input(0).data);
    auto* out = static_cast<char*>(ctx.output(0).data);
    const int64_t n = ctx.output(0).numel();
    if (span_ == nullptr) {  // same dtype: a copy
      std::memcpy(out, in, static_cast<size_t>(n * out_bytes_));
      return Status::ok();
    }
    parallel_for(ctx.pool, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      span_(in + begin * in_bytes_, out + begin * out_bytes_, end - begin);
    });
    return Status::ok();
  }

 private:
  void (*span_)(const void*, void*, int64_t) = nullptr;
  int64_t in_bytes_ = 0, out_bytes_ = 0;
};

void add_kernel(OpRegistry& registry, const char* op, std::vector<DType> dtypes, int since,
                std::function<std::unique_ptr<OpKernel>(const Node&)> create) {
  registry.add_kernel(KernelDef{"", op, DeviceType::kCpu, std::move(dtypes), 0, since, INT_MAX, std::move(create)});
}

template <typename F>
void add_unary(OpRegistry& registry, const char* op) {
  add_kernel(registry, op, F::Types::dtypes(), 1, [](const Node& node) { return std::make_unique<UnaryKernel<F>>(node); });
}

}  // namespace

void register_unary_cpu_kernels(OpRegistry& registry) {
  add_unary<Sqrt>(registry, "Sqrt");
  add_unary<Reciprocal>(registry, "Reciprocal");
  add_unary<Neg>(registry, "Neg");
  add_unary<Abs>(registry, "Abs");
  add_unary<Exp>(registry, "Exp");
  add_unary<Log>(registry, "Log");
  add_unary<Tanh>(registry, "Tanh");
  add_unary<Sigmoid>(registry, "Sigmoid");
  add_unary<Erf>(registry, "Erf");
  add_unary<Relu>(registry, "Relu");
  add_unary<Not>(registry, "Not");
  add_unary<Sign>(registry, "Sign");
  add_unary<Floor>(registry, "Floor");
  add_unary<Ceil>(registry, "Ceil");
  add_unary<Round>(registry, "Round");
  add_unary<Sin>(registry, "Sin");
  add_unary<Cos>(registry, "Cos");
  add_unary<LeakyRelu>(registry, "LeakyRelu");
  add_unary<Elu>(registry, "Elu");
  add_unary<Selu>(registry, "Selu");
  add_unary<Softplus>(registry, "Softplus");
  add_unary<Softsign>(registry, "Softsign");
  add_unary<HardSigmoid>(registry, "HardSigmoid");
  add_unary<HardSwish>(registry, "HardSwish");
  add_unary<ThresholdedRelu>(registry, "ThresholdedRelu");
  add_unary<Celu>(registry, "Celu");
  add_unary<IsNaN>(registry, "IsNaN");
  add_unary<IsInf>(registry, "IsInf");
  add_kernel(registry, "Clip", NumericTypes::dtypes(), 1, [](const Node& node) { return std::make_unique<ClipKernel>(node); });
  // Cast before opset 6 named its target with a string; the schema rejects that form.
  for (const char* op : {"Cast", "CastLike"}) {
    add_kernel(registry, op, AllTypes::dtypes(), 6, [](const Node&) { return std::make_unique<CastKernel>(); });
  }
}

}  // namespace onnx_genai
