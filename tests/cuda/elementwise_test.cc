// Elementwise CUDA kernels (ops/cuda/elementwise.cc) against the CPU kernels: Add / Sub / Mul /
// Div / Pow under every kind of broadcast, the one-tensor ops and the Gelu family, and Cast
// between every pair of supported dtypes with edge values. Integer, bool and Cast outputs must
// match exactly; float math outputs within cuda_test_util.h's tolerances.
//
// Recipe for a new elementwise op: add its functor in elementwise_kernels.cu, its registration
// in elementwise.cc, and its name (with an input range) to the lists below.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "cuda_test_util.h"

namespace onnx_genai::testing {
namespace {

// ---- Inputs ------------------------------------------------------------------------------------

// Integers keep the low bits of v (|v| < 2^63).
void set_value(Tensor& t, int64_t i, double v) {
  const auto whole = [v] { return static_cast<int64_t>(v); };  // only for integer dtypes: NaN would be UB
  switch (t.dtype()) {
    case DType::kF32: t.data<float>()[i] = static_cast<float>(v); break;
    case DType::kF16: t.data<Float16>()[i] = Float16(static_cast<float>(v)); break;
    case DType::kBF16: t.data<BFloat16>()[i] = BFloat16(static_cast<float>(v)); break;
    case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(whole()); break;
    case DType::kI64: t.data<int64_t>()[i] = whole(); break;
    case DType::kU8: t.data<uint8_t>()[i] = static_cast<uint8_t>(whole()); break;
    case DType::kI8: t.data<int8_t>()[i] = static_cast<int8_t>(whole()); break;
    case DType::kBool: t.data<bool>()[i] = v != 0; break;
    default: ADD_FAILURE() << "no test values for " << dtype_name(t.dtype());
  }
}

// Uniform in [lo, hi) (integers: whole numbers in [lo, hi]), negated at random if asked.
Tensor random_tensor(DType dtype, const Shape& shape, std::mt19937& rng, float lo, float hi, bool random_sign = false) {
  Tensor t = Tensor::allocate(dtype, shape).value();
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = dtype_is_float(dtype) ? dist(rng) : std::floor(dist(rng) + 0.5);
    if (random_sign && rng() % 2) v = -v;
    set_value(t, i, v);
  }
  return t;
}

Tensor scalar_tensor(DType dtype, double v) {
  Tensor t = Tensor::allocate(dtype, Shape{}).value();
  set_value(t, 0, v);
  return t;
}

// Integer operands where wrap-around and the defined division cases matter: every pair of
// these values meets once when input 1 uses `rotation` 1.
Tensor integer_edge_tensor(DType dtype, int rotation) {
  const bool wide = dtype == DType::kI64;
  const int64_t lo = wide ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int32_t>::min();
  const int64_t hi = wide ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int32_t>::max();
  const int64_t kValues[] = {lo, hi, -1, 0, 1, 2, -2, 7, -7, 65536, lo + 1, hi - 1, 3};
  constexpr int64_t kCount = std::size(kValues);
  Tensor t = Tensor::allocate(dtype, Shape{kCount, kCount}).value();
  for (int64_t i = 0; i < kCount * kCount; ++i) {
    const int64_t v = kValues[rotation == 0 ? i / kCount : (i / kCount + i % kCount) % kCount];
    if (wide) t.data<int64_t>()[i] = v;
    else t.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
  return t;
}

// n values of `dtype` for Cast: the edge values of the type first (NaN, infinities, values past
// every integer range, halves, the 8-bit and 16-bit float limits), then random ones.
Tensor cast_source_tensor(DType dtype, int64_t n, std::mt19937& rng) {
  const double kFloatEdges[] = {NAN, INFINITY, -INFINITY, 3e9, -3e9, 1e20, -1e20, 300, -300, 255.9, -1.5, 128,
                                -129, 0.5, -0.5, -0.0, 65504, 70000, 1e-8, 2147483520.0, -2147483648.0, 16777217};
  const double kIntEdges[] = {0, 1, -1, 127, 128, 255, 256, -128, -129, 2147483647.0, -2147483648.0, 16777217,
                              1099511627777.0, -1099511627777.0, 9007199254740993.0};
  Tensor t = Tensor::allocate(dtype, Shape{n}).value();
  std::uniform_real_distribution<double> dist(-1000, 1000);
  for (int64_t i = 0; i < n; ++i) {
    double v = std::round(dist(rng)) + (dtype_is_float(dtype) ? dist(rng) / 1000 : 0);
    if (dtype_is_float(dtype) && i < static_cast<int64_t>(std::size(kFloatEdges))) v = kFloatEdges[i];
    if (!dtype_is_float(dtype) && i < static_cast<int64_t>(std::size(kIntEdges))) v = kIntEdges[i];
    if (dtype == DType::kI64 && i == 14) {  // exactly 2^53 + 1: not a double
      t.data<int64_t>()[i] = (int64_t{1} << 53) + 1;
      continue;
    }
    set_value(t, i, v);
  }
  return t;
}

void set_string(Node& node, const std::string& name, const std::string& value) {
  node.attrs.set(name, Attribute{.kind = Attribute::Kind::kString, .s = value});
}

// ---- Comparison ---------------------------------------------------------------------------------

// Every element equal (NaN equals NaN; int64 compared as int64).
void expect_identical(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  int reported = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool same = false;
    if (want.dtype() == DType::kI64) {
      same = got.data<int64_t>()[i] == want.data<int64_t>()[i];
    } else {
      const double g = element(got, i), w = element(want, i);
      same = std::isnan(w) ? std::isnan(g) : g == w;
    }
    if (!same && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " cuda " << element(got, i) << " cpu " << element(want, i);
    }
  }
}

class ElementwiseCudaTest : public CudaKernelTest {
 protected:
  // Float outputs within the harness's tolerance, every other dtype exactly.
  void compare_any(const Node& node, const std::vector<Tensor>& inputs, const std::string& what) { compare_outputs(node, inputs, what, false); }
  // Every output exactly (Cast: both sides round the same way).
  void compare_exact(const Node& node, const std::vector<Tensor>& inputs, const std::string& what) { compare_outputs(node, inputs, what, true); }

 private:
  void compare_outputs(const Node& node, const std::vector<Tensor>& inputs, const std::string& what, bool exact) {
    Result<std::vector<Tensor>> cpu = run_on_cpu(node, inputs);
    ASSERT_TRUE(cpu.is_ok()) << what << ": " << cpu.status().message();
    Result<std::vector<Tensor>> gpu = run_on_cuda(node, inputs, *stream_);
    ASSERT_TRUE(gpu.is_ok()) << what << ": " << gpu.status().message();
    const Tensor& want = (*cpu)[0];
    const Tensor& got = (*gpu)[0];
    if (exact || !dtype_is_float(want.dtype())) return expect_identical(got, want, what);
    const double err = expect_close(got, want, tolerance_for(want.dtype()), what);
    double& worst = worst_[dtype_name(want.dtype())];
    worst = std::max(worst, err);
  }
};

constexpr DType kFloatDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr DType kArithDtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};

// A dim for a random shape: mostly small and odd, sometimes long enough for the 16-byte path.
int64_t random_dim(std::mt19937& rng) {
  constexpr int64_t kDims[] = {1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 128};
  return kDims[rng() % std::size(kDims)];
}

// At most kMaxElements elements (a dim is halved until it fits), so the CPU reference stays quick.
Shape random_shape(std::mt19937& rng, int rank) {
  constexpr int64_t kMaxElements = int64_t{1} << 17;
  std::vector<int64_t> dims;
  int64_t numel = 1;
  for (int d = 0; d < rank; ++d) {
    int64_t dim = random_dim(rng);
    while (numel * dim > kMaxElements) dim /= 2;
    dims.push_back(std::max<int64_t>(dim, 1));
    numel *= dims.back();
  }
  return Shape(std::move(dims));
}

// The operand shapes of a broadcast case of `kind` for an output shape.
enum class Broadcast { kSame, kScalar, kRow, kColumn, kMiddle, kBothSides, kLowerRank, kRandom, kCount };

std::pair<Shape, Shape> broadcast_operands(Broadcast kind, const Shape& out, std::mt19937& rng) {
  std::vector<int64_t> a = out.dims(), b = out.dims();
  const int rank = out.rank();
  switch (kind) {
    case Broadcast::kSame: break;
    case Broadcast::kScalar: b = rng() % 2 ? std::vector<int64_t>{} : std::vector<int64_t>{1}; break;
    case Broadcast::kRow: b = rank > 0 ? std::vector<int64_t>{out[rank - 1]} : b; break;
    case Broadcast::kColumn: if (rank > 0) b[static_cast<size_t>(rank - 1)] = 1; break;
    case Broadcast::kMiddle: if (rank > 2) b[static_cast<size_t>(rank / 2)] = 1; break;
    case Broadcast::kBothSides:
      for (int d = 0; d < rank; ++d) (d % 2 ? a : b)[static_cast<size_t>(d)] = 1;
      break;
    case Broadcast::kLowerRank: if (rank > 1) b.erase(b.begin(), b.begin() + 1 + rng() % (rank - 1)); break;
    default:
      for (int d = 0; d < rank; ++d) {
        if (rng() % 3 == 0) a[static_cast<size_t>(d)] = 1;
        else if (rng() % 3 == 0) b[static_cast<size_t>(d)] = 1;
      }
      break;
  }
  if (rng() % 2) std::swap(a, b);  // the broadcast operand on either side
  return {Shape(std::move(a)), Shape(std::move(b))};
}

using ElementwiseBinaryCuda = ElementwiseCudaTest;

TEST_F(ElementwiseBinaryCuda, ArithmeticMatchesCpuUnderEveryBroadcast) {
  const char* kOps[] = {"Add", "Sub", "Mul", "Div"};
  for (int trial = 0; trial < 400; ++trial) {
    const DType dtype = kArithDtypes[trial % std::size(kArithDtypes)];
    const char* op = kOps[trial / 5 % 4];
    const auto kind = static_cast<Broadcast>(trial / 20 % static_cast<int>(Broadcast::kCount));
    Shape out = random_shape(rng_, static_cast<int>(rng_() % 6));
    if (trial % 37 == 0 && out.rank() > 0) out = Shape([&] { auto d = out.dims(); d[0] = 0; return d; }());
    const auto [a_shape, b_shape] = broadcast_operands(kind, out, rng_);
    // Divisors keep away from 0 for floats; integers include 0 and -1 (defined as 0 and wrap).
    std::vector<Tensor> inputs{random_tensor(dtype, a_shape, rng_, -8.0f, 8.0f),
                               std::string(op) == "Div" && dtype_is_float(dtype)
                                   ? random_tensor(dtype, b_shape, rng_, 0.25f, 4.0f, /*random_sign=*/true)
                                   : random_tensor(dtype, b_shape, rng_, -8.0f, 8.0f)};
    CudaNode spec(op, "", {true}, 14);
    compare_any(spec.with_inputs(inputs), inputs,
                std::string(op) + " " + std::string(dtype_name(dtype)) + " " + a_shape.to_string() + " " + b_shape.to_string());
  }
}

TEST_F(ElementwiseBinaryCuda, IntegerEdgeValuesWrapAndDivideAsTheCpu) {
  for (const DType dtype : {DType::kI32, DType::kI64}) {
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
      std::vector<Tensor> inputs{integer_edge_tensor(dtype, 0), integer_edge_tensor(dtype, 1)};
      CudaNode spec(op, "", {true}, 14);
      compare_any(spec.with_inputs(inputs), inputs, std::string(op) + " edge values " + std::string(dtype_name(dtype)));
    }
  }
}

TEST_F(ElementwiseBinaryCuda, LargeContiguousAndRowBroadcast) {
  for (const DType dtype : kArithDtypes) {
    for (const Broadcast kind : {Broadcast::kSame, Broadcast::kRow, Broadcast::kScalar, Broadcast::kColumn}) {
      const Shape out{3, 37, 4096};
      const auto [a_shape, b_shape] = broadcast_operands(kind, out, rng_);
      std::vector<Tensor> inputs{random_tensor(dtype, a_shape, rng_, -4.0f, 4.0f), random_tensor(dtype, b_shape, rng_, -4.0f, 4.0f)};
      CudaNode spec("Mul", "", {true}, 14);
      compare_any(spec.with_inputs(inputs), inputs, "Mul large " + std::string(dtype_name(dtype)) + " " + b_shape.to_string());
    }
  }
}

TEST_F(ElementwiseBinaryCuda, PowMatchesCpu) {
  constexpr DType kExponents[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};
  for (int trial = 0; trial < 60; ++trial) {
    const DType base = kFloatDtypes[trial % 3];
    const DType exponent = kExponents[trial / 3 % 5];
    const Shape out = random_shape(rng_, 1 + static_cast<int>(rng_() % 4));
    const auto [a_shape, b_shape] = broadcast_operands(static_cast<Broadcast>(trial % 8), out, rng_);
    std::vector<Tensor> inputs{random_tensor(base, a_shape, rng_, 0.5f, 2.0f), random_tensor(exponent, b_shape, rng_, -3.0f, 3.0f)};
    CudaNode spec("Pow", "", {true}, 15);
    compare_any(spec.with_inputs(inputs), inputs,
                "Pow " + std::string(dtype_name(base)) + a_shape.to_string() + " ^ " + std::string(dtype_name(exponent)) + b_shape.to_string());
  }
  // A constant exponent of 2 (the CPU's x * x path), on negative bases too.
  for (const DType base : kFloatDtypes) {
    std::vector<Tensor> inputs{random_tensor(base, Shape{5, 300}, rng_, -3.0f, 3.0f), scalar_tensor(base, 2.0)};
    CudaNode spec("Pow", "", {true}, 15);
    compare_any(spec.with_inputs(inputs), inputs, "Pow square " + std::string(dtype_name(base)));
  }
}

using ElementwiseUnaryCuda = ElementwiseCudaTest;

struct UnaryCase {
  const char* op;
  const char* domain;
  float lo, hi;
  bool random_sign;  // values in +-[lo, hi)
  int opset = 13;
};

TEST_F(ElementwiseUnaryCuda, MathAndActivationsMatchCpu) {
  const UnaryCase kCases[] = {
      {"Sigmoid", "", -8, 8, false},   {"Tanh", "", -4, 4, false},      {"Neg", "", -8, 8, false},
      {"Exp", "", -10, 10, false},     {"Log", "", 0.01f, 10, false},   {"Sqrt", "", 0, 10, false},
      {"Reciprocal", "", 0.1f, 4, true}, {"Relu", "", -8, 8, false},    {"Erf", "", -3, 3, false},
      {"Abs", "", -8, 8, false},       {"FastGelu", "com.microsoft", -6, 6, false, 1},
      {"QuickGelu", "com.microsoft", -6, 6, false, 1},                  {"Gelu", "", -6, 6, false, 20},
  };
  for (const UnaryCase& c : kCases) {
    for (int trial = 0; trial < 12; ++trial) {
      const DType dtype = kFloatDtypes[trial % 3];
      const int min_rank = std::string(c.op) == "FastGelu" ? 1 : 0;  // FastGelu's schema wants rank >= 1
      const Shape shape = trial == 11 ? Shape{3, 0} : random_shape(rng_, min_rank + static_cast<int>(rng_() % 5));
      std::vector<Tensor> inputs{random_tensor(dtype, shape, rng_, c.lo, c.hi, c.random_sign)};
      CudaNode spec(c.op, c.domain, {true}, c.opset);
      Node& node = spec.with_inputs(inputs);
      if (std::string(c.op) == "Gelu" && trial % 2) set_string(node, "approximate", "tanh");
      if (std::string(c.op) == "QuickGelu" && trial % 2) node.attrs.set("alpha", Attribute{.kind = Attribute::Kind::kFloat, .f = 1.0f});
      compare_any(node, inputs, std::string(c.op) + " " + std::string(dtype_name(dtype)) + " " + shape.to_string());
    }
  }
}

TEST_F(ElementwiseUnaryCuda, GeluWithBiasMatchesCpu) {
  for (int trial = 0; trial < 24; ++trial) {
    const DType dtype = kFloatDtypes[trial % 3];
    const char* op = trial % 2 ? "BiasGelu" : "FastGelu";
    const int64_t hidden = trial % 4 < 2 ? 4096 : random_dim(rng_) + 3;  // 16-byte rows and odd rows
    const Shape x{1 + static_cast<int64_t>(rng_() % 5), 1 + static_cast<int64_t>(rng_() % 3), hidden};
    std::vector<Tensor> inputs{random_tensor(dtype, x, rng_, -5.0f, 5.0f), random_tensor(dtype, Shape{hidden}, rng_, -1.0f, 1.0f)};
    CudaNode spec(op, "com.microsoft", {true});
    compare_any(spec.with_inputs(inputs), inputs, std::string(op) + " " + std::string(dtype_name(dtype)) + " " + x.to_string());
  }
}

TEST_F(ElementwiseUnaryCuda, IntegerNegAbsReluMatchCpu) {
  for (const DType dtype : {DType::kI32, DType::kI64}) {
    for (const char* op : {"Neg", "Abs", "Relu"}) {
      std::vector<Tensor> inputs{integer_edge_tensor(dtype, 0)};
      CudaNode spec(op, "", {true}, 13);
      compare_any(spec.with_inputs(inputs), inputs, std::string(op) + " " + std::string(dtype_name(dtype)));
    }
  }
}

using ElementwiseCastCuda = ElementwiseCudaTest;

TEST_F(ElementwiseCastCuda, EveryPairMatchesCpuExactlyOnEdgeValues) {
  constexpr DType kCastDtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32,
                                   DType::kI64, DType::kBool, DType::kU8,  DType::kI8};
  for (const DType from : kCastDtypes) {
    for (const DType to : kCastDtypes) {
      for (const int64_t n : {int64_t{0}, int64_t{1000}}) {
        std::vector<Tensor> inputs{cast_source_tensor(from, n, rng_)};
        CudaNode spec("Cast", "", {true}, 19);
        spec.attr_int("to", static_cast<int64_t>(to));
        compare_exact(spec.with_inputs(inputs), inputs,
                      "Cast " + std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)) + " n " + std::to_string(n));
      }
    }
  }
}

TEST_F(ElementwiseCastCuda, CastLikeTakesTheTargetDtype) {
  std::vector<Tensor> inputs{cast_source_tensor(DType::kF32, 257, rng_), random_tensor(DType::kF16, Shape{1}, rng_, 0, 1)};
  CudaNode spec("CastLike", "", {true}, 19);
  compare_exact(spec.with_inputs(inputs), inputs, "CastLike f32 -> f16");
}

// Mean wall time of one run() of node's CUDA kernel, over `runs` back-to-back runs on inputs
// uploaded once (launch overhead overlaps with the previous kernel, as in a plan).
Result<double> microseconds_per_run(const Node& node, const std::vector<Tensor>& inputs, const cuda::Stream& stream, int runs) {
  OG_ASSIGN_OR_RETURN(PreparedNode prepared, prepare_node(node, inputs, DeviceType::kCuda));
  std::vector<cuda::DeviceBuffer> buffers;
  std::vector<KernelTensor> in, out;
  for (const Tensor& t : inputs) {
    OG_ASSIGN_OR_RETURN(buffers.emplace_back(), cuda::DeviceBuffer::allocate(static_cast<size_t>(t.nbytes())));
    OG_RETURN_IF_ERROR(cuda::copy_to_device(buffers.back().data(), t.raw(), static_cast<size_t>(t.nbytes()), stream.handle()));
    in.push_back({t.dtype(), &t.shape(), buffers.back().data()});
  }
  for (const std::optional<TensorInfo>& info : prepared.outputs) {
    const auto bytes = static_cast<size_t>(dtype_storage_bytes(info->dtype, info->shape.numel()));
    OG_ASSIGN_OR_RETURN(buffers.emplace_back(), cuda::DeviceBuffer::allocate(bytes));
    out.push_back({info->dtype, &info->shape, buffers.back().data()});
  }
  const KernelContext ctx{in, out, nullptr, nullptr, stream.handle()};
  OG_RETURN_IF_ERROR(prepared.kernel->run(ctx));  // warm-up
  OG_RETURN_IF_ERROR(stream.synchronize());
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < runs; ++r) OG_RETURN_IF_ERROR(prepared.kernel->run(ctx));
  OG_RETURN_IF_ERROR(stream.synchronize());
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / runs;
}

using ElementwisePerfCuda = ElementwiseCudaTest;

// Not a pass / fail check: prints achieved bandwidth (bytes read + written) for gpu-check's log.
TEST_F(ElementwisePerfCuda, PrintsBandwidthOfLargeOps) {
  const auto zeros = [](DType dtype, Shape shape) { return Tensor::allocate(dtype, std::move(shape)).value(); };
  const int64_t m = 8192, h = 4096;
  struct PerfCase {
    std::string what;
    CudaNode spec;
    std::vector<Tensor> inputs;
  };
  PerfCase cases[] = {
      {"Add f16 [8192,4096] + same", CudaNode("Add", "", {true}, 14), {zeros(DType::kF16, {m, h}), zeros(DType::kF16, {m, h})}},
      {"Mul bf16 [8192,4096] * [4096]", CudaNode("Mul", "", {true}, 14), {zeros(DType::kBF16, {m, h}), zeros(DType::kBF16, {h})}},
      {"Add f32 [32,1,4096] + [1,128,1] (general)", CudaNode("Add", "", {true}, 14),
       {zeros(DType::kF32, {32, 1, h}), zeros(DType::kF32, {1, 128, 1})}},
      {"Sigmoid f16 [8192,4096]", CudaNode("Sigmoid", "", {true}, 13), {zeros(DType::kF16, {m, h})}},
      {"FastGelu bf16 [8192,4096] + bias", CudaNode("FastGelu", "com.microsoft", {true}), {zeros(DType::kBF16, {m, h}), zeros(DType::kBF16, {h})}},
      {"Cast f32 -> f16 [8192,4096]", CudaNode("Cast", "", {true}, 19), {zeros(DType::kF32, {m, h})}},
  };
  cases[5].spec.attr_int("to", static_cast<int64_t>(DType::kF16));
  for (PerfCase& c : cases) {
    const Node& node = c.spec.with_inputs(c.inputs);
    Result<double> us = microseconds_per_run(node, c.inputs, *stream_, 20);
    ASSERT_TRUE(us.is_ok()) << c.what << ": " << us.status().message();
    Result<PreparedNode> prepared = prepare_node(node, c.inputs, DeviceType::kCuda);
    ASSERT_TRUE(prepared.is_ok());
    double bytes = 0;
    for (const Tensor& t : c.inputs) bytes += static_cast<double>(t.nbytes());
    const TensorInfo& out = *prepared->outputs[0];
    bytes += static_cast<double>(dtype_storage_bytes(out.dtype, out.shape.numel()));
    std::printf("  %s: %.1f us/run, %.0f GB/s (host-timed, back to back)\n", c.what.c_str(), *us, bytes / *us / 1e3);
  }
}

// Bad inputs fail in prepare with the node's name (no device needed).
TEST(ElementwiseCudaErrors, UnsupportedDtypesNameTheNode) {
  const auto expect_error = [](CudaNode& spec, const std::vector<Tensor>& inputs, const std::string& want) {
    Result<PreparedNode> prepared = prepare_node(spec.with_inputs(inputs), inputs, DeviceType::kCuda);
    ASSERT_FALSE(prepared.is_ok());
    EXPECT_NE(prepared.status().message().find(want), std::string::npos) << prepared.status().message();
  };
  {
    CudaNode spec("Pow", "", {true}, 15);
    expect_error(spec, {Tensor::allocate(DType::kF32, Shape{4}).value(), Tensor::allocate(DType::kF64, Shape{1}).value()},
                 "cuda_test_Pow");
  }
  {
    CudaNode spec("Cast", "", {true}, 19);
    spec.attr_int("to", static_cast<int64_t>(DType::kF64));
    expect_error(spec, {Tensor::allocate(DType::kF32, Shape{4}).value()}, "cuda_test_Cast");
  }
  {
    CudaNode spec("Add", "", {true}, 14);
    expect_error(spec, {Tensor::allocate(DType::kF32, Shape{4}).value(), Tensor::allocate(DType::kF32, Shape{3}).value()},
                 "cuda_test_Add");
  }
}

}  // namespace
}  // namespace onnx_genai::testing
