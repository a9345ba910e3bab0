// Normalization family: LayerNormalization, RMSNormalization (opset 23; no ONNX 1.12 test data, so
// checked against the double-precision formula of the spec written out here) and the
// com.microsoft SimplifiedLayerNormalization.
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
  std::normal_distribution<float> dist(mean, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// Y = (X - mean) / sqrt(var + eps) * scale + bias over rows of `len` (centred), or
// Y = X / sqrt(mean(X^2) + eps) * scale (RMS); scale/bias repeat with their own length.
std::vector<double> reference(const std::vector<float>& x, int64_t len, const std::vector<float>& scale,
                              const std::vector<float>& bias, double eps, bool centred,
                              std::vector<double>* inv_std = nullptr) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r * static_cast<size_t>(len) < x.size(); ++r) {
    const float* row = x.data() + r * static_cast<size_t>(len);
    double mean = 0, var = 0;
    if (centred) {
      for (int64_t i = 0; i < len; ++i) mean += row[i];
      mean /= static_cast<double>(len);
    }
    for (int64_t i = 0; i < len; ++i) var += (row[i] - mean) * (row[i] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(len) + eps);
    if (inv_std != nullptr) inv_std->push_back(inv);
    for (int64_t i = 0; i < len; ++i) {
      const size_t s = static_cast<size_t>(i) % scale.size();
      y[r * static_cast<size_t>(len) + static_cast<size_t>(i)] =
          (row[i] - mean) * inv * scale[s] + (bias.empty() ? 0.0 : bias[static_cast<size_t>(i) % bias.size()]);
    }
  }
  return y;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
}

TEST(LayerNorm, SmallRowByHandWithStatistics) {
  // x = [1, 2, 3, 4]: mean 2.5, variance 1.25.
  OpCall call("LayerNormalization", 17, "", 3);
  auto out = call.run({f32({1, 4}, {1, 2, 3, 4}), f32({4}, {1, 2, 1, 1}), f32({4}, {0, 0, 1, -1})});
  ASSERT_TRUE(out) << out.status().message();
  const float inv = 1.0f / std::sqrt(1.25f + 1e-5f);
  expect_near_all(values_of<float>((*out)[0]), {-1.5f * inv, -0.5f * inv * 2, 0.5f * inv + 1, 1.5f * inv - 1}, 1e-6f);
  EXPECT_EQ((*out)[1].shape(), (Shape{1, 1}));
  EXPECT_EQ((*out)[1].dtype(), DType::kF32);
  expect_near_all(values_of<float>((*out)[1]), {2.5f}, 1e-7f);
  expect_near_all(values_of<float>((*out)[2]), {inv}, 1e-6f);
}

TEST(LayerNorm, AxisAndNegativeAxisOverSeveralDims) {
  const std::vector<float> x = random_floats(2 * 3 * 5, 1, 3.0f), scale = random_floats(15, 2), bias = random_floats(15, 3);
  for (int64_t axis : {1, -2}) {
    OpCall call("LayerNormalization", 17, "", 3);
    call.attr_int("axis", axis).attr_float("epsilon", 0.1f);
    auto out = call.run({f32({2, 3, 5}, x), f32({3, 5}, scale), f32({3, 5}, bias)});
    ASSERT_TRUE(out) << out.status().message();
    std::vector<double> inv;
    expect_close(values_of<float>((*out)[0]), reference(x, 15, scale, bias, 0.1f, true, &inv), 1e-5);
    EXPECT_EQ((*out)[2].shape(), (Shape{2, 1, 1}));
    expect_close(values_of<float>((*out)[2]), inv, 1e-6);
  }
}

TEST(LayerNorm, WideRowsLargeMeanAndThreads) {
  // Hidden size 4096 with a large common offset: the two-pass variance keeps its precision.
  const int64_t rows = 33, len = 4096;
  const std::vector<float> x = random_floats(rows * len, 4, 1000.0f), scale = random_floats(len, 5), bias = random_floats(len, 6);
  ThreadPool pool(4);
  auto out = OpCall("LayerNormalization", 17).run({f32({rows, len}, x), f32({len}, scale), f32({len}, bias)}, &pool);
  ASSERT_TRUE(out) << out.status().message();
  expect_close(values_of<float>((*out)[0]), reference(x, len, scale, bias, 1e-5f, true), 5e-4);
}

TEST(LayerNorm, NoBiasAndOtherDtypes) {
  const std::vector<float> x{1, -2, 3, 0.5f, 4, 2}, scale{1, 0.5f, 2};
  const std::vector<double> want = reference(x, 3, scale, {}, 1e-5f, true);
  auto h = OpCall("LayerNormalization", 17).run({cast_tensor<Float16>({2, 3}, x), cast_tensor<Float16>({3}, scale)});
  ASSERT_TRUE(h) << h.status().message();
  expect_close(to_floats<Float16>((*h)[0]), want, 2e-3);
  auto b = OpCall("LayerNormalization", 17).run({cast_tensor<BFloat16>({2, 3}, x), cast_tensor<BFloat16>({3}, scale)});
  ASSERT_TRUE(b);
  expect_close(to_floats<BFloat16>((*b)[0]), want, 1e-2);
  auto d = OpCall("LayerNormalization", 17)
               .run({Tensor::from_vector<double>({2, 3}, std::vector<double>(x.begin(), x.end())),
                     Tensor::from_vector<double>({3}, std::vector<double>(scale.begin(), scale.end()))});
  ASSERT_TRUE(d);
  const std::vector<double> got = values_of<double>((*d)[0]);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6);  // eps is an f32 attribute
}

TEST(RMSNorm, MatchesDoubleReference) {
  const int64_t rows = 5, len = 4096 + 7;  // an odd width exercises the vector tails
  const std::vector<float> x = random_floats(rows * len, 7), scale = random_floats(len, 8);
  auto out = OpCall("RMSNormalization", 23).attr_float("epsilon", 1e-6f).run({f32({rows, len}, x), f32({len}, scale)});
  ASSERT_TRUE(out) << out.status().message();
  expect_close(values_of<float>((*out)[0]), reference(x, len, scale, {}, 1e-6f, false), 2e-5);
}

TEST(RMSNorm, AxisWithBroadcastScaleAndDtypes) {
  // Normalise over [3, 5] (axis -2) with a scale of [5] repeating over the 3.
  const std::vector<float> x = random_floats(2 * 3 * 5, 9), scale = random_floats(5, 10);
  auto out = OpCall("RMSNormalization", 23).attr_int("axis", -2).run({f32({2, 3, 5}, x), f32({1, 5}, scale)});
  ASSERT_TRUE(out) << out.status().message();
  const std::vector<double> want = reference(x, 15, scale, {}, 1e-5f, false);
  expect_close(values_of<float>((*out)[0]), want, 1e-5);
  // f16: the reference sees the same f16-rounded inputs.
  const Tensor xh = cast_tensor<Float16>({2, 3, 5}, x), sh = cast_tensor<Float16>({5}, scale);
  auto h = OpCall("RMSNormalization", 23).attr_int("axis", 1).run({xh, sh});
  ASSERT_TRUE(h) << h.status().message();
  expect_close(to_floats<Float16>((*h)[0]), reference(to_floats<Float16>(xh), 15, to_floats<Float16>(sh), {}, 1e-5f, false), 2e-3);
}

TEST(SimplifiedLayerNorm, ContribOpGivesYAndInvStdVar) {
  const std::vector<float> x = random_floats(3 * 64, 11), scale = random_floats(64, 12);
  OpCall call("SimplifiedLayerNormalization", 1, "com.microsoft", 2);
  auto out = call.attr_float("epsilon", 1e-6f).run({f32({3, 64}, x), f32({64}, scale)});
  ASSERT_TRUE(out) << out.status().message();
  std::vector<double> inv;
  expect_close(values_of<float>((*out)[0]), reference(x, 64, scale, {}, 1e-6f, false, &inv), 1e-5);
  EXPECT_EQ((*out)[1].shape(), (Shape{3, 1}));
  expect_close(values_of<float>((*out)[1]), inv, 1e-6);
  // Hand check: x = [3, 4], scale 1, eps 0: rms = sqrt(12.5).
  auto hand = OpCall("SimplifiedLayerNormalization", 1, "com.microsoft").attr_float("epsilon", 0.0f).run({f32({2}, {3, 4}), f32({2}, {1, 1})});
  ASSERT_TRUE(hand);
  expect_near_all(values_of<float>((*hand)[0]), {3 / std::sqrt(12.5f), 4 / std::sqrt(12.5f)}, 1e-6f);
}

TEST(SimplifiedLayerNorm, DefaultDomainMatchesOnnxRuntime) {
  // The onnxruntime-genai model builder emits SimplifiedLayerNormalization in the default domain.
  const std::vector<float> x = random_floats(4 * 48, 16), scale = random_floats(48, 17);
  expect_matches_ort({.op_type = "SimplifiedLayerNormalization", .attributes = {{"epsilon", 1e-6}, {"axis", -1}},
                      .inputs = {"x", "scale"}, .outputs = {"y", "inv_std_var"},
                      .feeds = {{"x", f32({4, 48}, x)}, {"scale", f32({48}, scale)}}, .default_opset = 21},
                     2e-6);
}

TEST(NormRowKernels, SimdBuildsMatchReference) {
  std::vector<const NormRowKernels*> builds;
  if (cpu_features().avx2) builds.push_back(&avx2::norm_row_kernels());
  if (cpu_features().avx512) builds.push_back(&avx512::norm_row_kernels());
  for (const NormRowKernels* k : builds) {
    for (int64_t n : {int64_t{1}, int64_t{9}, int64_t{64}, int64_t{1000}}) {
      const std::vector<float> x = random_floats(n, 13), s = random_floats(n, 14), b = random_floats(n, 15);
      double sum = 0, sq = 0;
      for (float v : x) sum += v;
      for (float v : x) sq += (v - 0.25) * (v - 0.25);
      EXPECT_NEAR(k->sum(x.data(), n), sum, 1e-4 * (1 + std::fabs(sum)));
      EXPECT_NEAR(k->sum_sq_dev(x.data(), 0.25f, n), sq, 1e-5 * sq);
      std::vector<float> y(static_cast<size_t>(n));
      k->affine(x.data(), 0.25f, 2.0f, s.data(), b.data(), y.data(), n);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], (x[i] - 0.25) * 2.0 * s[i] + b[i], 1e-5) << i;
    }
  }
}

TEST(Normalization, BadInputsAreErrors) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_FALSE(OpCall("LayerNormalization", 17).run({x, f32({2}, {1, 1})}));                       // scale shape
  EXPECT_FALSE(OpCall("LayerNormalization", 17).run({x, f32({3}, {1, 1, 1}), f32({4}, {0, 0, 0, 0})}));  // bias shape
  EXPECT_FALSE(OpCall("LayerNormalization", 17).attr_int("axis", 2).run({x, f32({3}, {1, 1, 1})}));
  EXPECT_FALSE(OpCall("RMSNormalization", 23).run({x, cast_tensor<Float16>({3}, {1, 1, 1})}));     // dtype
  EXPECT_FALSE(OpCall("RMSNormalization", 23).run({x}));                                           // no scale
  EXPECT_FALSE(OpCall("SimplifiedLayerNormalization", 1, "com.microsoft").attr_int("axis", -3).run({x, f32({3}, {1, 1, 1})}));
}

}  // namespace
}  // namespace onnx_genai::testing
