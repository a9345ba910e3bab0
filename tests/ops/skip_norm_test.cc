// com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization: every output against
// a double-precision reference written out here (s = input + skip + bias, then LayerNorm / RMS
// norm of s over the last axis), f16 / bf16 against the same reference on rounded inputs, a few
// single-node models against ONNX Runtime (pinning output dtypes, which outputs exist, the
// simplified op's all-zero mean, skip broadcasting and the default epsilon), and bad inputs.
#include <gtest/gtest.h>

#include <random>

#include "core/cpu_features.h"
#include "ops/contrib_test_util.h"
#include "ops/cpu/avx2/norm_rows.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed, float mean = 0.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(mean, 1.5f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

struct SkipCase {
  std::vector<float> x, skip, gamma, beta, bias;  // beta / bias empty when absent
  int64_t len = 0;
};

struct SkipReference {
  std::vector<double> y, mean, inv_std, sum;
};

// skip holds skip.size() / len rows that repeat over x's rows.
SkipReference reference(const SkipCase& c, double eps, bool centred) {
  SkipReference r;
  const size_t len = static_cast<size_t>(c.len), skip_rows = c.skip.size() / len;
  for (size_t row = 0; row * len < c.x.size(); ++row) {
    std::vector<double> s(len);
    for (size_t i = 0; i < len; ++i) {
      s[i] = double{c.x[row * len + i]} + c.skip[(row % skip_rows) * len + i] + (c.bias.empty() ? 0.0 : c.bias[i]);
    }
    double mean = 0, var = 0;
    if (centred) {
      for (double v : s) mean += v;
      mean /= static_cast<double>(len);
    }
    for (double v : s) var += (v - mean) * (v - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(len) + eps);
    r.mean.push_back(mean);
    r.inv_std.push_back(inv);
    for (size_t i = 0; i < len; ++i) {
      r.sum.push_back(s[i]);
      r.y.push_back((s[i] - mean) * inv * c.gamma[i] + (c.beta.empty() ? 0.0 : c.beta[i]));
    }
  }
  return r;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
}

SkipCase random_case(int64_t rows, int64_t skip_rows, int64_t len, bool beta, bool bias, uint32_t seed, float offset = 0) {
  SkipCase c;
  c.len = len;
  c.x = random_floats(rows * len, seed, offset);
  c.skip = random_floats(skip_rows * len, seed + 1);
  c.gamma = random_floats(len, seed + 2);
  if (beta) c.beta = random_floats(len, seed + 3);
  if (bias) c.bias = random_floats(len, seed + 4);
  return c;
}

// The node's inputs for `c` in dtype T: (input, skip, gamma[, beta][, bias]) with an empty
// Tensor for an omitted beta.
template <typename T>
std::vector<Tensor> inputs_of(const SkipCase& c, const Shape& x_shape, const Shape& skip_shape, bool simplified) {
  const Shape h{c.len};
  std::vector<Tensor> in{cast_tensor<T>(x_shape, c.x), cast_tensor<T>(skip_shape, c.skip), cast_tensor<T>(h, c.gamma)};
  if (!simplified) in.push_back(c.beta.empty() ? Tensor() : cast_tensor<T>(h, c.beta));
  if (!c.bias.empty()) in.push_back(cast_tensor<T>(h, c.bias));
  return in;
}

// `c` with every value rounded to T, so a reference sees what the kernel sees.
template <typename T>
SkipCase rounded(SkipCase c) {
  for (auto* v : {&c.x, &c.skip, &c.gamma, &c.beta, &c.bias}) {
    for (float& f : *v) f = static_cast<float>(T(f));
  }
  return c;
}

TEST(SkipSimplifiedLayerNorm, AllOutputsMatchDoubleReference) {
  const SkipCase c = random_case(6, 6, 72, false, true, 1);
  OpCall call("SkipSimplifiedLayerNormalization", 1, "com.microsoft", 4);
  auto out = call.attr_float("epsilon", 1e-6f).run(inputs_of<float>(c, {2, 3, 72}, {2, 3, 72}, true));
  ASSERT_TRUE(out) << out.status().message();
  const SkipReference want = reference(c, 1e-6f, false);
  expect_close(values_of<float>((*out)[0]), want.y, 2e-6);
  // The simplified op has no mean: ONNX Runtime fills the output with zeros.
  EXPECT_EQ((*out)[1].shape(), (Shape{2, 3, 1}));
  EXPECT_EQ((*out)[1].dtype(), DType::kF32);
  EXPECT_EQ(values_of<float>((*out)[1]), std::vector<float>(6, 0.0f));
  EXPECT_EQ((*out)[2].shape(), (Shape{2, 3, 1}));
  expect_close(values_of<float>((*out)[2]), want.inv_std, 1e-6);
  EXPECT_EQ((*out)[3].shape(), (Shape{2, 3, 72}));
  expect_close(values_of<float>((*out)[3]), want.sum, 3e-7);
}

TEST(SkipLayerNorm, WideRowsLargeMeanBroadcastSkipAndThreads) {
  // Hidden 4096 + 3 (vector tails), a large common offset (the two-pass variance keeps its
  // precision), skip [S, H] and [1, S, H] repeating over the batch, rows split over 4 threads.
  const int64_t batch = 3, seq = 5, len = 4099;
  const SkipCase c = random_case(batch * seq, seq, len, true, true, 2, 100.0f);
  const SkipReference want = reference(c, 1e-5f, true);
  ThreadPool pool(4);
  for (const Shape& skip_shape : {Shape{seq, len}, Shape{1, seq, len}}) {
    OpCall call("SkipLayerNormalization", 1, "com.microsoft", 4);
    auto out = call.attr_float("epsilon", 1e-5f).run(inputs_of<float>(c, {batch, seq, len}, skip_shape, false), &pool);
    ASSERT_TRUE(out) << out.status().message();
    expect_close(values_of<float>((*out)[0]), want.y, 5e-4);
    expect_close(values_of<float>((*out)[1]), want.mean, 1e-6);
    expect_close(values_of<float>((*out)[2]), want.inv_std, 5e-4);
    expect_close(values_of<float>((*out)[3]), want.sum, 3e-7);
  }
}

TEST(SkipLayerNorm, TwoDimInputWithoutBetaOrBiasAndOnlySomeOutputs) {
  const SkipCase c = random_case(7, 7, 33, false, false, 3);
  OpCall call("SkipLayerNormalization", 1, "com.microsoft", 4);
  call.node().outputs[1] = nullptr;  // mean and inv_std_var not requested
  call.node().outputs[2] = nullptr;
  auto out = call.attr_float("epsilon", 1e-4f).run(inputs_of<float>(c, {7, 33}, {7, 33}, false));
  ASSERT_TRUE(out) << out.status().message();
  const SkipReference want = reference(c, 1e-4f, true);
  expect_close(values_of<float>((*out)[0]), want.y, 2e-6);
  EXPECT_FALSE((*out)[1].defined());
  expect_close(values_of<float>((*out)[3]), want.sum, 3e-7);
}

template <typename T>
void check_half_type(bool simplified, double tol) {
  // 24 rows of 4096 give the kernel three threads, each with its own scratch row.
  const SkipCase c = rounded<T>(random_case(24, 24, 4096, !simplified, true, 4));
  ThreadPool pool(3);
  const char* op = simplified ? "SkipSimplifiedLayerNormalization" : "SkipLayerNormalization";
  OpCall call(op, 1, "com.microsoft", 4);
  auto out = call.attr_float("epsilon", 1e-5f).run(inputs_of<T>(c, {4, 6, 4096}, {4, 6, 4096}, simplified), &pool);
  ASSERT_TRUE(out) << out.status().message();
  const SkipReference want = reference(c, 1e-5f, !simplified);
  EXPECT_EQ((*out)[0].dtype(), DTypeOf<T>::value);
  EXPECT_EQ((*out)[2].dtype(), DType::kF32);
  expect_close(to_floats<T>((*out)[0]), want.y, tol);
  expect_close(values_of<float>((*out)[2]), want.inv_std, 1e-5);
  expect_close(to_floats<T>((*out)[3]), want.sum, tol);
}

TEST(SkipNorms, Float16AndBFloat16MatchReference) {
  for (bool simplified : {false, true}) {
    SCOPED_TRACE(simplified ? "simplified" : "layer norm");
    check_half_type<Float16>(simplified, 2e-3);
    check_half_type<BFloat16>(simplified, 1e-2);
  }
}

TEST(NormRowKernels, SimdAddMatchesScalar) {
  std::vector<const NormRowKernels*> builds;
  if (cpu_features().avx2) builds.push_back(&avx2::norm_row_kernels());
  if (cpu_features().avx512) builds.push_back(&avx512::norm_row_kernels());
  for (const NormRowKernels* k : builds) {
    for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{100}}) {
      const std::vector<float> x = random_floats(n, 5), s = random_floats(n, 6), b = random_floats(n, 7);
      std::vector<float> out(static_cast<size_t>(n));
      k->add(x.data(), s.data(), b.data(), out.data(), n);
      for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[i] + s[i] + b[i]) << i;
      k->add(x.data(), s.data(), nullptr, out.data(), n);
      for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[i] + s[i]) << i;
    }
  }
}

// ---- ONNX Runtime ---------------------------------------------------------------------------

TEST(SkipNormsOrt, SimplifiedWithBiasAndEveryOutput) {
  const SkipCase c = random_case(8, 8, 96, false, true, 8);
  OrtNodeModel m{.op_type = "SkipSimplifiedLayerNormalization", .domain = "com.microsoft",
                 .attributes = {{"epsilon", 1e-6}}, .inputs = {"x", "skip", "gamma", "bias"},
                 .outputs = {"y", "mean", "inv_std", "sum"},
                 .feeds = {{"x", f32({2, 4, 96}, c.x)}, {"skip", f32({2, 4, 96}, c.skip)},
                           {"gamma", f32({96}, c.gamma)}, {"bias", f32({96}, c.bias)}}};
  expect_matches_ort(m, 2e-6);
}

TEST(SkipNormsOrt, LayerNormFloat16BroadcastSkipDefaultEpsilon) {
  // Sums near 1e-3 (variance near 1e-6) tell the default epsilon (1e-12) from a larger one.
  SkipCase c = random_case(6, 3, 64, true, true, 9);
  for (auto* v : {&c.x, &c.skip, &c.bias}) {
    for (float& f : *v) f *= 1e-3f;
  }
  c = rounded<Float16>(c);
  OrtNodeModel m{.op_type = "SkipLayerNormalization", .domain = "com.microsoft",
                 .inputs = {"x", "skip", "gamma", "beta", "bias"}, .outputs = {"y", "mean", "inv_std", "sum"},
                 .feeds = {{"x", cast_tensor<Float16>({2, 3, 64}, c.x)}, {"skip", cast_tensor<Float16>({3, 64}, c.skip)},
                           {"gamma", cast_tensor<Float16>({64}, c.gamma)}, {"beta", cast_tensor<Float16>({64}, c.beta)},
                           {"bias", cast_tensor<Float16>({64}, c.bias)}}};
  expect_matches_ort(m, 2e-3);
}

TEST(SkipNormsOrt, TwoDimInputBiasWithoutBetaSumOnly) {
  const SkipCase c = random_case(5, 5, 40, false, true, 10);
  OrtNodeModel m{.op_type = "SkipLayerNormalization", .domain = "com.microsoft", .attributes = {{"epsilon", 1e-5}},
                 .inputs = {"x", "skip", "gamma", "", "bias"}, .outputs = {"y", "", "", "sum"},
                 .feeds = {{"x", f32({5, 40}, c.x)}, {"skip", f32({5, 40}, c.skip)}, {"gamma", f32({40}, c.gamma)},
                           {"bias", f32({40}, c.bias)}}};
  expect_matches_ort(m, 2e-6);
}

// ---- Bad inputs -----------------------------------------------------------------------------

TEST(SkipNorms, BadInputsAreErrorsNamingTheNode) {
  const Tensor x = f32({2, 3, 4}, random_floats(24, 11)), gamma = f32({4}, {1, 1, 1, 1});
  const auto run = [](const char* op, std::vector<Tensor> in) {
    return OpCall(op, 1, "com.microsoft").run(in);
  };
  const char* sln = "test_SkipLayerNormalization";
  const char* ssln = "test_SkipSimplifiedLayerNormalization";
  EXPECT_TRUE(fails_with(run("SkipLayerNormalization", {x, f32({2, 4}, random_floats(8, 12)), gamma}), sln, "skip shape [2,4]"));
  EXPECT_TRUE(fails_with(run("SkipLayerNormalization", {x, f32({2, 3, 4}, random_floats(24, 12)), f32({3}, {1, 1, 1})}), sln,
                         "gamma shape [3] must be [4]"));
  EXPECT_TRUE(fails_with(run("SkipSimplifiedLayerNormalization", {x, x, gamma, f32({1, 4}, {0, 0, 0, 0})}), ssln,
                         "bias shape [1,4] must be [4]"));
  EXPECT_TRUE(fails_with(run("SkipSimplifiedLayerNormalization", {x, cast_tensor<Float16>({2, 3, 4}, random_floats(24, 13)), gamma}),
                         ssln, "skip dtype float16 differs"));
  EXPECT_TRUE(fails_with(run("SkipLayerNormalization", {f32({1, 2, 3, 4}, random_floats(24, 14)), x, gamma}), sln,
                         "input must be 2-D or 3-D"));
  // A 2-D input takes no broadcast skip.
  EXPECT_TRUE(fails_with(run("SkipLayerNormalization", {f32({6, 4}, random_floats(24, 15)), f32({1, 4}, {1, 2, 3, 4}), gamma}),
                         sln, "must equal input shape [6,4]"));
  EXPECT_TRUE(fails_with(run("SkipLayerNormalization", {x, x}), sln, "required"));
}

}  // namespace
}  // namespace onnx_genai::testing
