// Generator ops: Constant, ConstantOfShape, Range, EyeLike, OneHot. Expected values are worked
// out by hand from the ONNX spec.
#include <gtest/gtest.h>

#include "ops/data_test_util.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

TEST(Constant, ValueAttributes) {
  auto ints = OpCall("Constant", 13).attr_ints("value_ints", {4, -2}).run({});
  ASSERT_TRUE(ints) << ints.status().message();
  EXPECT_EQ((*ints)[0].dtype(), DType::kI64);
  EXPECT_EQ(values_of<int64_t>((*ints)[0]), (std::vector<int64_t>{4, -2}));
  auto f = OpCall("Constant", 13).attr_float("value_float", 2.5f).run({});
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ((*f)[0].shape(), Shape{});
  EXPECT_EQ((*f)[0].data<float>()[0], 2.5f);
  auto t = OpCall("Constant", 13).attr_tensor("value", Tensor::from_vector<int8_t>({2, 1}, {-1, 5})).run({});
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ((*t)[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(values_of<int8_t>((*t)[0]), (std::vector<int8_t>{-1, 5}));
  EXPECT_FALSE(OpCall("Constant", 13).run({}));
}

TEST(ConstantOfShape, ValueDtypeAndZeroDims) {
  auto out = OpCall("ConstantOfShape", 9).attr_tensor("value", Tensor::from_vector<int32_t>({1}, {7})).run({i64s({2, 3})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].dtype(), DType::kI32);
  EXPECT_EQ(values_of<int32_t>((*out)[0]), (std::vector<int32_t>(6, 7)));
  auto zeros = OpCall("ConstantOfShape", 9).run({i64s({3})});
  ASSERT_TRUE(zeros) << zeros.status().message();
  EXPECT_EQ((*zeros)[0].dtype(), DType::kF32);
  EXPECT_EQ(values_of<float>((*zeros)[0]), (std::vector<float>{0, 0, 0}));
  auto empty = OpCall("ConstantOfShape", 9).run({i64s({4, 0})});
  ASSERT_TRUE(empty) << empty.status().message();
  EXPECT_EQ((*empty)[0].shape(), (Shape{4, 0}));
  EXPECT_FALSE(OpCall("ConstantOfShape", 9).run({i64s({-1})}));
}

TEST(Range, FloatIntAndEmpty) {
  auto f = OpCall("Range", 11).run({Tensor::from_vector<float>(Shape{}, {1}), Tensor::from_vector<float>(Shape{}, {2}),
                                    Tensor::from_vector<float>(Shape{}, {0.3f})});
  ASSERT_TRUE(f) << f.status().message();
  expect_near_all(values_of<float>((*f)[0]), {1.0f, 1.3f, 1.6f, 1.9f}, 1e-6f);
  auto i = OpCall("Range", 11).run({Tensor::from_vector<int32_t>(Shape{}, {10}), Tensor::from_vector<int32_t>(Shape{}, {3}),
                                    Tensor::from_vector<int32_t>(Shape{}, {-3})});
  ASSERT_TRUE(i) << i.status().message();
  EXPECT_EQ(values_of<int32_t>((*i)[0]), (std::vector<int32_t>{10, 7, 4}));
  auto none = OpCall("Range", 11).run({i64_scalar(5), i64_scalar(1), i64_scalar(2)});
  ASSERT_TRUE(none) << none.status().message();
  EXPECT_EQ((*none)[0].shape(), (Shape{0}));
  EXPECT_FALSE(OpCall("Range", 11).run({i64_scalar(0), i64_scalar(1), i64_scalar(0)}));  // delta 0
}

TEST(EyeLike, OffDiagonalAndDtype) {
  Tensor x = iota_tensor<int32_t>(Shape{3, 4});
  auto up = OpCall("EyeLike", 9).attr_int("k", 1).attr_int("dtype", static_cast<int64_t>(DType::kF32)).run({x});
  ASSERT_TRUE(up) << up.status().message();
  EXPECT_EQ((*up)[0].dtype(), DType::kF32);
  EXPECT_EQ(values_of<float>((*up)[0]), (std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  auto down = OpCall("EyeLike", 9).attr_int("k", -2).run({x});
  ASSERT_TRUE(down) << down.status().message();
  EXPECT_EQ(values_of<int32_t>((*down)[0]), (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_FALSE(OpCall("EyeLike", 9).run({iota_tensor<float>(Shape{3})}));
}

TEST(OneHot, AxisNegativeAndOutOfRangeIndices) {
  Tensor idx = Tensor::from_vector<int64_t>({3}, {0, -1, 5});
  Tensor depth = Tensor::from_vector<float>(Shape{}, {3});
  Tensor values = Tensor::from_vector<int32_t>({2}, {-1, 8});
  auto last = OpCall("OneHot", 11).run({idx, depth, values});
  ASSERT_TRUE(last) << last.status().message();
  EXPECT_EQ((*last)[0].shape(), (Shape{3, 3}));
  EXPECT_EQ(values_of<int32_t>((*last)[0]), (std::vector<int32_t>{8, -1, -1, -1, -1, 8, -1, -1, -1}));
  auto first = OpCall("OneHot", 11).attr_int("axis", 0).run({idx, depth, values});
  ASSERT_TRUE(first) << first.status().message();
  EXPECT_EQ(values_of<int32_t>((*first)[0]), (std::vector<int32_t>{8, -1, -1, -1, -1, -1, -1, 8, -1}));
  EXPECT_FALSE(OpCall("OneHot", 11).attr_int("axis", 2).run({idx, depth, values}));
  EXPECT_FALSE(OpCall("OneHot", 11).run({idx, Tensor::from_vector<float>(Shape{}, {0}), values}));
}

}  // namespace
}  // namespace onnx_genai::testing
