// Layout ops: Transpose, Trilu, Pad, DepthToSpace, SpaceToDepth. Expected values are worked out
// by hand (DepthToSpace rows are the ONNX operator documentation's example); large transposes
// compare with plain index arithmetic.
#include <gtest/gtest.h>

#include "ops/data_test_util.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

TEST(Transpose, ThreeDimPermAndDefault) {
  Tensor x = iota_tensor<float>(Shape{2, 3, 2});  // x[a,b,c] = 6a + 2b + c
  auto out = OpCall("Transpose", 13).attr_ints("perm", {1, 2, 0}).run({x});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 2, 2}));  // y[b,c,a]
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}));
  auto rev = OpCall("Transpose", 13).run({x});
  ASSERT_TRUE(rev) << rev.status().message();
  EXPECT_EQ((*rev)[0].shape(), (Shape{2, 3, 2}));  // y[c,b,a]
  EXPECT_EQ(values_of<float>((*rev)[0]), (std::vector<float>{0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11}));
}

TEST(Transpose, BadPermFails) {
  Tensor x = iota_tensor<float>(Shape{2, 3});
  EXPECT_FALSE(OpCall("Transpose", 13).attr_ints("perm", {0, 0}).run({x}));
  EXPECT_FALSE(OpCall("Transpose", 13).attr_ints("perm", {0}).run({x}));
  EXPECT_FALSE(OpCall("Transpose", 13).attr_ints("perm", {0, 2}).run({x}));
}

// y = transpose(x, perm) checked element by element against index arithmetic.
template <typename T>
void check_transpose(const Shape& shape, const std::vector<int64_t>& perm, ThreadPool* pool) {
  Tensor x = iota_tensor<T>(shape);
  auto out = OpCall("Transpose", 13).attr_ints("perm", perm).run({x}, pool);
  ASSERT_TRUE(out) << out.status().message();
  const Tensor& y = (*out)[0];
  const std::vector<int64_t> in_strides = shape.strides();
  std::vector<int64_t> idx(perm.size(), 0);
  for (int64_t i = 0; i < y.numel(); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d) src += idx[d] * in_strides[static_cast<size_t>(perm[d])];
    ASSERT_EQ(y.data<T>()[i], static_cast<T>(src)) << "output element " << i;
    for (size_t d = perm.size(); d-- > 0;) {
      if (++idx[d] < y.shape()[static_cast<int>(d)]) break;
      idx[d] = 0;
    }
  }
}

TEST(Transpose, BlockedTailsAndRowCopiesOnThreadPool) {
  ThreadPool pool(4);
  check_transpose<float>(Shape{333, 517}, {1, 0}, &pool);             // blocked 2-D transpose
  check_transpose<int64_t>(Shape{3, 45, 37}, {0, 2, 1}, &pool);       // batched, 8-byte elements
  check_transpose<int16_t>(Shape{4, 5, 6, 70}, {2, 0, 1, 3}, &pool);  // last dim kept: row copies
  check_transpose<uint8_t>(Shape{2, 3, 5, 7}, {3, 1, 0, 2}, nullptr); // strided, 1-byte elements
  check_transpose<float>(Shape{1, 3, 1}, {2, 0, 1}, nullptr);
}

TEST(Transpose, EmptyTensor) {
  auto out = OpCall("Transpose", 13).attr_ints("perm", {1, 0}).run({Tensor::from_vector<float>({0, 4}, std::vector<float>{})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{4, 0}));
}

TEST(Trilu, BatchedUpperAndLowerWithK) {
  Tensor x = iota_tensor<int32_t>(Shape{2, 3, 4});
  auto up = OpCall("Trilu", 14).run({x, i64_scalar(1)});
  ASSERT_TRUE(up) << up.status().message();
  EXPECT_EQ(values_of<int32_t>((*up)[0]),
            (std::vector<int32_t>{0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11, 0, 13, 14, 15, 0, 0, 18, 19, 0, 0, 0, 23}));
  auto low = OpCall("Trilu", 14).attr_int("upper", 0).run({x, i64_scalar(-1)});
  ASSERT_TRUE(low) << low.status().message();
  EXPECT_EQ(values_of<int32_t>((*low)[0]),
            (std::vector<int32_t>{0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 20, 21, 0, 0}));
  auto diag = OpCall("Trilu", 14).attr_int("upper", 0).run({x});  // k = 0 keeps the diagonal
  ASSERT_TRUE(diag) << diag.status().message();
  EXPECT_EQ(values_of<int32_t>((*diag)[0])[5], 5);
  EXPECT_EQ(values_of<int32_t>((*diag)[0])[6], 0);
  auto huge = OpCall("Trilu", 14).run({x, i64_scalar(INT64_MIN)});  // keeps everything
  ASSERT_TRUE(huge) << huge.status().message();
  EXPECT_EQ(values_of<int32_t>((*huge)[0]), values_of<int32_t>(x));
  EXPECT_FALSE(OpCall("Trilu", 14).run({iota_tensor<float>(Shape{4})}));
}

TEST(Pad, ModesOnLastTwoDims) {
  Tensor x = Tensor::from_vector<float>({1, 3}, {1, 2, 3});
  Tensor pads = i64s({0, 2, 1, 1});  // dim0: +0/+1, dim1: +2/+1
  auto constant = OpCall("Pad", 13).run({x, pads, Tensor::from_vector<float>(Shape{}, {9})});
  ASSERT_TRUE(constant) << constant.status().message();
  EXPECT_EQ((*constant)[0].shape(), (Shape{2, 6}));
  EXPECT_EQ(values_of<float>((*constant)[0]), (std::vector<float>{9, 9, 1, 2, 3, 9, 9, 9, 9, 9, 9, 9}));
  auto reflect = OpCall("Pad", 13).attr_string("mode", "reflect").run({x, pads});
  ASSERT_TRUE(reflect) << reflect.status().message();
  EXPECT_EQ(values_of<float>((*reflect)[0]), (std::vector<float>{3, 2, 1, 2, 3, 2, 3, 2, 1, 2, 3, 2}));
  auto edge = OpCall("Pad", 13).attr_string("mode", "edge").run({x, pads});
  ASSERT_TRUE(edge) << edge.status().message();
  EXPECT_EQ(values_of<float>((*edge)[0]), (std::vector<float>{1, 1, 1, 2, 3, 3, 1, 1, 1, 2, 3, 3}));
  auto wrap = OpCall("Pad", 19).attr_string("mode", "wrap").run({x, pads});
  ASSERT_TRUE(wrap) << wrap.status().message();
  EXPECT_EQ(values_of<float>((*wrap)[0]), (std::vector<float>{2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1}));
}

TEST(Pad, CropAxesAndOldAttributes) {
  Tensor x = iota_tensor<int32_t>(Shape{2, 3});
  auto crop = OpCall("Pad", 13).run({x, i64s({0, -1, -1, 0})});
  ASSERT_TRUE(crop) << crop.status().message();
  EXPECT_EQ((*crop)[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(values_of<int32_t>((*crop)[0]), (std::vector<int32_t>{1, 2}));
  auto axes = OpCall("Pad", 18).run({x, i64s({1, 0}), Tensor(), i64s({-1})});  // only the last dim
  ASSERT_TRUE(axes) << axes.status().message();
  EXPECT_EQ(values_of<int32_t>((*axes)[0]), (std::vector<int32_t>{0, 0, 1, 2, 0, 3, 4, 5}));
  auto old = OpCall("Pad", 2).attr_ints("pads", {1, 0, 0, 0}).attr_float("value", 7).run({x});
  ASSERT_TRUE(old) << old.status().message();
  EXPECT_EQ(values_of<int32_t>((*old)[0]), (std::vector<int32_t>{7, 7, 7, 0, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(OpCall("Pad", 13).run({x, i64s({0, 0, -3, 0})}));   // crops below zero
  EXPECT_FALSE(OpCall("Pad", 13).run({x, i64s({0, 0, 0})}));       // odd count
  EXPECT_FALSE(OpCall("Pad", 13).attr_string("mode", "mirror").run({x, i64s({0, 0, 0, 0})}));
}

TEST(DepthToSpace, DcrAndCrdExamples) {
  Tensor x = iota_tensor<float>(Shape{1, 8, 2, 3});
  auto dcr = OpCall("DepthToSpace", 13).attr_int("blocksize", 2).run({x});
  ASSERT_TRUE(dcr) << dcr.status().message();
  EXPECT_EQ((*dcr)[0].shape(), (Shape{1, 2, 4, 6}));
  const std::vector<float> dcr_rows{0, 12, 1, 13, 2, 14, 24, 36, 25, 37, 26, 38};
  const std::vector<float> dcr_out = values_of<float>((*dcr)[0]);
  EXPECT_EQ(std::vector<float>(dcr_out.begin(), dcr_out.begin() + 12), dcr_rows);
  auto crd = OpCall("DepthToSpace", 13).attr_int("blocksize", 2).attr_string("mode", "CRD").run({x});
  ASSERT_TRUE(crd) << crd.status().message();
  const std::vector<float> crd_rows{0, 6, 1, 7, 2, 8, 12, 18, 13, 19, 14, 20};
  const std::vector<float> crd_out = values_of<float>((*crd)[0]);
  EXPECT_EQ(std::vector<float>(crd_out.begin(), crd_out.begin() + 12), crd_rows);
  // SpaceToDepth inverts DCR DepthToSpace.
  auto back = OpCall("SpaceToDepth", 13).attr_int("blocksize", 2).run({(*dcr)[0]});
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(values_of<float>((*back)[0]), values_of<float>(x));
  EXPECT_FALSE(OpCall("DepthToSpace", 13).attr_int("blocksize", 3).run({x}));
}

}  // namespace
}  // namespace onnx_genai::testing
