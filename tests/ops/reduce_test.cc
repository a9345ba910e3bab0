// Reduce family: Reduce*, ArgMax/ArgMin, TopK, CumSum. Small cases are worked out by hand from
// the ONNX spec; large cases (vectorised and tiled paths, threads) are checked against plain
// double-precision loops written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

Tensor i64(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<int64_t>(Shape{n}, v);
}
std::vector<float> random_floats(int64_t n, uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// x = [[1, 2, 3], [4, 5, 6]]
Tensor x23() { return f32({2, 3}, {1, 2, 3, 4, 5, 6}); }

Result<Tensor> reduce(const std::string& op, const Tensor& x, std::vector<int64_t> axes, bool keepdims = true,
                      int opset = 13) {
  OpCall call(op, opset);
  call.attr_int("keepdims", keepdims ? 1 : 0);
  const bool as_input = opset >= (op == "ReduceSum" ? 13 : 18);
  if (!as_input && !axes.empty()) call.attr_ints("axes", axes);
  auto out = as_input ? call.run({x, i64(axes)}) : call.run({x});
  if (!out) return out.status();
  return (*out)[0];
}

TEST(Reduce, SumAlongLastAxisKeepdimsOnAndOff) {
  auto kept = reduce("ReduceSum", x23(), {1}, true);
  ASSERT_TRUE(kept) << kept.status().message();
  EXPECT_EQ(kept->shape(), (Shape{2, 1}));
  EXPECT_EQ(values_of<float>(*kept), (std::vector<float>{6, 15}));
  auto dropped = reduce("ReduceSum", x23(), {-1}, false);
  ASSERT_TRUE(dropped) << dropped.status().message();
  EXPECT_EQ(dropped->shape(), (Shape{2}));
  EXPECT_EQ(values_of<float>(*dropped), (std::vector<float>{6, 15}));
}

TEST(Reduce, SumOldOpsetTakesAxesAttribute) {
  auto out = reduce("ReduceSum", x23(), {0}, false, 11);
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(values_of<float>(*out), (std::vector<float>{5, 7, 9}));
}

TEST(Reduce, EveryOpByHand) {
  // Along axis 1 of [[1, 2, 3], [4, 5, 6]].
  struct Case {
    const char* op;
    std::vector<float> want;
  } cases[] = {
      {"ReduceMean", {2, 5}},
      {"ReduceMax", {3, 6}},
      {"ReduceMin", {1, 4}},
      {"ReduceProd", {6, 120}},
      {"ReduceL1", {6, 15}},
      {"ReduceL2", {std::sqrt(14.0f), std::sqrt(77.0f)}},
      {"ReduceLogSum", {std::log(6.0f), std::log(15.0f)}},
      {"ReduceLogSumExp", {std::log(std::exp(1.0f) + std::exp(2.0f) + std::exp(3.0f)),
                           std::log(std::exp(4.0f) + std::exp(5.0f) + std::exp(6.0f))}},
      {"ReduceSumSquare", {14, 77}},
  };
  for (const Case& c : cases) {
    auto out = reduce(c.op, x23(), {1}, false);
    ASSERT_TRUE(out) << c.op << ": " << out.status().message();
    expect_near_all(values_of<float>(*out), c.want, 1e-6f);
  }
}

TEST(Reduce, L1UsesAbsoluteValuesAndMaxSeesNegatives) {
  Tensor x = f32({4}, {-1, -5, 2, -3});
  auto l1 = reduce("ReduceL1", x, {0}, false);
  ASSERT_TRUE(l1);
  EXPECT_EQ(values_of<float>(*l1), (std::vector<float>{11}));
  auto mx = reduce("ReduceMax", f32({3}, {-4, -2, -9}), {0}, false);
  ASSERT_TRUE(mx);
  EXPECT_EQ(values_of<float>(*mx), (std::vector<float>{-2}));
}

TEST(Reduce, Opset18TakesAxesInput) {
  auto out = reduce("ReduceMean", x23(), {0}, false, 18);
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(values_of<float>(*out), (std::vector<float>{2.5f, 3.5f, 4.5f}));
}

TEST(Reduce, EmptyAxesReduceEverythingUnlessNoop) {
  auto all = reduce("ReduceSum", x23(), {}, true);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->shape(), (Shape{1, 1}));
  EXPECT_EQ(values_of<float>(*all), (std::vector<float>{21}));
  auto noop = OpCall("ReduceSum", 13).attr_int("noop_with_empty_axes", 1).run({x23(), i64({})});
  ASSERT_TRUE(noop) << noop.status().message();
  EXPECT_EQ((*noop)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<float>((*noop)[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Default axes on an old opset: everything.
  auto mean = reduce("ReduceMean", x23(), {}, false, 13);
  ASSERT_TRUE(mean);
  EXPECT_EQ(mean->shape(), Shape{});
  EXPECT_EQ(values_of<float>(*mean), (std::vector<float>{3.5f}));
}

TEST(Reduce, SeparatedAxesReduceInPasses) {
  // x[i][j][k] = 4i + 2j + k; axes {0, 2}: out[j] = sum_{i,k} x = {0+1+4+5, 2+3+6+7}.
  std::vector<float> v(8);
  std::iota(v.begin(), v.end(), 0.0f);
  Tensor x = f32({2, 2, 2}, v);
  auto sum = reduce("ReduceSum", x, {0, 2}, true);
  ASSERT_TRUE(sum) << sum.status().message();
  EXPECT_EQ(sum->shape(), (Shape{1, 2, 1}));
  EXPECT_EQ(values_of<float>(*sum), (std::vector<float>{10, 18}));
  auto mean = reduce("ReduceMean", x, {0, 2}, false);
  ASSERT_TRUE(mean);
  EXPECT_EQ(values_of<float>(*mean), (std::vector<float>{2.5f, 4.5f}));
  auto lse = reduce("ReduceLogSumExp", x, {-3, -1}, false);
  ASSERT_TRUE(lse);
  const auto lse_of = [](std::vector<float> xs) {
    double s = 0;
    for (float f : xs) s += std::exp(static_cast<double>(f));
    return static_cast<float>(std::log(s));
  };
  expect_near_all(values_of<float>(*lse), {lse_of({0, 1, 4, 5}), lse_of({2, 3, 6, 7})}, 1e-6f);
  // Three separated runs: [2, 3, 2, 3, 2] over axes {0, 2, 4}.
  std::vector<float> w = random_floats(72, 7);
  auto three = reduce("ReduceSumSquare", f32({2, 3, 2, 3, 2}, w), {0, 2, 4}, false);
  ASSERT_TRUE(three) << three.status().message();
  // Kept axes b and d: out[b][d] = sum over a, c, e of x^2.
  std::vector<double> ref(9, 0.0);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c)
        for (int d = 0; d < 3; ++d)
          for (int e = 0; e < 2; ++e) {
            const double f = w[static_cast<size_t>((((a * 3 + b) * 2 + c) * 3 + d) * 2 + e)];
            ref[static_cast<size_t>(b * 3 + d)] += f * f;
          }
  EXPECT_EQ(three->shape(), (Shape{3, 3}));
  expect_near_all(values_of<float>(*three), std::vector<float>(ref.begin(), ref.end()), 1e-5f);
}

// Large shapes through the row path (inner axis) and the tiled path (outer axes), with threads,
// against a double reference.
TEST(Reduce, LargeInnerAndOuterAxesMatchReference) {
  const int64_t a = 7, b = 301, c = 133;
  std::vector<float> v = random_floats(a * b * c, 11);
  Tensor x = f32({a, b, c}, v);
  ThreadPool pool(4);
  for (int axis = 0; axis < 3; ++axis) {
    OpCall call("ReduceSum", 13);
    call.attr_int("keepdims", 0);
    auto out = call.run({x, i64({axis})}, &pool);
    ASSERT_TRUE(out) << out.status().message();
    std::vector<double> ref(static_cast<size_t>(a * b * c / (axis == 0 ? a : axis == 1 ? b : c)), 0.0);
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        for (int64_t k = 0; k < c; ++k) {
          const int64_t o = axis == 0 ? j * c + k : axis == 1 ? i * c + k : i * b + j;
          ref[static_cast<size_t>(o)] += v[static_cast<size_t>((i * b + j) * c + k)];
        }
    expect_near_all(values_of<float>((*out)[0]), std::vector<float>(ref.begin(), ref.end()), 1e-4f);
  }
}

// LogSumExp over an outer axis with more columns than one tile, and over the inner axis.
TEST(Reduce, LogSumExpLargeMatchesReference) {
  const int64_t rows = 50, cols = 150;
  std::vector<float> v = random_floats(rows * cols, 17, -20.0f, 20.0f);
  for (int axis : {0, 1}) {
    auto out = reduce("ReduceLogSumExp", f32({rows, cols}, v), {axis}, false);
    ASSERT_TRUE(out) << out.status().message();
    const int64_t lanes = axis == 0 ? cols : rows, len = axis == 0 ? rows : cols;
    std::vector<float> want;
    for (int64_t lane = 0; lane < lanes; ++lane) {
      double s = 0;
      for (int64_t r = 0; r < len; ++r) s += std::exp(static_cast<double>(v[static_cast<size_t>(axis == 0 ? r * cols + lane : lane * cols + r)]));
      want.push_back(static_cast<float>(std::log(s)));
    }
    expect_near_all(values_of<float>(*out), want, 1e-6f);
  }
}

TEST(Reduce, SixteenBitAndF64Dtypes) {
  auto f16 = reduce("ReduceMean", cast_tensor<Float16>({2, 3}, {1, 2, 3, 4, 5, 6}), {1}, false);
  ASSERT_TRUE(f16) << f16.status().message();
  EXPECT_EQ(f16->dtype(), DType::kF16);
  EXPECT_EQ(to_floats<Float16>(*f16), (std::vector<float>{2, 5}));
  auto bf16 = reduce("ReduceMax", cast_tensor<BFloat16>({2, 3}, {1, 9, 3, 4, 5, -6}), {0}, false);
  ASSERT_TRUE(bf16);
  EXPECT_EQ(to_floats<BFloat16>(*bf16), (std::vector<float>{4, 9, 3}));
  auto f64 = reduce("ReduceL2", Tensor::from_vector<double>({2}, std::vector<double>{3, 4}), {0}, false);
  ASSERT_TRUE(f64);
  EXPECT_EQ(values_of<double>(*f64), (std::vector<double>{5}));
}

TEST(Reduce, IntegerDtypes) {
  auto sum = reduce("ReduceSum", Tensor::from_vector<int32_t>({2, 2}, std::vector<int32_t>{1, -2, 30, 4}), {0}, false);
  ASSERT_TRUE(sum) << sum.status().message();
  EXPECT_EQ(values_of<int32_t>(*sum), (std::vector<int32_t>{31, 2}));
  auto mx = reduce("ReduceMax", Tensor::from_vector<int64_t>({3}, std::vector<int64_t>{-7, 5, 2}), {0}, false);
  ASSERT_TRUE(mx);
  EXPECT_EQ(values_of<int64_t>(*mx), (std::vector<int64_t>{5}));
  auto prod = reduce("ReduceProd", Tensor::from_vector<int64_t>({3}, std::vector<int64_t>{-7, 5, 2}), {0}, false);
  ASSERT_TRUE(prod);
  EXPECT_EQ(values_of<int64_t>(*prod), (std::vector<int64_t>{-70}));
}

TEST(Reduce, EmptyReductionGivesIdentity) {
  Tensor x = f32({0, 3}, {});
  auto sum = reduce("ReduceSum", x, {0}, false);
  ASSERT_TRUE(sum) << sum.status().message();
  EXPECT_EQ(values_of<float>(*sum), (std::vector<float>{0, 0, 0}));
  auto mx = reduce("ReduceMax", x, {0}, false, 13);
  ASSERT_TRUE(mx);
  EXPECT_EQ(values_of<float>(*mx)[0], -std::numeric_limits<float>::infinity());
}

TEST(Reduce, BadInputsAreErrors) {
  EXPECT_FALSE(reduce("ReduceSum", x23(), {2}));
  EXPECT_FALSE(reduce("ReduceMean", x23(), {-3}));
  EXPECT_FALSE(reduce("ReduceMax", x23(), {1, -1}));  // repeated
  // L2 has no integer kernel.
  EXPECT_FALSE(reduce("ReduceL2", Tensor::from_vector<int32_t>({2}, std::vector<int32_t>{1, 2}), {0}));
  auto float_axes = OpCall("ReduceSum", 13).run({x23(), f32({1}, {0})});
  EXPECT_FALSE(float_axes);
}

// ---------------------------------------------------------------------------------------------

Result<std::vector<int64_t>> arg(const std::string& op, const Tensor& x, int64_t axis, bool keepdims, bool last,
                                 Shape* shape = nullptr) {
  OpCall call(op, 13);
  call.attr_int("axis", axis).attr_int("keepdims", keepdims ? 1 : 0).attr_int("select_last_index", last ? 1 : 0);
  auto out = call.run({x});
  if (!out) return out.status();
  if (shape != nullptr) *shape = (*out)[0].shape();
  return values_of<int64_t>((*out)[0]);
}

TEST(ArgReduce, MaxAndMinWithTies) {
  Tensor x = f32({2, 3}, {2, 7, 7, 5, 1, 1});
  Shape shape;
  auto first = arg("ArgMax", x, 1, true, false, &shape);
  ASSERT_TRUE(first) << first.status().message();
  EXPECT_EQ(shape, (Shape{2, 1}));
  EXPECT_EQ(*first, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(*arg("ArgMax", x, -1, false, true, &shape), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(shape, (Shape{2}));
  EXPECT_EQ(*arg("ArgMin", x, 1, false, false), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(*arg("ArgMin", x, 1, false, true), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(*arg("ArgMax", x, 0, false, false), (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(*arg("ArgMin", x, 0, false, false), (std::vector<int64_t>{0, 1, 1}));
}

TEST(ArgReduce, DtypesAndOuterAxisOverManyColumns) {
  EXPECT_EQ(*arg("ArgMax", cast_tensor<Float16>({4}, {1, 3, -2, 3}), 0, false, false), (std::vector<int64_t>{1}));
  EXPECT_EQ(*arg("ArgMin", cast_tensor<BFloat16>({4}, {1, 3, -2, 3}), 0, false, false), (std::vector<int64_t>{2}));
  EXPECT_EQ(*arg("ArgMax", Tensor::from_vector<int32_t>({3}, std::vector<int32_t>{4, 9, 9}), 0, false, true),
            (std::vector<int64_t>{2}));
  const int64_t rows = 5, cols = 150;
  std::vector<float> v = random_floats(rows * cols, 3);
  auto got = arg("ArgMax", f32({rows, cols}, v), 0, false, false);
  ASSERT_TRUE(got);
  for (int64_t c = 0; c < cols; ++c) {
    int64_t best = 0;
    for (int64_t r = 1; r < rows; ++r) if (v[static_cast<size_t>(r * cols + c)] > v[static_cast<size_t>(best * cols + c)]) best = r;
    EXPECT_EQ((*got)[static_cast<size_t>(c)], best) << "column " << c;
  }
}

TEST(ArgReduce, VocabularyRowsWithTiedMaxima) {
  const int64_t vocab = 152064;
  std::vector<float> v = random_floats(2 * vocab, 19);
  v[5000] = v[90000] = 7.0f;                                                  // row 0: tie
  v[static_cast<size_t>(vocab + 3)] = v[static_cast<size_t>(2 * vocab - 1)] = -9.0f;  // row 1: min tie
  const Tensor x = f32({2, vocab}, v);
  EXPECT_EQ((*arg("ArgMax", x, 1, false, false))[0], 5000);
  EXPECT_EQ((*arg("ArgMax", x, 1, false, true))[0], 90000);
  EXPECT_EQ((*arg("ArgMin", x, -1, false, false))[1], 3);
  EXPECT_EQ((*arg("ArgMin", x, -1, false, true))[1], vocab - 1);
}

TEST(ArgReduce, BadAxisIsError) { EXPECT_FALSE(arg("ArgMax", x23(), 2, true, false)); }

// ---------------------------------------------------------------------------------------------

Result<std::vector<Tensor>> topk(const Tensor& x, int64_t k, int64_t axis, bool largest, int opset = 11) {
  OpCall call("TopK", opset, "", 2);
  call.attr_int("axis", axis).attr_int("largest", largest ? 1 : 0);
  if (opset < 10) return call.attr_int("k", k).run({x});
  return call.run({x, i64({k})});
}

TEST(TopK, LargestAndSmallestWithTiesLowerIndexFirst) {
  Tensor x = f32({2, 4}, {3, 1, 3, 2, 0, 5, 5, 5});
  auto big = topk(x, 2, -1, true);
  ASSERT_TRUE(big) << big.status().message();
  EXPECT_EQ((*big)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values_of<float>((*big)[0]), (std::vector<float>{3, 3, 5, 5}));
  EXPECT_EQ(values_of<int64_t>((*big)[1]), (std::vector<int64_t>{0, 2, 1, 2}));
  auto small = topk(x, 3, 1, false);
  ASSERT_TRUE(small);
  EXPECT_EQ(values_of<float>((*small)[0]), (std::vector<float>{1, 2, 3, 0, 5, 5}));
  EXPECT_EQ(values_of<int64_t>((*small)[1]), (std::vector<int64_t>{1, 3, 0, 0, 1, 2}));
}

TEST(TopK, OuterAxisAndAttributeK) {
  // Along axis 0 of [[1, 9], [4, 2], [3, 8]] with k as an opset-1 attribute.
  auto out = topk(f32({3, 2}, {1, 9, 4, 2, 3, 8}), 2, 0, true, 1);
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{4, 9, 3, 8}));
  EXPECT_EQ(values_of<int64_t>((*out)[1]), (std::vector<int64_t>{1, 0, 2, 2}));
}

TEST(TopK, VocabularyRowMatchesSort) {
  const int64_t vocab = 152064, k = 50;
  std::vector<float> v = random_floats(vocab, 5);
  v[1000] = v[2000] = 10.0f;  // a tie at the top: index 1000 first
  auto out = topk(f32({1, vocab}, v), k, -1, true);
  ASSERT_TRUE(out) << out.status().message();
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[static_cast<size_t>(a)] > v[static_cast<size_t>(b)]; });
  order.resize(static_cast<size_t>(k));
  EXPECT_EQ(values_of<int64_t>((*out)[1]), order);
  EXPECT_EQ(values_of<int64_t>((*out)[1])[0], 1000);
}

TEST(TopK, DtypesAndErrors) {
  auto h = topk(cast_tensor<Float16>({3}, {0.5f, -1, 2}), 1, 0, true);
  ASSERT_TRUE(h);
  EXPECT_EQ(to_floats<Float16>((*h)[0]), (std::vector<float>{2}));
  auto i = topk(Tensor::from_vector<int64_t>({3}, std::vector<int64_t>{5, -1, 7}), 2, 0, false);
  ASSERT_TRUE(i);
  EXPECT_EQ(values_of<int64_t>((*i)[0]), (std::vector<int64_t>{-1, 5}));
  EXPECT_FALSE(topk(x23(), 4, 1, true));   // K > dim
  EXPECT_FALSE(topk(x23(), -1, 1, true));  // K < 0
  EXPECT_FALSE(topk(x23(), 1, 2, true));   // axis
}

// ---------------------------------------------------------------------------------------------

Result<Tensor> cumsum(const Tensor& x, int64_t axis, bool exclusive, bool reverse) {
  OpCall call("CumSum", 14);
  call.attr_int("exclusive", exclusive ? 1 : 0).attr_int("reverse", reverse ? 1 : 0);
  auto out = call.run({x, Tensor::from_vector<int32_t>(Shape{}, std::vector<int32_t>{static_cast<int32_t>(axis)})});
  if (!out) return out.status();
  return (*out)[0];
}

TEST(CumSum, ExclusiveAndReverse) {
  Tensor x = f32({5}, {1, 2, 3, 4, 5});
  EXPECT_EQ(values_of<float>(*cumsum(x, 0, false, false)), (std::vector<float>{1, 3, 6, 10, 15}));
  EXPECT_EQ(values_of<float>(*cumsum(x, 0, true, false)), (std::vector<float>{0, 1, 3, 6, 10}));
  EXPECT_EQ(values_of<float>(*cumsum(x, 0, false, true)), (std::vector<float>{15, 14, 12, 9, 5}));
  EXPECT_EQ(values_of<float>(*cumsum(x, 0, true, true)), (std::vector<float>{14, 12, 9, 5, 0}));
}

TEST(CumSum, AxesAndDtypes) {
  EXPECT_EQ(values_of<float>(*cumsum(x23(), 0, false, false)), (std::vector<float>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(values_of<float>(*cumsum(x23(), -1, false, false)), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  auto i = cumsum(Tensor::from_vector<int32_t>({3}, std::vector<int32_t>{1, -2, 7}), 0, false, false);
  ASSERT_TRUE(i);
  EXPECT_EQ(values_of<int32_t>(*i), (std::vector<int32_t>{1, -1, 6}));
  auto h = cumsum(cast_tensor<BFloat16>({3}, {1, 2, 3}), 0, false, true);
  ASSERT_TRUE(h);
  EXPECT_EQ(to_floats<BFloat16>(*h), (std::vector<float>{6, 5, 3}));
  auto d = cumsum(Tensor::from_vector<double>({2}, std::vector<double>{0.25, 0.5}), 0, false, false);
  ASSERT_TRUE(d);
  EXPECT_EQ(values_of<double>(*d), (std::vector<double>{0.25, 0.75}));
  EXPECT_FALSE(cumsum(x23(), 2, false, false));
}

}  // namespace
}  // namespace onnx_genai::testing
