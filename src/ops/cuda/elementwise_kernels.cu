// Elementwise kernels on the GPU: broadcasting binary arithmetic, one-tensor math / activations,
// and Cast. Each op is a device functor on compute values (f32 for f32 / f16 / bf16, the integer
// type itself otherwise); one templated kernel per shape of access maps any functor.
//
// Memory-access plan: a grid-stride loop over the flat output, 256 threads per block. The flat
// kernels (binary with each operand scalar, contiguous or a repeating last-dim row; unary) give
// each thread a group of 16 bytes of output (kVec elements) and read / write it as one 16-byte
// access when every pointer is aligned and a row period is a multiple of kVec; groups past the
// end, or unaligned tensors, fall back to one element at a time. The general binary kernel
// decomposes each output index over at most kMaxBroadcastRank merged dims, one element per
// thread. Cast moves one element per thread (it is bandwidth bound either way).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/elementwise_kernels.h"

namespace onnx_genai::cuda {

namespace {

constexpr int kThreads = 256;
// Grid cap: enough blocks to fill an H200 (132 SMs x 8 resident blocks) many times over; the
// grid-stride loop covers the rest.
constexpr int64_t kMaxBlocks = 1 << 16;

// ---- Device types -----------------------------------------------------------------------------

using ArithTypes = TypeList<float, __half, __nv_bfloat16, int32_t, int64_t>;
using CastTypes = TypeList<float, __half, __nv_bfloat16, int32_t, int64_t, bool, uint8_t, int8_t>;

template <typename T>
constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T> using compute_t = std::conditional_t<kIsFloat<T>, float, T>;

template <typename T>
__device__ __forceinline__ compute_t<T> load_value(T v) {
  if constexpr (kIsFloat<T>) return to_float(v);
  else return v;
}
template <typename T>
__device__ __forceinline__ T store_value(compute_t<T> v) {
  if constexpr (kIsFloat<T>) return from_float<T>(v);
  else return v;
}

// Two's complement wrap-around for integer arithmetic (signed overflow is undefined in C++).
template <typename C>
__device__ __forceinline__ C wrap(std::make_unsigned_t<C> v) { return static_cast<C>(v); }
template <typename C>
__device__ __forceinline__ std::make_unsigned_t<C> bits_of(C v) { return static_cast<std::make_unsigned_t<C>>(v); }

// ---- Binary functors -----------------------------------------------------------------------------

struct AddFn {
  using Bases = ArithTypes;
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) return wrap<C>(bits_of(a) + bits_of(b));
    else return a + b;
  }
};
struct SubFn {
  using Bases = ArithTypes;
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) return wrap<C>(bits_of(a) - bits_of(b));
    else return a - b;
  }
};
struct MulFn {
  using Bases = ArithTypes;
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) return wrap<C>(bits_of(a) * bits_of(b));
    else return a * b;
  }
};
// As the CPU: integers truncate toward zero, x / 0 = 0, MIN / -1 wraps to MIN.
struct DivFn {
  using Bases = ArithTypes;
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) return 0;
      if (b == -1) return wrap<C>(0 - bits_of(a));
    }
    return a / b;
  }
};
// The exponent converts to f32; an exponent of 2 is x * x (what powf gives, correctly rounded,
// and what the CPU kernel computes for a constant 2).
struct PowFn {
  using Bases = FloatTypes;
  template <typename Y> __device__ float operator()(float x, Y y) const {
    const float e = static_cast<float>(y);
    return e == 2.0f ? x * x : powf(x, e);
  }
};

using PowExponentTypes = TypeList<float, __half, __nv_bfloat16, int32_t, int64_t>;
template <typename Op, typename TA>
using OperandBTypes = std::conditional_t<std::is_same_v<Op, PowFn>, PowExponentTypes, TypeList<TA>>;

template <typename F>
bool with_binary_op(BinaryOp op, F&& fn) {
  switch (op) {
    case BinaryOp::kAdd: return fn.template operator()<AddFn>();
    case BinaryOp::kSub: return fn.template operator()<SubFn>();
    case BinaryOp::kMul: return fn.template operator()<MulFn>();
    case BinaryOp::kDiv: return fn.template operator()<DivFn>();
    case BinaryOp::kPow: return fn.template operator()<PowFn>();
  }
  return false;
}

// Calls fn.template operator()<Op, TA, TB>() for the instantiation serving (op, dtype, b_dtype).
template <typename F>
bool with_binary_types(BinaryOp op, DType dtype, DType b_dtype, F&& fn) {
  return with_binary_op(op, [&]<typename Op>() {
    bool found = false;
    dispatch(typename Op::Bases{}, dtype, [&]<typename TA>() {
      found = dispatch(OperandBTypes<Op, TA>{}, b_dtype, [&]<typename TB>() { fn.template operator()<Op, TA, TB>(); });
    });
    return found;
  });
}

// ---- Binary kernels --------------------------------------------------------------------------------

__device__ __forceinline__ int64_t operand_index(Operand read, int64_t i, int64_t period) {
  return read == Operand::kScalar ? 0 : read == Operand::kRow ? i % period : i;
}

// Elements [i, i + VEC) of an operand as one aligned access (a row operand's period is a
// multiple of VEC, so the group never wraps).
template <typename T, int VEC>
__device__ __forceinline__ void load_group(const T* p, Operand read, int64_t i, int64_t period, compute_t<T> (&v)[VEC]) {
  if (read == Operand::kScalar) {
    const compute_t<T> s = load_value(p[0]);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = s;
    return;
  }
  const Pack<T, VEC> pack = *reinterpret_cast<const Pack<T, VEC>*>(p + operand_index(read, i, period));
#pragma unroll
  for (int k = 0; k < VEC; ++k) v[k] = load_value(pack.v[k]);
}

template <typename Op, typename TA, typename TB>
__global__ void binary_flat_kernel(BinaryArgs args, bool vectorized) {
  constexpr int kVec = 16 / sizeof(TA);
  const Op op;
  const TA* a = static_cast<const TA*>(args.a);
  const TB* b = static_cast<const TB*>(args.b);
  TA* out = static_cast<TA*>(args.out);
  const int64_t groups = (args.n + kVec - 1) / kVec;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) {
    const int64_t i = g * kVec;
    if (vectorized && i + kVec <= args.n) {
      compute_t<TA> x[kVec];
      compute_t<TB> y[kVec];
      load_group<TA, kVec>(a, args.a_read, i, args.period, x);
      load_group<TB, kVec>(b, args.b_read, i, args.period, y);
      Pack<TA, kVec> r;
#pragma unroll
      for (int k = 0; k < kVec; ++k) r.v[k] = store_value<TA>(op(x[k], y[k]));
      *reinterpret_cast<Pack<TA, kVec>*>(out + i) = r;
    } else {
      for (int64_t j = i, end = i + kVec < args.n ? i + kVec : args.n; j < end; ++j) {
        out[j] = store_value<TA>(op(load_value(a[operand_index(args.a_read, j, args.period)]),
                                    load_value(b[operand_index(args.b_read, j, args.period)])));
      }
    }
  }
}

template <typename Op, typename TA, typename TB>
__global__ void binary_general_kernel(BinaryArgs args) {
  const Op op;
  const TA* a = static_cast<const TA*>(args.a);
  const TB* b = static_cast<const TB*>(args.b);
  TA* out = static_cast<TA*>(args.out);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < args.n; i += stride) {
    int64_t rem = i, at_a = 0, at_b = 0;
    for (int d = args.rank - 1; d >= 0; --d) {
      const int64_t c = rem % args.dims[d];
      rem /= args.dims[d];
      at_a += c * args.a_strides[d];
      at_b += c * args.b_strides[d];
    }
    out[i] = store_value<TA>(op(load_value(a[at_a]), load_value(b[at_b])));
  }
}

unsigned grid_for(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename T, int VEC>
bool operand_vectorizes(const void* p, Operand read, int64_t period) {
  if (read == Operand::kScalar) return true;
  return aligned(p, sizeof(T) * VEC) && (read != Operand::kRow || period % VEC == 0);
}

// ---- Unary functors ----------------------------------------------------------------------------------

// Functors read their one attribute (QuickGelu's alpha) from this base.
struct UnaryFn {
  using Types = FloatTypes;
  float alpha = 0.0f;
};

struct SigmoidFn : UnaryFn { __device__ float operator()(float x) const { return 1.0f / (1.0f + expf(-x)); } };
struct TanhFn : UnaryFn { __device__ float operator()(float x) const { return tanhf(x); } };
struct ExpFn : UnaryFn { __device__ float operator()(float x) const { return expf(x); } };
struct LogFn : UnaryFn { __device__ float operator()(float x) const { return logf(x); } };
struct SqrtFn : UnaryFn { __device__ float operator()(float x) const { return sqrtf(x); } };
struct ReciprocalFn : UnaryFn { __device__ float operator()(float x) const { return 1.0f / x; } };
struct ErfFn : UnaryFn { __device__ float operator()(float x) const { return erff(x); } };
struct NegFn : UnaryFn {
  using Types = ArithTypes;
  template <typename C> __device__ C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) return wrap<C>(0 - bits_of(x));  // MIN stays MIN
    else return -x;
  }
};
struct AbsFn : UnaryFn {
  using Types = ArithTypes;
  template <typename C> __device__ C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) return x < 0 ? wrap<C>(0 - bits_of(x)) : x;
    else return fabsf(x);
  }
};
// NaN gives 0, as the CPU's `x > 0 ? x : 0`.
struct ReluFn : UnaryFn {
  using Types = ArithTypes;
  template <typename C> __device__ C operator()(C x) const { return x > C(0) ? x : C(0); }
};
struct GeluTanhFn : UnaryFn {
  __device__ float operator()(float v) const {
    return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  }
};
struct GeluErfFn : UnaryFn {
  __device__ float operator()(float v) const { return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f)); }
};
struct QuickGeluFn : UnaryFn {
  __device__ float operator()(float v) const { return v / (1.0f + expf(-alpha * v)); }
};

template <typename F>
bool with_unary_op(UnaryOp op, F&& fn) {
  switch (op) {
    case UnaryOp::kSigmoid: return fn.template operator()<SigmoidFn>();
    case UnaryOp::kTanh: return fn.template operator()<TanhFn>();
    case UnaryOp::kNeg: return fn.template operator()<NegFn>();
    case UnaryOp::kExp: return fn.template operator()<ExpFn>();
    case UnaryOp::kLog: return fn.template operator()<LogFn>();
    case UnaryOp::kSqrt: return fn.template operator()<SqrtFn>();
    case UnaryOp::kReciprocal: return fn.template operator()<ReciprocalFn>();
    case UnaryOp::kRelu: return fn.template operator()<ReluFn>();
    case UnaryOp::kErf: return fn.template operator()<ErfFn>();
    case UnaryOp::kAbs: return fn.template operator()<AbsFn>();
    case UnaryOp::kGeluTanh: return fn.template operator()<GeluTanhFn>();
    case UnaryOp::kGeluErf: return fn.template operator()<GeluErfFn>();
    case UnaryOp::kQuickGelu: return fn.template operator()<QuickGeluFn>();
  }
  return false;
}

template <typename F>
bool with_unary_types(UnaryOp op, DType dtype, F&& fn) {
  return with_unary_op(op, [&]<typename Op>() {
    return dispatch(typename Op::Types{}, dtype, [&]<typename T>() { fn.template operator()<Op, T>(); });
  });
}

// y = op(x (+ bias)); the bias repeats with bias_period (a multiple of VEC on the vector path).
template <typename Op, typename T>
__global__ void unary_kernel(UnaryArgs args, bool vectorized) {
  constexpr int kVec = 16 / sizeof(T);
  Op op;
  op.alpha = args.alpha;
  const T* x = static_cast<const T*>(args.x);
  const T* bias = static_cast<const T*>(args.bias);
  T* y = static_cast<T*>(args.y);
  const int64_t groups = (args.n + kVec - 1) / kVec;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) {
    const int64_t i = g * kVec;
    if (vectorized && i + kVec <= args.n) {
      compute_t<T> v[kVec];
      load_group<T, kVec>(x, Operand::kContiguous, i, args.bias_period, v);
      if (bias != nullptr) {
        compute_t<T> b[kVec];
        load_group<T, kVec>(bias, Operand::kRow, i, args.bias_period, b);
#pragma unroll
        for (int k = 0; k < kVec; ++k) v[k] += b[k];
      }
      Pack<T, kVec> r;
#pragma unroll
      for (int k = 0; k < kVec; ++k) r.v[k] = store_value<T>(op(v[k]));
      *reinterpret_cast<Pack<T, kVec>*>(y + i) = r;
    } else {
      for (int64_t j = i, end = i + kVec < args.n ? i + kVec : args.n; j < end; ++j) {
        compute_t<T> v = load_value(x[j]);
        if (bias != nullptr) v += load_value(bias[j % args.bias_period]);
        y[j] = store_value<T>(op(v));
      }
    }
  }
}

// ---- Cast ----------------------------------------------------------------------------------------

// Float to integer as x86's cvttss2si does it (what the CPU kernel's static_cast compiles to):
// truncation, with NaN and out-of-range values giving the "integer indefinite" MIN; 8-bit
// targets take the low bits of the int32 result.
template <typename D>
__device__ __forceinline__ D float_to_integer(float v) {
  if constexpr (sizeof(D) == 8) {
    return v >= -0x1p63f && v < 0x1p63f ? static_cast<int64_t>(v) : INT64_MIN;
  } else {
    const int32_t r = v >= -0x1p31f && v < 0x1p31f ? static_cast<int32_t>(v) : INT32_MIN;
    return static_cast<D>(r);
  }
}

template <typename S, typename D>
__device__ __forceinline__ D cast_value(S x) {
  if constexpr (std::is_same_v<S, D>) return x;
  else if constexpr (std::is_same_v<D, bool>) return load_value(x) != compute_t<S>(0);
  else if constexpr (kIsFloat<D>) return store_value<D>(static_cast<float>(load_value(x)));
  else if constexpr (kIsFloat<S>) return float_to_integer<D>(load_value(x));
  else return static_cast<D>(x);  // integers keep the low bits; bool is 0 / 1
}

template <typename S, typename D>
__global__ void cast_kernel(const S* in, D* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = cast_value<S, D>(in[i]);
  }
}

template <typename F>
bool with_cast_types(DType from, DType to, F&& fn) {
  bool found = false;
  dispatch(CastTypes{}, from, [&]<typename S>() {
    found = dispatch(CastTypes{}, to, [&]<typename D>() { fn.template operator()<S, D>(); });
  });
  return found;
}

}  // namespace

bool binary_supported(BinaryOp op, DType dtype, DType b_dtype) {
  bool found = false;  // a capturing probe: nothing is instantiated
  with_binary_types(op, dtype, b_dtype, [&found]<typename, typename, typename>() { found = true; });
  return found;
}

Status launch_binary(const BinaryArgs& args, void* stream) {
  if (args.n == 0) return Status::ok();
  if (!args.flat && (args.rank < 1 || args.rank > kMaxBroadcastRank)) return OG_ERROR("binary: bad broadcast rank ", args.rank);
  if (args.flat && args.period <= 0) return OG_ERROR("binary: bad row period ", args.period);
  const auto s = static_cast<cudaStream_t>(stream);
  const bool known = with_binary_types(args.op, args.dtype, args.b_dtype, [&]<typename Op, typename TA, typename TB>() {
    if (!args.flat) {
      binary_general_kernel<Op, TA, TB><<<grid_for(args.n), kThreads, 0, s>>>(args);
      return;
    }
    constexpr int kVec = 16 / sizeof(TA);
    const bool vectorized = aligned(args.out, sizeof(TA) * kVec) &&
                            operand_vectorizes<TA, kVec>(args.a, args.a_read, args.period) &&
                            operand_vectorizes<TB, kVec>(args.b, args.b_read, args.period);
    binary_flat_kernel<Op, TA, TB><<<grid_for((args.n + kVec - 1) / kVec), kThreads, 0, s>>>(args, vectorized);
  });
  if (!known) return OG_ERROR("binary: no CUDA instantiation for ", dtype_name(args.dtype), ", ", dtype_name(args.b_dtype));
  return launch_status("binary elementwise kernel");
}

bool unary_supported(UnaryOp op, DType dtype) {
  bool found = false;
  with_unary_types(op, dtype, [&found]<typename, typename>() { found = true; });
  return found;
}

Status launch_unary(const UnaryArgs& args, void* stream) {
  if (args.n == 0) return Status::ok();
  if (args.bias != nullptr && args.bias_period <= 0) return OG_ERROR("unary: bad bias period ", args.bias_period);
  const auto s = static_cast<cudaStream_t>(stream);
  const bool known = with_unary_types(args.op, args.dtype, [&]<typename Op, typename T>() {
    constexpr int kVec = 16 / sizeof(T);
    const bool vectorized = aligned(args.x, 16) && aligned(args.y, 16) &&
                            (args.bias == nullptr || operand_vectorizes<T, kVec>(args.bias, Operand::kRow, args.bias_period));
    unary_kernel<Op, T><<<grid_for((args.n + kVec - 1) / kVec), kThreads, 0, s>>>(args, vectorized);
  });
  if (!known) return OG_ERROR("unary: no CUDA instantiation for ", dtype_name(args.dtype));
  return launch_status("unary elementwise kernel");
}

bool cast_supported(DType from, DType to) {
  bool found = false;
  with_cast_types(from, to, [&found]<typename, typename>() { found = true; });
  return found;
}

Status launch_cast(DType from, DType to, const void* in, void* out, int64_t n, void* stream) {
  if (n == 0) return Status::ok();
  const auto s = static_cast<cudaStream_t>(stream);
  const bool known = with_cast_types(from, to, [&]<typename S, typename D>() {
    cast_kernel<S, D><<<grid_for(n), kThreads, 0, s>>>(static_cast<const S*>(in), static_cast<D*>(out), n);
  });
  if (!known) return OG_ERROR("cast: no CUDA instantiation for ", dtype_name(from), " to ", dtype_name(to));
  return launch_status("cast kernel");
}

}  // namespace onnx_genai::cuda
