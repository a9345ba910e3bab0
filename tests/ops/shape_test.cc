// Shape family: views (Reshape, Squeeze, Unsqueeze, Flatten, Identity), Shape, Size, Expand, Tile.
// Expected values are worked out by hand from the ONNX spec.
#include <gtest/gtest.h>

#include "ops/data_test_util.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

TEST(Reshape, InfersMinusOneAndCopiesZero) {
  Tensor x = iota_tensor<float>(Shape{2, 3, 4});
  auto out = OpCall("Reshape", 14).run({x, i64s({0, -1, 2})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 6, 2}));
  EXPECT_EQ((*out)[0].raw(), x.raw());  // a view: no copy
}

TEST(Reshape, AllowZeroKeepsZeroDims) {
  Tensor x = Tensor::from_vector<float>({0, 3}, std::vector<float>{});
  auto out = OpCall("Reshape", 14).attr_int("allowzero", 1).run({x, i64s({3, 0})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 0}));
}

TEST(Reshape, SizeMismatchFails) {
  Tensor x = iota_tensor<float>(Shape{2, 3});
  auto out = OpCall("Reshape", 14).run({x, i64s({4, 2})});
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find("Reshape"), std::string::npos) << out.status().message();
  EXPECT_FALSE(OpCall("Reshape", 14).run({x, i64s({-1, -1})}));
  EXPECT_FALSE(OpCall("Reshape", 14).run({x, i64s({4, -1})}));
}

TEST(Squeeze, AxesInputAndAttribute) {
  Tensor x = iota_tensor<float>(Shape{1, 3, 1, 2});
  auto all = OpCall("Squeeze", 13).run({x});
  ASSERT_TRUE(all) << all.status().message();
  EXPECT_EQ((*all)[0].shape(), (Shape{3, 2}));
  auto neg = OpCall("Squeeze", 13).run({x, i64s({-2})});
  ASSERT_TRUE(neg) << neg.status().message();
  EXPECT_EQ((*neg)[0].shape(), (Shape{1, 3, 2}));
  auto attr = OpCall("Squeeze", 11).attr_ints("axes", {0}).run({x});
  ASSERT_TRUE(attr) << attr.status().message();
  EXPECT_EQ((*attr)[0].shape(), (Shape{3, 1, 2}));
  EXPECT_FALSE(OpCall("Squeeze", 13).run({x, i64s({1})}));  // dim of size 3
  EXPECT_FALSE(OpCall("Squeeze", 13).run({x, i64s({4})}));  // out of range
}

TEST(Unsqueeze, UnsortedAndNegativeAxes) {
  Tensor x = iota_tensor<float>(Shape{3, 4});
  auto out = OpCall("Unsqueeze", 13).run({x, i64s({3, -4})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 3, 4, 1}));
  auto attr = OpCall("Unsqueeze", 11).attr_ints("axes", {1}).run({x});
  ASSERT_TRUE(attr) << attr.status().message();
  EXPECT_EQ((*attr)[0].shape(), (Shape{3, 1, 4}));
  EXPECT_FALSE(OpCall("Unsqueeze", 13).run({x, i64s({4})}));
  EXPECT_FALSE(OpCall("Unsqueeze", 13).run({x, i64s({1, 1})}));
}

TEST(Flatten, AxisRangeIncludingRank) {
  Tensor x = iota_tensor<float>(Shape{2, 3, 4});
  auto out = OpCall("Flatten", 13).attr_int("axis", -1).run({x});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{6, 4}));
  auto end = OpCall("Flatten", 13).attr_int("axis", 3).run({x});
  ASSERT_TRUE(end) << end.status().message();
  EXPECT_EQ((*end)[0].shape(), (Shape{24, 1}));
  EXPECT_FALSE(OpCall("Flatten", 13).attr_int("axis", 4).run({x}));
}

TEST(Shape, StartEndClamp) {
  Tensor x = iota_tensor<float>(Shape{3, 4, 5});
  auto full = OpCall("Shape", 15).run({x});
  ASSERT_TRUE(full) << full.status().message();
  EXPECT_EQ(values_of<int64_t>((*full)[0]), (std::vector<int64_t>{3, 4, 5}));
  auto part = OpCall("Shape", 15).attr_int("start", -2).attr_int("end", 10).run({x});
  ASSERT_TRUE(part) << part.status().message();
  EXPECT_EQ(values_of<int64_t>((*part)[0]), (std::vector<int64_t>{4, 5}));
  auto empty = OpCall("Shape", 15).attr_int("start", 2).attr_int("end", 1).run({x});
  ASSERT_TRUE(empty) << empty.status().message();
  EXPECT_EQ((*empty)[0].numel(), 0);
  auto size = OpCall("Size", 13).run({x});
  ASSERT_TRUE(size) << size.status().message();
  EXPECT_EQ((*size)[0].data<int64_t>()[0], 60);
}

TEST(Expand, BroadcastsRowsAndColumns) {
  Tensor x = Tensor::from_vector<float>({3, 1}, {1, 2, 3});
  auto out = OpCall("Expand", 13).run({x, i64s({2, 1, 2})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  Tensor row = Tensor::from_vector<int8_t>({3}, {7, 8, 9});
  auto rows = OpCall("Expand", 13).run({row, i64s({2, 1})});
  ASSERT_TRUE(rows) << rows.status().message();
  EXPECT_EQ(values_of<int8_t>((*rows)[0]), (std::vector<int8_t>{7, 8, 9, 7, 8, 9}));
  EXPECT_FALSE(OpCall("Expand", 13).run({x, i64s({2, 4})}));  // 3 vs 2
}

TEST(Tile, RepeatsEachDim) {
  Tensor x = Tensor::from_vector<int64_t>({2, 2}, {0, 1, 2, 3});
  auto out = OpCall("Tile", 13).run({x, i64s({2, 3})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{4, 6}));
  EXPECT_EQ(values_of<int64_t>((*out)[0]),
            (std::vector<int64_t>{0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3}));
  auto zero = OpCall("Tile", 13).run({x, i64s({0, 3})});
  ASSERT_TRUE(zero) << zero.status().message();
  EXPECT_EQ((*zero)[0].shape(), (Shape{0, 6}));
  EXPECT_FALSE(OpCall("Tile", 13).run({x, i64s({2})}));
}

}  // namespace
}  // namespace onnx_genai::testing
