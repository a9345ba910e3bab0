// The com.microsoft Gelu family (FastGelu, BiasGelu, QuickGelu): against double-precision formulas
// written out here, through every SIMD build and the scalar one, in f16 / bf16, against ONNX
// Runtime (including its inf / NaN results), and with bad inputs.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "core/cpu_features.h"
#include "ops/contrib_test_util.h"
#include "ops/cpu/elementwise.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

double fast_gelu(double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }
double erf_gelu(double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }
double quick_gelu(double v, double alpha) { return v / (1 + std::exp(-alpha * v)); }

std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// y[i] = f(x[i] + bias[i % bias.size()]) in double (bias may be empty).
template <typename F>
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& bias, F f) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = f(double{x[i]} + (bias.empty() ? 0.0 : bias[i % bias.size()]));
  return y;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
}

Result<std::vector<Tensor>> run_op(const char* op, const std::vector<Tensor>& in, float alpha = 0, ThreadPool* pool = nullptr) {
  OpCall call(op, 1, "com.microsoft");
  if (alpha != 0) call.attr_float("alpha", alpha);
  return call.run(in, pool);
}

TEST(FastGelu, MatchesDoubleReferenceWithAndWithoutBias) {
  // Rows of 37 (vector tails), values past the tanh polynomial's switch and into saturation.
  std::vector<float> x = random_floats(3 * 5 * 37, 1);
  x[0] = 0, x[1] = -20, x[2] = 20, x[3] = 1e-6f, x[4] = -1e-6f;
  const std::vector<float> bias = random_floats(37, 2, 1.0f);
  auto plain = run_op("FastGelu", {f32({3, 5, 37}, x)});
  ASSERT_TRUE(plain) << plain.status().message();
  expect_close(values_of<float>((*plain)[0]), reference(x, {}, fast_gelu), 2e-6);
  auto biased = run_op("FastGelu", {f32({3, 5, 37}, x), f32({37}, bias)});
  ASSERT_TRUE(biased) << biased.status().message();
  expect_close(values_of<float>((*biased)[0]), reference(x, bias, fast_gelu), 2e-6);
}

TEST(BiasGelu, MatchesDoubleReferenceAcrossThreads) {
  // 96 rows of 1000: thread chunks start and end mid-row, so the bias offset must follow them.
  const std::vector<float> a = random_floats(96 * 1000, 3), b = random_floats(1000, 4, 1.0f);
  ThreadPool pool(4);
  auto out = run_op("BiasGelu", {f32({96, 1000}, a), f32({1000}, b)}, 0, &pool);
  ASSERT_TRUE(out) << out.status().message();
  expect_close(values_of<float>((*out)[0]), reference(a, b, erf_gelu), 2e-6);
}

TEST(QuickGelu, DefaultAndExplicitAlphaAndScalarInput) {
  const std::vector<float> x = random_floats(2 * 51, 5);
  auto dflt = run_op("QuickGelu", {f32({2, 51}, x)});
  ASSERT_TRUE(dflt) << dflt.status().message();
  expect_close(values_of<float>((*dflt)[0]), reference(x, {}, [](double v) { return quick_gelu(v, 1.702); }), 2e-6);
  auto neg = run_op("QuickGelu", {f32({2, 51}, x)}, -0.5f);
  ASSERT_TRUE(neg) << neg.status().message();
  expect_close(values_of<float>((*neg)[0]), reference(x, {}, [](double v) { return quick_gelu(v, -0.5); }), 2e-6);
  auto scalar = run_op("QuickGelu", {f32({}, {1.5f})});
  ASSERT_TRUE(scalar) << scalar.status().message();
  EXPECT_NEAR(values_of<float>((*scalar)[0])[0], quick_gelu(1.5, 1.702), 1e-6);
}

TEST(GeluFamily, EverySimdBuildMatchesReference) {
  std::vector<GeluFn (*)(GeluOp)> builds;
  if (cpu_features().avx2) builds.push_back(&avx2::gelu_f32);
  if (cpu_features().avx512) builds.push_back(&avx512::gelu_f32);
  const std::vector<float> x = random_floats(77, 6), bias = random_floats(77, 7, 1.0f);
  const std::pair<GeluOp, double (*)(double)> ops[] = {
      {GeluOp::kTanh, fast_gelu}, {GeluOp::kErf, erf_gelu}, {GeluOp::kQuick, [](double v) { return quick_gelu(v, 1.25); }}};
  for (auto build : builds) {
    for (const auto& [op, f] : ops) {
      std::vector<float> y(x.size());
      build(op)(x.data(), bias.data(), y.data(), static_cast<int64_t>(x.size()), 1.25f);
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = f(double{x[i]} + bias[i]);
      expect_close(y, want, 2e-6);
    }
  }
}

template <typename T>
void check_half_type(double tol) {
  const std::vector<float> x = random_floats(4 * 600, 8), bias = random_floats(600, 9, 1.0f);
  const Tensor xt = cast_tensor<T>({4, 600}, x), bt = cast_tensor<T>({600}, bias);
  const std::vector<float> xr = to_floats<T>(xt), br = to_floats<T>(bt);
  auto fast = run_op("FastGelu", {xt, bt});
  ASSERT_TRUE(fast) << fast.status().message();
  EXPECT_EQ((*fast)[0].dtype(), DTypeOf<T>::value);
  expect_close(to_floats<T>((*fast)[0]), reference(xr, br, fast_gelu), tol);
  auto bias_gelu = run_op("BiasGelu", {xt, bt});
  ASSERT_TRUE(bias_gelu) << bias_gelu.status().message();
  expect_close(to_floats<T>((*bias_gelu)[0]), reference(xr, br, erf_gelu), tol);
  auto quick = run_op("QuickGelu", {xt});
  ASSERT_TRUE(quick) << quick.status().message();
  expect_close(to_floats<T>((*quick)[0]), reference(xr, {}, [](double v) { return quick_gelu(v, 1.702); }), tol);
}

TEST(GeluFamily, Float16AndBFloat16) {
  check_half_type<Float16>(2e-3);
  check_half_type<BFloat16>(1e-2);
}

// ---- ONNX Runtime ---------------------------------------------------------------------------

// Random values plus zeros, saturating magnitudes, infinities and NaN, whose results (NaN for
// -inf, as 0 * inf) ONNX Runtime decides.
std::vector<float> with_extremes(std::vector<float> v) {
  const float inf = std::numeric_limits<float>::infinity();
  const float extremes[] = {0.0f, -0.0f, 30.0f, -30.0f, 100.0f, -100.0f, inf, -inf, std::nanf("")};
  std::copy(std::begin(extremes), std::end(extremes), v.begin());
  return v;
}

TEST(GeluFamilyOrt, FastGeluWithBias) {
  const std::vector<float> x = with_extremes(random_floats(3 * 40, 10)), bias = random_floats(40, 11, 1.0f);
  expect_matches_ort({.op_type = "FastGelu", .domain = "com.microsoft", .inputs = {"x", "bias"}, .outputs = {"y"},
                      .feeds = {{"x", f32({3, 40}, x)}, {"bias", f32({40}, bias)}}},
                     2e-6);
}

TEST(GeluFamilyOrt, BiasGeluFloat16) {
  const std::vector<float> a = random_floats(2 * 3 * 64, 12), b = random_floats(64, 13, 1.0f);
  expect_matches_ort({.op_type = "BiasGelu", .domain = "com.microsoft", .inputs = {"a", "b"}, .outputs = {"y"},
                      .feeds = {{"a", cast_tensor<Float16>({2, 3, 64}, a)}, {"b", cast_tensor<Float16>({64}, b)}}},
                     2e-3);
}

TEST(GeluFamilyOrt, QuickGeluExplicitAlpha) {
  const std::vector<float> x = with_extremes(random_floats(100, 14));
  expect_matches_ort({.op_type = "QuickGelu", .domain = "com.microsoft", .attributes = {{"alpha", 1.25}},
                      .inputs = {"x"}, .outputs = {"y"}, .feeds = {{"x", f32({100}, x)}}},
                     2e-6);
}

// ---- Bad inputs -----------------------------------------------------------------------------

TEST(GeluFamily, BadInputsAreErrorsNamingTheNode) {
  const Tensor x = f32({2, 8}, random_floats(16, 15));
  EXPECT_TRUE(fails_with(run_op("FastGelu", {x, f32({1, 8}, random_floats(8, 16))}), "test_FastGelu", "bias shape [1,8] must be [8]"));
  EXPECT_TRUE(fails_with(run_op("BiasGelu", {x, f32({4}, random_floats(4, 17))}), "test_BiasGelu", "bias shape [4] must be [8]"));
  EXPECT_TRUE(fails_with(run_op("BiasGelu", {x}), "test_BiasGelu", "input B (the bias) is required"));
  EXPECT_TRUE(fails_with(run_op("FastGelu", {f32({}, {1.0f}), f32({1}, {0.0f})}), "test_FastGelu", "rank >= 1"));
  EXPECT_TRUE(fails_with(run_op("QuickGelu", {Tensor::from_vector<int32_t>({2}, {1, 2})}), "test_QuickGelu", "got int32"));
  EXPECT_TRUE(fails_with(run_op("FastGelu", {x, cast_tensor<Float16>({8}, random_floats(8, 18))}), "test_FastGelu",
                         "bias dtype float16 differs"));
}

}  // namespace
}  // namespace onnx_genai::testing
