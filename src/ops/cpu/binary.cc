// CPU kernels of the broadcasting elementwise ops. Nothing is materialised: a BroadcastPlan
// walks the output as contiguous spans and each input advances with stride 1 or 0 along a span
// (ops/cpu/elementwise.h). Variadic ops (Max, Min, Sum, Mean) fold left to right into the
// output: step 0 writes op(in0, in1), step k combines the output with input k + 1.
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "ops/cpu/elementwise.h"
#include "ops/op.h"

namespace onnx_genai {

namespace {

template <typename C>
bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>) return x != x;  // inlines to one compare, unlike a libm call
  else return false;
}

// ---- Operations on compute values (float for f16/bf16) ----------------------------------------

struct AddOp { template <typename C> C operator()(C a, C b) const { return static_cast<C>(a + b); } };
struct SubOp { template <typename C> C operator()(C a, C b) const { return static_cast<C>(a - b); } };
struct MulOp { template <typename C> C operator()(C a, C b) const { return static_cast<C>(a * b); } };

// Integer division truncates toward zero like C (and ONNX Runtime). Division by zero gives 0
// and MIN / -1 wraps instead of trapping: bad data must not kill the process.
struct DivOp {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return static_cast<C>(0 - static_cast<std::make_unsigned_t<C>>(a));
      }
    }
    return static_cast<C>(a / b);
  }
};

// NaN propagates, as in numpy.maximum / minimum. `|` rather than `||` keeps the loop free of
// branches so it vectorises.
struct MaxOp { template <typename C> C operator()(C a, C b) const { return ((a < b) | is_nan(b)) ? b : a; } };
struct MinOp { template <typename C> C operator()(C a, C b) const { return ((b < a) | is_nan(b)) ? b : a; } };

// Mod with fmod=1: the result takes the dividend's sign (C fmod / %).
struct FmodOp {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::fmod(a, b);
    } else {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return 0;
      }
      return static_cast<C>(a % b);
    }
  }
};

// Mod with fmod=0: the result takes the divisor's sign (Python %); integers only.
struct ModOp {
  template <typename C>
  C operator()(C a, C b) const {
    const C r = FmodOp()(a, b);
    if constexpr (std::is_signed_v<C>) {
      if (r != 0 && ((r < 0) != (b < 0))) return static_cast<C>(r + b);
    }
    return r;
  }
};

// Integer power by squaring in unsigned arithmetic (wraps on overflow like ONNX Runtime's
// integer loops, and stays exact where a double pow would round above 2^53).
template <typename X, typename Y>
X int_pow(X x, Y y) {
  if constexpr (std::is_signed_v<Y>) {
    if (y < 0) return x == 1 ? X(1) : x == -1 ? X((y & 1) ? -1 : 1) : X(0);
  }
  using U = std::make_unsigned_t<X>;
  U result = 1, base = static_cast<U>(x);
  for (auto e = static_cast<std::make_unsigned_t<Y>>(y); e != 0; e >>= 1) {
    if (e & 1) result = static_cast<U>(result * base);
    base = static_cast<U>(base * base);
  }
  return static_cast<X>(result);
}

// Pow: the exponent converts to the base's compute type; an integer base with a float exponent
// computes in double and truncates (ONNX Runtime does the same).
struct PowOp {
  template <typename X, typename Y>
  X operator()(X x, Y y) const {
    if constexpr (std::is_integral_v<X> && std::is_integral_v<Y>) return int_pow(x, y);
    else if constexpr (std::is_integral_v<X>) return static_cast<X>(std::pow(static_cast<double>(x), static_cast<double>(y)));
    else return std::pow(x, static_cast<X>(y));
  }
};
// Pow with a constant exponent of 2 (LayerNorm decompositions): exact, and vectorises.
struct SquareOp { template <typename X, typename Y> X operator()(X x, Y) const { return x * x; } };

struct EqualOp { template <typename C> bool operator()(C a, C b) const { return a == b; } };
struct LessOp { template <typename C> bool operator()(C a, C b) const { return a < b; } };
struct GreaterOp { template <typename C> bool operator()(C a, C b) const { return a > b; } };
struct LessEqualOp { template <typename C> bool operator()(C a, C b) const { return a <= b; } };
struct GreaterEqualOp { template <typename C> bool operator()(C a, C b) const { return a >= b; } };
struct AndOp { bool operator()(bool a, bool b) const { return a && b; } };
struct OrOp { bool operator()(bool a, bool b) const { return a || b; } };
struct XorOp { bool operator()(bool a, bool b) const { return a != b; } };

// Shifts by the type's width or more give 0 rather than undefined behaviour.
struct ShiftLeftOp {
  template <typename C>
  C operator()(C a, C b) const { return b >= sizeof(C) * 8 ? C(0) : static_cast<C>(a << b); }
};
struct ShiftRightOp {
  template <typename C>
  C operator()(C a, C b) const { return b >= sizeof(C) * 8 ? C(0) : static_cast<C>(a >> b); }
};

// ---- Picking a span function for the input dtypes ---------------------------------------------

// The span function of an op for input dtypes (a, b), or null when there is none.
using SpanPicker = BinarySpanFn (*)(DType a, DType b);

template <typename Op, typename Types, bool kBoolOut = false>
BinarySpanFn pick_same(DType a, DType b) {
  BinarySpanFn fn = nullptr;
  if (a != b) return nullptr;
  (void)Types::dispatch(a, [&]<typename T>() {
    fn = &binary_span_erased<Op, T, T, std::conditional_t<kBoolOut, bool, T>>;
    return Status::ok();
  });
  return fn;
}

// f32 Add/Sub/Mul/Div use the AVX2/AVX-512 spans when the CPU has them.
template <typename Op, ArithOp kArith>
BinarySpanFn pick_arith(DType a, DType b) {
  if (a == DType::kF32 && b == DType::kF32) {
    if (BinarySpanFn simd = arith_f32(kArith)) return simd;
  }
  return pick_same<Op, NumericTypes>(a, b);
}

using IntegerTypes = TypeList<int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t>;
using PowBaseTypes = TypeList<float, Float16, BFloat16, double, int32_t, int64_t>;

template <typename Op>
BinarySpanFn pick_pow(DType a, DType b) {
  BinarySpanFn fn = nullptr;
  (void)PowBaseTypes::dispatch(a, [&]<typename X>() {
    return NumericTypes::dispatch(b, [&]<typename Y>() {
      fn = &binary_span_erased<Op, X, Y, X>;
      return Status::ok();
    });
  });
  return fn;
}

// ---- Kernels -----------------------------------------------------------------------------------

class BroadcastKernel : public OpKernel {
 public:
  BroadcastKernel(SpanPicker pick, bool mean) : pick_(pick), mean_(mean) {}

  Status prepare(PrepareContext& ctx) override {
    const int n = static_cast<int>(ctx.inputs.size());
    const DType t0 = ctx.input(0).dtype;
    const DType t1 = n > 1 ? ctx.input(1).dtype : t0;
    span_ = pick_(t0, t1);
    if (span_ == nullptr) {
      return ctx.fail("no CPU kernel for input dtypes ", dtype_name(t0), ", ", dtype_name(t1),
                      pick_(t0, t0) != nullptr || pick_(t1, t1) != nullptr ? " (dtypes must match)" : "");
    }
    const Shape& out = ctx.output(0).shape;
    a_bytes_ = dtype_bits(t0) / 8;
    b_bytes_ = dtype_bits(t1) / 8;
    out_bytes_ = dtype_bits(ctx.output(0).dtype) / 8;
    steps_.clear();
    for (int i = 1; i < n; ++i) {
      const Shape a = i == 1 ? ctx.input(0).shape : out;
      const Shape shapes[] = {a, ctx.input(i).shape};
      steps_.push_back({BroadcastPlan::make(out, shapes), i});
    }
    if (mean_ && n > 1) {
      // Mean = Sum, then divide by n as a broadcast scalar held in the input dtype.
      divide_ = pick_same<DivOp, FloatTypes>(t0, t0);
      OG_RETURN_IF_ERROR(FloatTypes::dispatch(t0, [&]<typename T>() {
        const T count = store<T>(static_cast<compute_t<T>>(n));
        std::memcpy(count_.data(), &count, sizeof(T));
        return Status::ok();
      }));
      const Shape shapes[] = {out, Shape{}};
      divide_plan_ = BroadcastPlan::make(out, shapes);
    }
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const KernelTensor& out = ctx.output(0);
    auto* dst = static_cast<char*>(out.data);
    if (steps_.empty()) {  // one input: the result is that input
      std::memcpy(dst, ctx.input(0).data, static_cast<size_t>(out.numel() * out_bytes_));
      return Status::ok();
    }
    for (const Step& step : steps_) {
      const char* a = step.input == 1 ? static_cast<const char*>(ctx.input(0).data) : dst;
      apply(step.plan, span_, a, a_bytes_, static_cast<const char*>(ctx.input(step.input).data), dst, ctx.pool);
    }
    if (divide_ != nullptr) apply(divide_plan_, divide_, dst, a_bytes_, count_.data(), dst, ctx.pool);
    return Status::ok();
  }

 protected:
  void apply(const BroadcastPlan& plan, BinarySpanFn fn, const char* a, int64_t a_bytes, const char* b, char* dst,
             ThreadPool* pool) const {
    const int64_t sa = plan.strides[0].back(), sb = plan.strides[1].back();
    for_each_span(plan, pool, kElementwiseGrain, [&](int64_t o, const SpanOffsets& at, int64_t len) {
      fn(a + at[0] * a_bytes, sa, b + at[1] * b_bytes_, sb, dst + o * out_bytes_, len);
    });
  }

  struct Step {
    BroadcastPlan plan;
    int input;  // combined with input 0 (step for input 1) or with the output so far
  };
  SpanPicker pick_;
  bool mean_;
  BinarySpanFn span_ = nullptr;
  std::vector<Step> steps_;
  int64_t a_bytes_ = 0, b_bytes_ = 0, out_bytes_ = 0;
  BinarySpanFn divide_ = nullptr;
  BroadcastPlan divide_plan_;
  alignas(8) std::array<char, 8> count_{};
};

// Pow with a constant scalar exponent of 2 becomes x * x.
class PowKernel final : public BroadcastKernel {
 public:
  PowKernel() : BroadcastKernel(&pick_pow<PowOp>, false) {}
  Status prepare(PrepareContext& ctx) override {
    OG_RETURN_IF_ERROR(BroadcastKernel::prepare(ctx));
    const Tensor* exponent = ctx.value(1);
    if (exponent == nullptr || exponent->numel() != 1 || !dtype_is_float(ctx.input(0).dtype)) return Status::ok();
    double value = 0;
    OG_RETURN_IF_ERROR(NumericTypes::dispatch(exponent->dtype(), [&]<typename T>() {
      value = static_cast<double>(load(exponent->data<T>()[0]));
      return Status::ok();
    }));
    if (value == 2.0) span_ = pick_pow<SquareOp>(ctx.input(0).dtype, ctx.input(1).dtype);
    return Status::ok();
  }
};

// One loop per stride pattern (each stride 0 or 1, fixed at compile time). The select is a
// bit mask over unsigned words: a `? :` on loads is control flow GCC will not vectorise.
template <typename T, int64_t kSc, int64_t kSx, int64_t kSy>
void where_loop(const uint8_t* cond, const T* x, const T* y, T* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    const T mask = static_cast<T>(T(0) - T(cond[k * kSc] != 0));
    out[k] = static_cast<T>((x[k * kSx] & mask) | (y[k * kSy] & static_cast<T>(~mask)));
  }
}

template <typename T>
using WhereLoop = void (*)(const uint8_t*, const T*, const T*, T*, int64_t);

// Indexed by sc * 4 + sx * 2 + sy.
template <typename T, size_t... kPattern>
constexpr std::array<WhereLoop<T>, 8> where_loops(std::index_sequence<kPattern...>) {
  return {&where_loop<T, (kPattern >> 2) & 1, (kPattern >> 1) & 1, kPattern & 1>...};
}

// Where only moves bytes, so it dispatches on element size rather than dtype.
class WhereKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape shapes[] = {ctx.input(0).shape, ctx.input(1).shape, ctx.input(2).shape};
    plan_ = BroadcastPlan::make(ctx.output(0).shape, shapes);
    bytes_ = dtype_bits(ctx.input(1).dtype) / 8;
    if (bytes_ != 1 && bytes_ != 2 && bytes_ != 4 && bytes_ != 8) {
      return ctx.fail("unsupported dtype ", dtype_name(ctx.input(1).dtype));
    }
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    switch (bytes_) {
      case 1: return run_typed<uint8_t>(ctx);
      case 2: return run_typed<uint16_t>(ctx);
      case 4: return run_typed<uint32_t>(ctx);
      default: return run_typed<uint64_t>(ctx);
    }
  }

 private:
  template <typename T>
  Status run_typed(const KernelContext& ctx) const {
    const auto* cond = ctx.input(0).ptr<const uint8_t>();
    const auto* x = ctx.input(1).ptr<const T>();
    const auto* y = ctx.input(2).ptr<const T>();
    T* out = ctx.output(0).ptr<T>();
    static constexpr auto kLoops = where_loops<T>(std::make_index_sequence<8>());
    const WhereLoop<T> loop =
        kLoops[static_cast<size_t>(plan_.strides[0].back() * 4 + plan_.strides[1].back() * 2 + plan_.strides[2].back())];
    for_each_span(plan_, ctx.pool, kElementwiseGrain, [&](int64_t o, const SpanOffsets& at, int64_t len) {
      loop(cond + at[0], x + at[1], y + at[2], out + o, len);
    });
    return Status::ok();
  }

  BroadcastPlan plan_;
  int64_t bytes_ = 0;
};

void add_kernel(OpRegistry& registry, const char* op, std::vector<DType> dtypes,
                std::function<std::unique_ptr<OpKernel>(const Node&)> create, int type_input = 0) {
  registry.add_kernel(KernelDef{"", op, DeviceType::kCpu, std::move(dtypes), type_input, 1, INT_MAX, std::move(create)});
}

template <typename Types>
void add_broadcast(OpRegistry& registry, const char* op, SpanPicker pick, bool mean = false) {
  add_kernel(registry, op, Types::dtypes(), [pick, mean](const Node&) { return std::make_unique<BroadcastKernel>(pick, mean); });
}

}  // namespace

void register_binary_cpu_kernels(OpRegistry& registry) {
  add_broadcast<NumericTypes>(registry, "Add", &pick_arith<AddOp, ArithOp::kAdd>);
  add_broadcast<NumericTypes>(registry, "Sub", &pick_arith<SubOp, ArithOp::kSub>);
  add_broadcast<NumericTypes>(registry, "Mul", &pick_arith<MulOp, ArithOp::kMul>);
  add_broadcast<NumericTypes>(registry, "Div", &pick_arith<DivOp, ArithOp::kDiv>);
  add_broadcast<NumericTypes>(registry, "Max", &pick_same<MaxOp, NumericTypes>);
  add_broadcast<NumericTypes>(registry, "Min", &pick_same<MinOp, NumericTypes>);
  add_broadcast<FloatTypes>(registry, "Sum", &pick_arith<AddOp, ArithOp::kAdd>);
  add_broadcast<FloatTypes>(registry, "Mean", &pick_arith<AddOp, ArithOp::kAdd>, /*mean=*/true);
  add_broadcast<AllTypes>(registry, "Equal", &pick_same<EqualOp, AllTypes, true>);
  add_broadcast<NumericTypes>(registry, "Less", &pick_same<LessOp, NumericTypes, true>);
  add_broadcast<NumericTypes>(registry, "Greater", &pick_same<GreaterOp, NumericTypes, true>);
  add_broadcast<NumericTypes>(registry, "LessOrEqual", &pick_same<LessEqualOp, NumericTypes, true>);
  add_broadcast<NumericTypes>(registry, "GreaterOrEqual", &pick_same<GreaterEqualOp, NumericTypes, true>);
  add_broadcast<BoolTypes>(registry, "And", &pick_same<AndOp, BoolTypes, true>);
  add_broadcast<BoolTypes>(registry, "Or", &pick_same<OrOp, BoolTypes, true>);
  add_broadcast<BoolTypes>(registry, "Xor", &pick_same<XorOp, BoolTypes, true>);
  add_kernel(registry, "Pow", PowBaseTypes::dtypes(), [](const Node&) { return std::make_unique<PowKernel>(); });
  // Mod: fmod=0 (Python sign rule) exists only for integers; the schema rejects floats with it.
  add_kernel(registry, "Mod", NumericTypes::dtypes(), [](const Node& node) {
    const bool fmod = node.attrs.get_int("fmod", 0) != 0;
    return std::make_unique<BroadcastKernel>(
        fmod ? &pick_same<FmodOp, NumericTypes> : &pick_same<ModOp, IntegerTypes>, false);
  });
  add_kernel(registry, "BitShift", UnsignedTypes::dtypes(), [](const Node& node) {
    const bool left = node.attrs.get_string("direction", "") == "LEFT";
    return std::make_unique<BroadcastKernel>(left ? &pick_same<ShiftLeftOp, UnsignedTypes> : &pick_same<ShiftRightOp, UnsignedTypes>,
                                             false);
  });
  add_kernel(registry, "Where", AllTypes::dtypes(), [](const Node&) { return std::make_unique<WhereKernel>(); },
             /*type_input=*/1);
}

}  // namespace onnx_genai
