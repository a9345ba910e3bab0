// Softmax family: Softmax, LogSoftmax, Hardmax. Small cases by hand from the ONNX spec; vocabulary
// rows (32k, 152k) and every row-kernel build (scalar via the op, AVX2, AVX-512 directly) against
// a double-precision reference.
#include <gtest/gtest.h>

#include <random>

#include "core/cpu_features.h"
#include "ops/cpu/avx2/softmax_rows.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

std::vector<float> random_logits(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// Double-precision softmax / log-softmax of one row.
std::vector<double> reference(const std::vector<float>& x, bool log) {
  double m = -INFINITY, s = 0;
  for (float v : x) m = std::max(m, static_cast<double>(v));
  for (float v : x) s += std::exp(v - m);
  std::vector<double> out;
  for (float v : x) out.push_back(log ? v - m - std::log(s) : std::exp(v - m) / s);
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double rtol, double atol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << "at element " << i;
  }
}

Result<Tensor> run1(const std::string& op, const Tensor& x, int opset, std::optional<int64_t> axis = {}) {
  OpCall call(op, opset);
  if (axis) call.attr_int("axis", *axis);
  auto out = call.run({x});
  if (!out) return out.status();
  return (*out)[0];
}

TEST(Softmax, SmallRowByHand) {
  auto s = run1("Softmax", f32({1, 3}, {1, 2, 3}), 13);
  ASSERT_TRUE(s) << s.status().message();
  expect_near_all(values_of<float>(*s), {0.09003057f, 0.24472847f, 0.66524096f}, 1e-6f);
  auto l = run1("LogSoftmax", f32({1, 3}, {1, 2, 3}), 13);
  ASSERT_TRUE(l);
  expect_near_all(values_of<float>(*l), {-2.40760596f, -1.40760596f, -0.40760596f}, 1e-6f);
}

TEST(Softmax, OuterAxisOpset13IsColumnWise) {
  // Along axis 0 of [[0, 1], [0, 3]]: column 0 is uniform, column 1 is softmax(1, 3).
  auto s = run1("Softmax", f32({2, 2}, {0, 1, 0, 3}), 13, 0);
  ASSERT_TRUE(s) << s.status().message();
  expect_near_all(values_of<float>(*s), {0.5f, 0.11920292f, 0.5f, 0.88079708f}, 1e-6f);
  auto l = run1("LogSoftmax", f32({2, 2}, {0, 1, 0, 3}), 13, -2);
  ASSERT_TRUE(l);
  expect_near_all(values_of<float>(*l), {std::log(0.5f), std::log(0.11920292f), std::log(0.5f), std::log(0.88079708f)}, 1e-5f);
}

TEST(Softmax, BeforeOpset13CoercesTo2D) {
  // axis = 0 on opset 11 flattens everything into one row of 4.
  auto s = run1("Softmax", f32({2, 2}, {1, 2, 3, 4}), 11, 0);
  ASSERT_TRUE(s) << s.status().message();
  const std::vector<double> want = reference({1, 2, 3, 4}, false);
  expect_close(values_of<float>(*s), want, 1e-6, 1e-7);
  // Default axis 1 on [2, 1, 2] flattens dims 1.. into rows of 2.
  auto d = run1("Softmax", f32({2, 1, 2}, {0, 0, 1, 3}), 11);
  ASSERT_TRUE(d);
  expect_near_all(values_of<float>(*d), {0.5f, 0.5f, 0.11920292f, 0.88079708f}, 1e-6f);
}

TEST(Softmax, MaskedLogitsGetExactlyZero) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = random_logits(37, 1);
  x[3] = x[20] = -inf;
  auto s = run1("Softmax", f32({1, 37}, x), 13);
  ASSERT_TRUE(s);
  EXPECT_EQ(values_of<float>(*s)[3], 0.0f);
  EXPECT_EQ(values_of<float>(*s)[20], 0.0f);
  expect_close(values_of<float>(*s), reference(x, false), 1e-5, 1e-7);
}

TEST(Softmax, VocabularyRowsMatchReference) {
  for (int64_t vocab : {int64_t{32000}, int64_t{152064}, int64_t{1001}}) {
    std::vector<float> x = random_logits(vocab, static_cast<uint32_t>(vocab));
    auto s = run1("Softmax", f32({1, vocab}, x), 13);
    ASSERT_TRUE(s) << s.status().message();
    expect_close(values_of<float>(*s), reference(x, false), 1e-5, 1e-9);
    auto l = run1("LogSoftmax", f32({1, vocab}, x), 13);
    ASSERT_TRUE(l);
    expect_close(values_of<float>(*l), reference(x, true), 1e-5, 1e-5);
  }
}

TEST(Softmax, ManyRowsWithThreads) {
  const int64_t rows = 64, cols = 777;
  std::vector<float> x = random_logits(rows * cols, 9);
  ThreadPool pool(4);
  auto out = OpCall("Softmax", 13).run({f32({rows, cols}, x)}, &pool);
  ASSERT_TRUE(out) << out.status().message();
  const std::vector<float> got = values_of<float>((*out)[0]);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> row(x.begin() + r * cols, x.begin() + (r + 1) * cols);
    expect_close(std::vector<float>(got.begin() + r * cols, got.begin() + (r + 1) * cols), reference(row, false), 1e-5, 1e-9);
  }
}

// Along a middle axis with more columns than one tile: the tiled path (SIMD exps for f32).
TEST(Softmax, MiddleAxisOverManyColumnsMatchesReference) {
  const int64_t outer = 3, len = 37, inner = 130;
  const std::vector<float> x = random_logits(outer * len * inner, 21);
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    auto out = run1(op, f32({outer, len, inner}, x), 13, 1);
    ASSERT_TRUE(out) << out.status().message();
    const std::vector<float> got = values_of<float>(*out);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        std::vector<float> lane, got_lane;
        for (int64_t r = 0; r < len; ++r) {
          lane.push_back(x[static_cast<size_t>((o * len + r) * inner + i)]);
          got_lane.push_back(got[static_cast<size_t>((o * len + r) * inner + i)]);
        }
        expect_close(got_lane, reference(lane, std::string(op) == "LogSoftmax"), 1e-5, 1e-6);
      }
    }
  }
}

// Each SIMD build of the row kernels the CPU can run, called directly.
TEST(Softmax, RowKernelBuildsMatchReference) {
  std::vector<const SoftmaxRowKernels*> builds;
  if (cpu_features().avx2) builds.push_back(&avx2::softmax_row_kernels());
  if (cpu_features().avx512) builds.push_back(&avx512::softmax_row_kernels());
  for (const SoftmaxRowKernels* k : builds) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{67}, int64_t{4099}}) {
      std::vector<float> x = random_logits(n, static_cast<uint32_t>(n));
      x[0] = -200.0f;  // far below the max: underflows to 0
      const float m = k->max(x.data(), n);
      EXPECT_EQ(m, *std::max_element(x.begin(), x.end()));
      std::vector<float> e(static_cast<size_t>(n));
      const float sum = k->exp_sum(x.data(), m, e.data(), n);
      double want_sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        // The kernel's argument is the f32 difference; this checks the exp itself.
        const double want = std::exp(static_cast<double>(x[static_cast<size_t>(i)] - m));
        want_sum += want;
        ASSERT_NEAR(e[static_cast<size_t>(i)], want, 2e-7 * want + 1e-38) << "n=" << n << " i=" << i;
      }
      EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum);
      EXPECT_EQ(k->exp_sum(x.data(), m, nullptr, n), sum);
      std::vector<float> shifts(x.size()), per_column(x.size());
      for (size_t i = 0; i < shifts.size(); ++i) shifts[i] = static_cast<float>(i % 5);
      k->exp_shifted(x.data(), shifts.data(), per_column.data(), n);
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = std::exp(static_cast<double>(x[i] - shifts[i]));
        ASSERT_NEAR(per_column[i], want, 2e-7 * want + 1e-38) << "n=" << n << " i=" << i;
      }
      std::vector<float> scaled(e.size()), shifted(x.size());
      k->scale(e.data(), 0.5f, scaled.data(), n);
      k->add(x.data(), 1.5f, shifted.data(), n);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(scaled[i], e[i] * 0.5f) << i;
        ASSERT_EQ(shifted[i], x[i] + 1.5f) << i;
      }
    }
  }
}

TEST(Softmax, OtherDtypes) {
  const std::vector<float> x{1, 2, 3, 0.5f};
  const std::vector<double> want = reference(x, false);
  auto h = run1("Softmax", cast_tensor<Float16>({4}, x), 13);
  ASSERT_TRUE(h) << h.status().message();
  expect_close(to_floats<Float16>(*h), want, 2e-3, 1e-4);
  auto b = run1("Softmax", cast_tensor<BFloat16>({4}, x), 13);
  ASSERT_TRUE(b);
  expect_close(to_floats<BFloat16>(*b), want, 1e-2, 1e-3);
  auto d = run1("LogSoftmax", Tensor::from_vector<double>({4}, std::vector<double>(x.begin(), x.end())), 13);
  ASSERT_TRUE(d);
  const std::vector<double> got = values_of<double>(*d), want_log = reference(x, true);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want_log[i], 1e-12);
}

TEST(Hardmax, FirstMaximumWins) {
  auto h = run1("Hardmax", f32({2, 4}, {3, 3, 3, 1, 0, 2, 5, 5}), 13);
  ASSERT_TRUE(h) << h.status().message();
  EXPECT_EQ(values_of<float>(*h), (std::vector<float>{1, 0, 0, 0, 0, 0, 1, 0}));
  auto col = run1("Hardmax", f32({2, 2}, {1, 5, 4, 5}), 13, 0);
  ASSERT_TRUE(col);
  EXPECT_EQ(values_of<float>(*col), (std::vector<float>{0, 1, 1, 0}));
  auto h16 = run1("Hardmax", cast_tensor<Float16>({3}, {-1, 2, 0}), 13);
  ASSERT_TRUE(h16);
  EXPECT_EQ(to_floats<Float16>(*h16), (std::vector<float>{0, 1, 0}));
}

TEST(Softmax, BadAxisIsError) {
  EXPECT_FALSE(run1("Softmax", f32({2, 2}, {1, 2, 3, 4}), 13, 2));
  EXPECT_FALSE(run1("LogSoftmax", f32({2, 2}, {1, 2, 3, 4}), 13, -3));
  EXPECT_FALSE(run1("Hardmax", f32({2, 2}, {1, 2, 3, 4}), 11, 3));
  EXPECT_FALSE(run1("Softmax", Tensor::from_vector<int32_t>({2}, std::vector<int32_t>{1, 2}), 13));
}

}  // namespace
}  // namespace onnx_genai::testing
