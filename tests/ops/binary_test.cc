// Broadcasting elementwise family: arithmetic, Pow, Mod, variadic Max/Min/Sum/Mean, comparisons,
// logical ops, BitShift and Where. Expected values are worked out by hand from the ONNX spec
// (or by an index formula written out in the test); broadcasting cases cover each inner-stride
// pair (1,1), (1,0), (0,1), outer-dim broadcasts, threaded runs whose chunks split rows, and
// the f16 / bf16 / f64 paths.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

template <typename T>
Tensor make(Shape shape, std::vector<T> v) {
  return Tensor::from_vector<T>(std::move(shape), v);
}

// bool tensors hold one byte per element (std::vector<bool> has no contiguous storage).
Tensor bools(Shape shape, std::vector<uint8_t> v) {
  Tensor t = Tensor::allocate(DType::kBool, std::move(shape)).value();
  std::copy(v.begin(), v.end(), t.data<uint8_t>());
  return t;
}

std::vector<float> ramp(int64_t n, float scale, float offset = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * scale + offset;
  return v;
}

// Takes the call by forwarding reference: OpCall(...) temporaries and attr_*() chains alike.
template <typename Call>
Tensor run1(Call&& call, const std::vector<Tensor>& inputs, ThreadPool* pool = nullptr) {
  auto out = call.run(inputs, pool);
  EXPECT_TRUE(out) << out.status().message();
  return out ? (*out)[0] : Tensor();
}

TEST(Add, SameShapeOddLengthCoversSimdTail) {
  // 37 = 2 * 16 + 5: AVX-512 body, AVX2 body and a scalar tail.
  Tensor out = run1(OpCall("Add", 14), {make<float>({37}, ramp(37, 1)), make<float>({37}, ramp(37, 0.5f))});
  EXPECT_EQ(out.shape(), Shape{37});
  EXPECT_EQ(values_of<float>(out), ramp(37, 1.5f));
}

TEST(Add, BroadcastsTrailingVectorAndScalar) {
  // [2,3,4] + [4]: rows of 4 with the second input's stride 0 between rows.
  Tensor out = run1(OpCall("Add", 14), {make<float>({2, 3, 4}, ramp(24, 1)), make<float>({4}, {100, 200, 300, 400})});
  ASSERT_EQ(out.shape(), (Shape{2, 3, 4}));
  for (int i = 0; i < 24; ++i) EXPECT_EQ(out.data<float>()[i], static_cast<float>(i + 100 * (i % 4 + 1))) << i;
  // Scalar on either side: inner strides (1,0) and (0,1).
  EXPECT_EQ(values_of<float>(run1(OpCall("Sub", 14), {make<float>({3}, {1, 2, 3}), make<float>({}, {10})})),
            (std::vector<float>{-9, -8, -7}));
  EXPECT_EQ(values_of<float>(run1(OpCall("Sub", 14), {make<float>({}, {10}), make<float>({3}, {1, 2, 3})})),
            (std::vector<float>{9, 8, 7}));
}

TEST(Mul, BroadcastsBothInputsAcrossDifferentAxes) {
  // [2,1,3] * [4,1] -> [2,4,3]: a[i,0,k] * b[j,0].
  Tensor out = run1(OpCall("Mul", 14), {make<float>({2, 1, 3}, {1, 2, 3, 4, 5, 6}), make<float>({4, 1}, {1, 10, 100, 1000})});
  ASSERT_EQ(out.shape(), (Shape{2, 4, 3}));
  const float a[2][3] = {{1, 2, 3}, {4, 5, 6}};
  const float b[4] = {1, 10, 100, 1000};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(out.data<float>()[(i * 4 + j) * 3 + k], a[i][k] * b[j]);
}

TEST(Mul, ThreadedBroadcastSplitsRows) {
  ThreadPool pool(4);
  // [257,129] * [257,1]: 129-element rows, chunks of the thread split end mid-row.
  const int64_t rows = 257, cols = 129;
  Tensor a = make<float>({rows, cols}, ramp(rows * cols, 1));
  Tensor b = make<float>({rows, 1}, ramp(rows, 1, 1));
  Tensor out = run1(OpCall("Mul", 14), {a, b}, &pool);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(out.data<float>()[r * cols + c], static_cast<float>(r * cols + c) * static_cast<float>(r + 1)) << r << "," << c;
    }
  }
}

TEST(Add, HalfBfloatAndDouble) {
  Tensor h = run1(OpCall("Add", 14), {make<Float16>({3}, {Float16(1.5f), Float16(-2), Float16(1024)}), make<Float16>({1}, {Float16(0.25f)})});
  EXPECT_EQ(h.dtype(), DType::kF16);
  EXPECT_EQ(to_floats<Float16>(h), (std::vector<float>{1.75f, -1.75f, 1024}));  // 1024.25 rounds to 1024 in f16
  Tensor bf = run1(OpCall("Mul", 14), {make<BFloat16>({2}, {BFloat16(3), BFloat16(-0.5f)}), make<BFloat16>({2}, {BFloat16(2), BFloat16(8)})});
  EXPECT_EQ(bf.dtype(), DType::kBF16);
  EXPECT_EQ(to_floats<BFloat16>(bf), (std::vector<float>{6, -4}));
  Tensor d = run1(OpCall("Div", 14), {make<double>({2}, {1, 2}), make<double>({}, {3})});
  EXPECT_EQ(values_of<double>(d), (std::vector<double>{1.0 / 3.0, 2.0 / 3.0}));
}

TEST(Div, IntegerTruncatesTowardZeroAndNeverTraps) {
  Tensor q = run1(OpCall("Div", 14), {make<int32_t>({6}, {7, -7, 7, -7, 5, std::numeric_limits<int32_t>::min()}),
                                      make<int32_t>({6}, {2, 2, -2, -2, 0, -1})});
  EXPECT_EQ(values_of<int32_t>(q), (std::vector<int32_t>{3, -3, -3, 3, 0, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("Div", 14), {make<uint8_t>({2}, {200, 9}), make<uint8_t>({2}, {7, 3})})),
            (std::vector<uint8_t>{28, 3}));
}

TEST(Add, IntegersWrap) {
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("Add", 14), {make<uint8_t>({2}, {250, 1}), make<uint8_t>({2}, {10, 2})})),
            (std::vector<uint8_t>{4, 3}));
}

TEST(Mod, SignFollowsDivisorOrDividendWithFmod) {
  // ONNX spec example: fmod=0 takes the divisor's sign.
  Tensor m = run1(OpCall("Mod", 13), {make<int64_t>({6}, {-4, 7, 5, 4, -7, 8}), make<int64_t>({6}, {2, -3, 8, -2, 3, 5})});
  EXPECT_EQ(values_of<int64_t>(m), (std::vector<int64_t>{0, -2, 5, 0, 2, 3}));
  Tensor f = run1(OpCall("Mod", 13).attr_int("fmod", 1),
                  {make<int64_t>({6}, {-4, 7, 5, 4, -7, 8}), make<int64_t>({6}, {2, -3, 8, -2, 3, 5})});
  EXPECT_EQ(values_of<int64_t>(f), (std::vector<int64_t>{0, 1, 5, 0, -1, 3}));
  Tensor ff = run1(OpCall("Mod", 13).attr_int("fmod", 1), {make<float>({2}, {5.5f, -5.5f}), make<float>({1}, {2})});
  EXPECT_EQ(values_of<float>(ff), (std::vector<float>{1.5f, -1.5f}));
  // fmod=0 is for integers only.
  auto bad = OpCall("Mod", 13).run({make<float>({1}, {1}), make<float>({1}, {2})});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("fmod"), std::string::npos) << bad.status().message();
}

TEST(Pow, MixedTypesAndIntegerPower) {
  EXPECT_EQ(values_of<float>(run1(OpCall("Pow", 15), {make<float>({3}, {2, -3, 4}), make<int64_t>({3}, {3, 2, -1})})),
            (std::vector<float>{8, 9, 0.25f}));
  EXPECT_EQ(values_of<int32_t>(run1(OpCall("Pow", 15), {make<int32_t>({3}, {2, 3, -2}), make<int32_t>({3}, {10, 3, 3})})),
            (std::vector<int32_t>{1024, 27, -8}));
  // 3^39 needs more than a double's 53 bits.
  EXPECT_EQ(values_of<int64_t>(run1(OpCall("Pow", 15), {make<int64_t>({1}, {3}), make<int64_t>({1}, {39})})),
            (std::vector<int64_t>{4052555153018976267LL}));
  EXPECT_EQ(values_of<int64_t>(run1(OpCall("Pow", 15), {make<int64_t>({2}, {2, 9}), make<float>({2}, {3, 0.5f})})),
            (std::vector<int64_t>{8, 3}));
}

TEST(Pow, ConstantSquareMatchesPow) {
  // A known scalar exponent of 2 takes the x * x path.
  Tensor out = run1(OpCall("Pow", 15), {make<float>({2, 2}, {-3, 0.5f, 1e-3f, 7}), make<float>({}, {2})});
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{9, 0.25f, 1e-3f * 1e-3f, 49}));
  Tensor half = run1(OpCall("Pow", 15), {make<Float16>({1}, {Float16(-3)}), make<int32_t>({}, {2})});
  EXPECT_EQ(to_floats<Float16>(half), (std::vector<float>{9}));
}

TEST(MaxMin, VariadicBroadcastAndNaN) {
  // Max of [3], [2,3] and a scalar.
  Tensor mx = run1(OpCall("Max", 13), {make<float>({3}, {1, 5, -2}), make<float>({2, 3}, {0, 6, -3, 4, 4, 4}),
                                       make<float>({}, {2})});
  ASSERT_EQ(mx.shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<float>(mx), (std::vector<float>{2, 6, 2, 4, 5, 4}));
  Tensor mn = run1(OpCall("Min", 13), {make<int8_t>({3}, {1, -5, 7}), make<int8_t>({3}, {2, -6, 7})});
  EXPECT_EQ(values_of<int8_t>(mn), (std::vector<int8_t>{1, -6, 7}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor mxn = run1(OpCall("Max", 13), {make<float>({2}, {nan, 1}), make<float>({2}, {0, nan})});
  EXPECT_TRUE(std::isnan(mxn.data<float>()[0]));
  EXPECT_TRUE(std::isnan(mxn.data<float>()[1]));
  // One input: a copy.
  EXPECT_EQ(values_of<float>(run1(OpCall("Min", 13), {make<float>({2}, {3, -1})})), (std::vector<float>{3, -1}));
}

TEST(SumMean, VariadicWithBroadcast) {
  Tensor s = run1(OpCall("Sum", 13), {make<float>({2, 2}, {1, 2, 3, 4}), make<float>({2}, {10, 20}), make<float>({2, 1}, {100, 200})});
  EXPECT_EQ(values_of<float>(s), (std::vector<float>{111, 122, 213, 224}));
  Tensor m = run1(OpCall("Mean", 13), {make<float>({3}, {3, 0, 2}), make<float>({3}, {1, 0, 3}), make<float>({3}, {2, 6, 1})});
  EXPECT_EQ(values_of<float>(m), (std::vector<float>{2, 2, 2}));
  Tensor mh = run1(OpCall("Mean", 13), {make<BFloat16>({2}, {BFloat16(1), BFloat16(4)}), make<BFloat16>({}, {BFloat16(3)})});
  EXPECT_EQ(to_floats<BFloat16>(mh), (std::vector<float>{2, 3.5f}));
  EXPECT_EQ(values_of<float>(run1(OpCall("Sum", 13), {make<float>({2}, {1, 2})})), (std::vector<float>{1, 2}));
}

TEST(Compare, BoolOutputWithBroadcast) {
  Tensor a = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = make<float>({3}, {2, 2, 7});
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("Less", 13), {a, b})), (std::vector<uint8_t>{1, 0, 1, 0, 0, 1}));
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("Greater", 13), {a, b})), (std::vector<uint8_t>{0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("LessOrEqual", 16), {a, b})), (std::vector<uint8_t>{1, 1, 1, 0, 0, 1}));
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("GreaterOrEqual", 16), {a, b})), (std::vector<uint8_t>{0, 1, 0, 1, 1, 0}));
  Tensor eq = run1(OpCall("Equal", 13), {make<int64_t>({3}, {5, -1, 7}), make<int64_t>({}, {7})});
  EXPECT_EQ(eq.dtype(), DType::kBool);
  EXPECT_EQ(values_of<uint8_t>(eq), (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("Equal", 13), {bools({2}, {1, 0}), bools({2}, {1, 1})})),
            (std::vector<uint8_t>{1, 0}));
  Tensor h = run1(OpCall("Less", 13), {make<Float16>({2}, {Float16(1), Float16(3)}), make<Float16>({1}, {Float16(2)})});
  EXPECT_EQ(values_of<uint8_t>(h), (std::vector<uint8_t>{1, 0}));
}

TEST(Logical, AndOrXorBroadcast) {
  Tensor a = bools({2, 2}, {1, 1, 0, 0});
  Tensor b = bools({2}, {1, 0});
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("And", 7), {a, b})), (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("Or", 7), {a, b})), (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("Xor", 7), {a, b})), (std::vector<uint8_t>{0, 1, 1, 0}));
}

TEST(BitShift, LeftRightAndOversizedShift) {
  Tensor x = make<uint8_t>({4}, {16, 4, 1, 255});
  Tensor s = make<uint8_t>({4}, {1, 2, 9, 4});
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("BitShift", 11).attr_string("direction", "LEFT"), {x, s})),
            (std::vector<uint8_t>{32, 16, 0, 240}));
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("BitShift", 11).attr_string("direction", "RIGHT"), {x, s})),
            (std::vector<uint8_t>{8, 1, 0, 15}));
  EXPECT_FALSE(OpCall("BitShift", 11).attr_string("direction", "UP").run({x, s}));
}

TEST(Where, BroadcastsAllThreeInputs) {
  // cond [2,1], x [1,3], y scalar -> [2,3].
  Tensor cond = bools({2, 1}, {1, 0});
  Tensor out = run1(OpCall("Where", 16), {cond, make<float>({1, 3}, {1, 2, 3}), make<float>({}, {-1})});
  ASSERT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{1, 2, 3, -1, -1, -1}));
  Tensor i = run1(OpCall("Where", 16), {bools({3}, {0, 1, 0}), make<int64_t>({3}, {1, 2, 3}), make<int64_t>({3}, {7, 8, 9})});
  EXPECT_EQ(values_of<int64_t>(i), (std::vector<int64_t>{7, 2, 9}));
  Tensor h = run1(OpCall("Where", 16), {bools({2}, {1, 0}), make<Float16>({2}, {Float16(0.5f), Float16(1)}),
                                        make<Float16>({2}, {Float16(3), Float16(4)})});
  EXPECT_EQ(to_floats<Float16>(h), (std::vector<float>{0.5f, 4}));
}

TEST(Broadcast, EmptyTensors) {
  Tensor out = run1(OpCall("Add", 14), {make<float>({0, 3}, {}), make<float>({3}, {1, 2, 3})});
  EXPECT_EQ(out.shape(), (Shape{0, 3}));
  Tensor w = run1(OpCall("Where", 16), {bools({0}, {}), make<float>({1}, {1}), make<float>({1}, {2})});
  EXPECT_EQ(w.shape(), (Shape{0}));
}

TEST(Broadcast, BadInputsFailWithNodeName) {
  auto shape = OpCall("Add", 14).run({make<float>({2, 3}, ramp(6, 1)), make<float>({4}, ramp(4, 1))});
  ASSERT_FALSE(shape);
  EXPECT_NE(shape.status().message().find("test_Add"), std::string::npos) << shape.status().message();
  EXPECT_NE(shape.status().message().find("broadcast"), std::string::npos) << shape.status().message();
  auto dtypes = OpCall("Mul", 14).run({make<float>({2}, {1, 2}), make<int64_t>({2}, {1, 2})});
  ASSERT_FALSE(dtypes);
  EXPECT_NE(dtypes.status().message().find("int64"), std::string::npos) << dtypes.status().message();
  EXPECT_FALSE(OpCall("Max", 13).run({make<float>({3}, {1, 2, 3}), make<float>({2}, {1, 2})}));
  EXPECT_FALSE(OpCall("Where", 16).run({make<float>({1}, {1}), make<float>({1}, {1}), make<float>({1}, {2})}));
  EXPECT_FALSE(OpCall("Add", 14).run({make<float>({1}, {1})}));
}

}  // namespace
}  // namespace onnx_genai::testing
