// MatMul / Gemm and the blocked GEMM driver behind them.
//
// Every fast path is checked against a straightforward triple loop accumulating in double, on
// odd shapes (tile edges, several k/m/n blocks, M = 1 GEMV), for f32/f16/bf16, for each
// instruction set this CPU runs (the driver takes the ISA as a parameter), with packed and
// unpacked B, one and several threads, and guard elements around C to catch stray writes.
// Op-level tests cover numpy matmul semantics, Gemm attributes and bias broadcasting, the
// simple f64/integer path, the non-constant-weight path, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/cpu_features.h"
#include "ops/cpu/gemm_driver.h"
#include "ops/op.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

std::vector<GemmIsa> runnable_isas() {
  std::vector<GemmIsa> isas{GemmIsa::kScalar};
  if (cpu_features().avx2) isas.push_back(GemmIsa::kAvx2);
  if (cpu_features().avx512) isas.push_back(GemmIsa::kAvx512);
  return isas;
}

const char* isa_name(GemmIsa isa) {
  return isa == GemmIsa::kAvx512 ? "avx512" : isa == GemmIsa::kAvx2 ? "avx2" : "scalar";
}

template <typename T>
std::vector<T> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> v(n);
  for (T& x : v) x = T(dist(rng));
  return v;
}

// Relative tolerance of the stored result: f32 accumulation error against sum |a*b|, plus one
// rounding of the output to the element type.
template <typename T>
double output_rounding() {
  if constexpr (std::is_same_v<T, Float16>) return 1.0 / 1024;
  else if constexpr (std::is_same_v<T, BFloat16>) return 1.0 / 128;
  else return 0.0;
}

struct GemmCase {
  int64_t batch, m, k, n;
  bool trans_a = false, trans_b = false, bias = false;
  float alpha = 1.0f, beta = 1.0f;
};

std::string describe(const GemmCase& c) {
  std::ostringstream s;
  s << c.batch << "x" << c.m << "x" << c.k << "x" << c.n << (c.trans_a ? " tA" : "") << (c.trans_b ? " tB" : "")
    << (c.bias ? " bias" : "") << " alpha=" << c.alpha;
  return s.str();
}

// Runs the driver on one case and compares with the double-precision reference.
template <typename T>
void check_driver(GemmIsa isa, const GemmCase& c, bool packed, ThreadPool* pool, int threads) {
  SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(dtype_name(DTypeOf<T>::value)) + " " + describe(c) +
               (packed ? " packed" : " unpacked") + " threads=" + std::to_string(threads));
  const auto [batch, m, k, n] = std::tuple(c.batch, c.m, c.k, c.n);
  const std::vector<T> a = random_values<T>(static_cast<size_t>(batch * m * k), 1);
  const std::vector<T> b = random_values<T>(static_cast<size_t>(batch * k * n), 2);
  const std::vector<T> bias = random_values<T>(static_cast<size_t>(n), 3);  // a [1, N] row
  // Stored transposed: A as [K, M], B as [N, K].
  const GemmOperand a_op{a.data(), DTypeOf<T>::value, c.trans_a ? 1 : k, c.trans_a ? m : 1};
  const GemmOperand b_op{b.data(), DTypeOf<T>::value, c.trans_b ? 1 : n, c.trans_b ? k : 1};
  std::vector<int64_t> a_offsets, b_offsets;
  for (int64_t i = 0; i < batch; ++i) {
    a_offsets.push_back(i * m * k);
    b_offsets.push_back(packed ? i : i * k * n);
  }
  std::optional<GemmPackedB> packed_b;
  if (packed) {
    auto p = GemmPackedB::pack(isa, b_op, k, n, batch, k * n);
    ASSERT_TRUE(p) << p.status().message();
    packed_b = std::move(p).value();
  }
  const bool epilogue = c.alpha != 1.0f || c.bias;
  const GemmPlan plan = GemmPlan::make(isa, {batch, m, n, k}, DTypeOf<T>::value, packed, b_op.cs == 1, epilogue, threads);
  std::vector<float> workspace(plan.workspace_bytes() / sizeof(float) + 16);
  float* ws = workspace.data() + (16 - reinterpret_cast<uintptr_t>(workspace.data()) / sizeof(float) % 16) % 16;

  constexpr int64_t kGuard = 37;
  const T sentinel(12345.0f);
  std::vector<T> out(static_cast<size_t>(batch * m * n + 2 * kGuard), sentinel);
  GemmArgs args;
  args.a = a_op;
  args.b = b_op;
  args.packed_b = packed_b ? &*packed_b : nullptr;
  args.a_offsets = a_offsets.data();
  args.b_offsets = b_offsets.data();
  args.c = out.data() + kGuard;
  args.alpha = c.alpha;
  args.beta = c.beta;
  if (c.bias) args.bias = GemmOperand{bias.data(), DTypeOf<T>::value, 0, 1};
  plan.run(args, ws, pool);

  for (int64_t g = 0; g < kGuard; ++g) {
    ASSERT_EQ(static_cast<float>(out[static_cast<size_t>(g)]), static_cast<float>(sentinel)) << "write before C";
    ASSERT_EQ(static_cast<float>(out[out.size() - 1 - static_cast<size_t>(g)]), static_cast<float>(sentinel)) << "write past C";
  }
  int failures = 0;
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, sum_abs = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double av = static_cast<float>(a[static_cast<size_t>(bi * m * k + i * a_op.rs + p * a_op.cs)]);
          const double bv = static_cast<float>(b[static_cast<size_t>(bi * k * n + p * b_op.rs + j * b_op.cs)]);
          sum += av * bv;
          sum_abs += std::fabs(av * bv);
        }
        double want = c.alpha * sum;
        if (c.bias) want += c.beta * static_cast<float>(bias[static_cast<size_t>(j)]);
        const double got = static_cast<float>(out[static_cast<size_t>(kGuard + (bi * m + i) * n + j)]);
        const double tol = 1e-5 * (std::fabs(c.alpha) * sum_abs + 1) + output_rounding<T>() * std::fabs(want);
        if (std::fabs(got - want) > tol && ++failures <= 5) {
          ADD_FAILURE() << "C[" << bi << "," << i << "," << j << "] = " << got << ", want " << want;
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

const std::vector<GemmCase>& driver_cases() {
  static const std::vector<GemmCase> cases{
      {1, 1, 1, 1},        {1, 3, 5, 7},          {1, 17, 33, 65},  {1, 1, 4096, 257}, {1, 1, 300, 1000},
      {1, 32, 512, 96},    {1, 15, 600, 33},      {1, 350, 40, 50}, {1, 2, 7, 40},     {3, 5, 9, 70},
      {2, 1, 70, 45},      {1, 4, 0, 6},          {1, 3, 0, 5, false, false, true, 2.0f, 0.5f},
      {1, 6, 20, 9, true}, {1, 6, 20, 9, false, true}, {1, 1, 300, 70, true, true},
      {1, 19, 260, 37, true, true, true, -0.5f, 0.25f},
      {1, 1, 100, 33, false, false, true, 0.5f, 2.0f},
  };
  return cases;
}

template <typename T>
void check_all_driver_cases() {
  ThreadPool pool(3);
  for (GemmIsa isa : runnable_isas()) {
    for (const GemmCase& c : driver_cases()) {
      for (bool packed : {false, true}) {
        check_driver<T>(isa, c, packed, nullptr, 1);
        check_driver<T>(isa, c, packed, &pool, 3);
      }
    }
  }
}

TEST(GemmDriver, MatchesReferenceF32) { check_all_driver_cases<float>(); }
TEST(GemmDriver, MatchesReferenceF16) { check_all_driver_cases<Float16>(); }
TEST(GemmDriver, MatchesReferenceBF16) { check_all_driver_cases<BFloat16>(); }

TEST(GemmDriver, LargeShapeSplitsAcrossThreads) {
  ThreadPool pool(2);
  for (GemmIsa isa : runnable_isas()) {
    const GemmPlan plan = GemmPlan::make(isa, {1, 64, 256, 512}, DType::kF32, true, true, false, 2);
    EXPECT_EQ(plan.chunks, 2) << isa_name(isa);
    check_driver<float>(isa, {1, 64, 512, 256}, true, &pool, 2);
    check_driver<float>(isa, {1, 1, 512, 1024}, false, &pool, 2);
  }
}

// ---- Op level ---------------------------------------------------------------------------

// numpy matmul in double over float-convertible elements: A [..., M, K] x B [..., K, N] with
// 1-D promotion and broadcast batch dims; returns the values in output order.
template <typename T>
std::vector<double> reference_matmul(const Tensor& a, const Tensor& b, const Shape& out_shape) {
  const Shape as = a.rank() == 1 ? Shape{1, a.shape()[0]} : a.shape();
  const Shape bs = b.rank() == 1 ? Shape{b.shape()[0], 1} : b.shape();
  const int64_t m = as[as.rank() - 2], k = as[as.rank() - 1], n = bs[bs.rank() - 1];
  const int64_t batch = out_shape.numel() / (m * n);
  const int batch_rank = std::max(as.rank(), bs.rank()) - 2;
  std::vector<int64_t> bdims(static_cast<size_t>(batch_rank), 1);
  for (const Shape* s : {&as, &bs}) {
    for (int d = 0; d < s->rank() - 2; ++d) {
      int64_t& o = bdims[static_cast<size_t>(batch_rank - (s->rank() - 2) + d)];
      o = std::max(o, (*s)[d]);
    }
  }
  // Matrix index of an operand for output batch `bi` (broadcast dims contribute 0).
  auto matrix_index = [&](const Shape& s, int64_t bi) {
    int64_t idx = 0, stride = 1;
    for (int d = batch_rank - 1; d >= 0; --d) {
      const int64_t coord = bi % bdims[static_cast<size_t>(d)];
      bi /= bdims[static_cast<size_t>(d)];
      const int sd = d - (batch_rank - (s.rank() - 2));
      if (sd < 0) continue;
      if (s[sd] != 1) idx += coord * stride;
      stride *= s[sd];
    }
    return idx;
  };
  std::vector<double> out;
  for (int64_t bi = 0; bi < batch; ++bi) {
    const T* ap = a.data<T>() + matrix_index(as, bi) * m * k;
    const T* bp = b.data<T>() + matrix_index(bs, bi) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(ap[i * k + p]) * static_cast<double>(bp[p * n + j]);
        out.push_back(sum);
      }
    }
  }
  return out;
}

template <typename T>
Tensor random_tensor(Shape shape, uint32_t seed) {
  return Tensor::from_vector<T>(shape, random_values<T>(static_cast<size_t>(shape.numel()), seed));
}

// Runs one node like run_node_on_cpu but hides every input value from prepare, as for
// activations in a real plan: B is then packed per call instead of once.
Result<Tensor> run_without_constants(const Node& node, const std::vector<Tensor>& inputs, ThreadPool* pool) {
  const OpRegistry& registry = OpRegistry::instance();
  const OpSchema* schema = registry.find_schema(node.domain, node.op_type);
  std::vector<TensorInfo> infos;
  std::vector<DType> dtypes;
  for (const Tensor& t : inputs) {
    infos.push_back({t.dtype(), t.shape()});
    dtypes.push_back(t.dtype());
  }
  InferContext infer{node, {}, {}, {}};
  for (const TensorInfo& info : infos) infer.inputs.push_back(&info);
  infer.input_values.assign(inputs.size(), nullptr);
  infer.outputs.resize(1);
  OG_RETURN_IF_ERROR(schema->infer_shapes(infer));
  OG_ASSIGN_OR_RETURN(const KernelDef* def, registry.find_kernel(node, DeviceType::kCpu, dtypes));
  std::unique_ptr<OpKernel> kernel = def->create(node);
  const TensorInfo out_info = *infer.outputs[0];
  PrepareContext prepare{node, infer.inputs, infer.input_values, {&out_info}, 0, pool};
  OG_RETURN_IF_ERROR(kernel->prepare(prepare));
  OG_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(out_info.dtype, out_info.shape));
  std::vector<KernelTensor> in_views;
  for (const Tensor& t : inputs) in_views.push_back({t.dtype(), &t.shape(), const_cast<void*>(t.raw())});
  std::vector<KernelTensor> out_views{{out.dtype(), &out.shape(), out.raw()}};
  std::vector<float> workspace(prepare.workspace_bytes / sizeof(float) + 16);
  float* ws = workspace.data() + (16 - reinterpret_cast<uintptr_t>(workspace.data()) / sizeof(float) % 16) % 16;
  OG_RETURN_IF_ERROR(kernel->run(KernelContext{in_views, out_views, ws, pool}));
  return out;
}

template <typename T>
void expect_matches(const Tensor& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(got.data<T>()[i]), want[i], tol * std::max(1.0, std::fabs(want[i]))) << "at " << i;
  }
}

template <typename T>
void check_matmul(const Shape& a_shape, const Shape& b_shape, const Shape& want_shape, double tol) {
  SCOPED_TRACE(a_shape.to_string() + " x " + b_shape.to_string() + " " + std::string(dtype_name(DTypeOf<T>::value)));
  const Tensor a = random_tensor<T>(a_shape, 7), b = random_tensor<T>(b_shape, 8);
  const std::vector<double> want = reference_matmul<T>(a, b, want_shape);
  ThreadPool pool(2);
  OpCall call("MatMul", 13);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    auto out = call.run({a, b}, p);  // B is a known value: packed at prepare
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ((*out)[0].shape(), want_shape);
    expect_matches<T>((*out)[0], want, tol);
    auto dynamic = run_without_constants(call.node(), {a, b}, p);
    ASSERT_TRUE(dynamic) << dynamic.status().message();
    EXPECT_EQ(dynamic->shape(), want_shape);
    expect_matches<T>(*dynamic, want, tol);
  }
}

template <typename T>
void check_matmul_shapes(double tol) {
  check_matmul<T>({3, 4}, {4, 5}, {3, 5}, tol);
  check_matmul<T>({4}, {4, 5}, {5}, tol);
  check_matmul<T>({3, 4}, {4}, {3}, tol);
  check_matmul<T>({6}, {6}, {}, tol);
  check_matmul<T>({2, 3, 4}, {4, 5}, {2, 3, 5}, tol);  // batch folded into M
  check_matmul<T>({3, 4}, {2, 4, 5}, {2, 3, 5}, tol);  // A broadcast over B's batch
  check_matmul<T>({2, 1, 3, 4}, {3, 4, 5}, {2, 3, 3, 5}, tol);
  check_matmul<T>({1, 2, 1, 70}, {2, 1, 70, 33}, {2, 2, 1, 33}, tol);  // batched GEMV
  check_matmul<T>({5}, {2, 5, 3}, {2, 3}, tol);
  check_matmul<T>({2, 37, 300}, {2, 300, 70}, {2, 37, 70}, tol);
}

TEST(MatMul, HandCheckedValues) {
  const Tensor a = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = Tensor::from_vector<float>({3, 2}, {7, 8, 9, 10, 11, 12});
  auto out = OpCall("MatMul", 13).run({a, b});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
  expect_near_all(to_floats<float>((*out)[0]), {58, 64, 139, 154}, 0);
}

TEST(MatMul, NumpySemanticsF32) { check_matmul_shapes<float>(1e-5); }
TEST(MatMul, NumpySemanticsF16) { check_matmul_shapes<Float16>(2e-3); }
TEST(MatMul, NumpySemanticsBF16) { check_matmul_shapes<BFloat16>(1.6e-2); }
TEST(MatMul, NumpySemanticsF64) { check_matmul_shapes<double>(1e-12); }

template <typename T>
void check_integer_matmul() {
  std::vector<T> av, bv;
  for (int i = 0; i < 2 * 3 * 4; ++i) av.push_back(static_cast<T>(i % 7));
  for (int i = 0; i < 4 * 5; ++i) bv.push_back(static_cast<T>((i * 3) % 11));
  const Tensor a = Tensor::from_vector<T>({2, 3, 4}, av), b = Tensor::from_vector<T>({4, 5}, bv);
  auto out = OpCall("MatMul", 13).run({a, b});
  ASSERT_TRUE(out) << out.status().message();
  const std::vector<double> want = reference_matmul<T>(a, b, Shape{2, 3, 5});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(static_cast<double>((*out)[0].data<T>()[i]), want[i]);
}

TEST(MatMul, Integers) {
  check_integer_matmul<int32_t>();
  check_integer_matmul<int64_t>();
  check_integer_matmul<uint32_t>();
  check_integer_matmul<uint64_t>();
}

TEST(MatMul, BadInputIsAnError) {
  const Tensor a = random_tensor<float>({2, 3}, 1);
  EXPECT_FALSE(OpCall("MatMul", 13).run({a, random_tensor<float>({4, 5}, 2)}));
  EXPECT_FALSE(OpCall("MatMul", 13).run({random_tensor<float>({2, 3, 4}, 1), random_tensor<float>({3, 4, 5}, 2)}));
  EXPECT_FALSE(OpCall("MatMul", 13).run({a, random_tensor<double>({3, 5}, 2)}));
}

// Gemm: Y = alpha * op(A) op(B) + beta * C for every transpose and every C broadcast shape.
template <typename T>
void check_gemm(bool trans_a, bool trans_b, const Shape& c_shape, double tol) {
  const int64_t m = 5, k = 7, n = 6;
  const float alpha = 0.75f, beta = -1.5f;
  SCOPED_TRACE("tA=" + std::to_string(trans_a) + " tB=" + std::to_string(trans_b) + " C=" + c_shape.to_string());
  const Tensor a = random_tensor<T>(trans_a ? Shape{k, m} : Shape{m, k}, 3);
  const Tensor b = random_tensor<T>(trans_b ? Shape{n, k} : Shape{k, n}, 4);
  const Tensor c = random_tensor<T>(c_shape, 5);
  std::vector<double> want;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += static_cast<double>(a.data<T>()[trans_a ? p * m + i : i * k + p]) *
               static_cast<double>(b.data<T>()[trans_b ? j * k + p : p * n + j]);
      }
      const int64_t c_cols = c_shape.rank() >= 1 ? c_shape[c_shape.rank() - 1] : 1;
      const int64_t c_rows = c_shape.rank() == 2 ? c_shape[0] : 1;
      const int64_t ci = (c_rows == 1 ? 0 : i) * c_cols + (c_cols == 1 ? 0 : j);
      want.push_back(alpha * sum + beta * static_cast<double>(c.data<T>()[ci]));
    }
  }
  OpCall call("Gemm", 13);
  call.attr_int("transA", trans_a).attr_int("transB", trans_b).attr_float("alpha", alpha).attr_float("beta", beta);
  auto out = call.run({a, b, c});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{m, n}));
  expect_matches<T>((*out)[0], want, tol);
  auto dynamic = run_without_constants(call.node(), {a, b, c}, nullptr);
  ASSERT_TRUE(dynamic) << dynamic.status().message();
  expect_matches<T>(*dynamic, want, tol);
}

template <typename T>
void check_gemm_variants(double tol) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (const Shape& c : {Shape{}, Shape{1}, Shape{6}, Shape{1, 6}, Shape{5, 1}, Shape{5, 6}}) {
        check_gemm<T>(ta, tb, c, tol);
      }
    }
  }
}

TEST(Gemm, AttributesAndBiasF32) { check_gemm_variants<float>(1e-5); }
TEST(Gemm, AttributesAndBiasF16) { check_gemm_variants<Float16>(4e-3); }
TEST(Gemm, AttributesAndBiasBF16) { check_gemm_variants<BFloat16>(3e-2); }
TEST(Gemm, AttributesAndBiasF64) { check_gemm_variants<double>(1e-12); }

TEST(Gemm, NoBiasFromOpset11) {
  const Tensor a = Tensor::from_vector<float>({1, 2}, {1, 2});
  const Tensor b = Tensor::from_vector<float>({2, 2}, {3, 4, 5, 6});
  auto out = OpCall("Gemm", 11).attr_float("alpha", 2.0f).run({a, b});
  ASSERT_TRUE(out) << out.status().message();
  expect_near_all(to_floats<float>((*out)[0]), {26, 32}, 0);
  EXPECT_FALSE(OpCall("Gemm", 9).run({a, b}));  // C required before opset 11
}

TEST(Gemm, BadInputIsAnError) {
  const Tensor a = random_tensor<float>({2, 3}, 1), b = random_tensor<float>({3, 4}, 2);
  EXPECT_FALSE(OpCall("Gemm", 13).run({a, random_tensor<float>({4, 3}, 2)}));
  EXPECT_FALSE(OpCall("Gemm", 13).run({random_tensor<float>({1, 2, 3}, 1), b}));
  EXPECT_FALSE(OpCall("Gemm", 13).run({a, b, random_tensor<float>({3, 4}, 3)}));
  EXPECT_FALSE(OpCall("Gemm", 13).run({a, b, random_tensor<float>({2, 3}, 3)}));
}

}  // namespace
}  // namespace onnx_genai::testing
