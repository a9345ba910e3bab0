// Concat and Split. Expected values are worked out by hand from the ONNX spec; the large cases
// compare with plain index arithmetic.
#include <gtest/gtest.h>

#include "ops/data_test_util.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

TEST(Concat, MiddleAxisWithEmptyInput) {
  Tensor a = iota_tensor<float>(Shape{2, 1, 2});
  Tensor empty = Tensor::from_vector<float>({2, 0, 2}, std::vector<float>{});
  Tensor b = Tensor::from_vector<float>({2, 2, 2}, {10, 11, 12, 13, 14, 15, 16, 17});
  auto out = OpCall("Concat", 13).attr_int("axis", -2).run({a, empty, b});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{0, 1, 10, 11, 12, 13, 2, 3, 14, 15, 16, 17}));
}

TEST(Concat, BoolAndMismatchErrors) {
  Tensor a = Tensor::from_vector<uint8_t>({2}, {1, 0});
  Tensor b = Tensor::from_vector<uint8_t>({1}, {1});
  auto out = OpCall("Concat", 13).attr_int("axis", 0).run({Tensor::view(DType::kBool, a.shape(), a.raw()),
                                                            Tensor::view(DType::kBool, b.shape(), b.raw())});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].dtype(), DType::kBool);
  EXPECT_EQ(values_of<uint8_t>((*out)[0]), (std::vector<uint8_t>{1, 0, 1}));
  Tensor x = iota_tensor<float>(Shape{2, 3});
  Tensor y = iota_tensor<float>(Shape{3, 2});
  EXPECT_FALSE(OpCall("Concat", 13).attr_int("axis", 0).run({x, y}));
  EXPECT_FALSE(OpCall("Concat", 13).attr_int("axis", 2).run({x, x}));
  EXPECT_FALSE(OpCall("Concat", 13).run({x, x}));  // axis is required
}

TEST(Concat, KvAppendOnThreadPoolMatchesIndexing) {
  // [batch*heads, seq, dim] past + [batch*heads, 1, dim] new, like a KV-cache append; rows of
  // 300 KiB exercise the split-row path.
  const int64_t rows = 6, seq = 1200, dim = 64;
  Tensor past = iota_tensor<float>(Shape{rows, seq, dim});
  Tensor next = iota_tensor<float>(Shape{rows, 1, dim});
  ThreadPool pool(4);
  auto out = OpCall("Concat", 13).attr_int("axis", 1).run({past, next}, &pool);
  ASSERT_TRUE(out) << out.status().message();
  const float* got = (*out)[0].data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t s = 0; s <= seq; ++s) {
      for (int64_t d = 0; d < dim; d += 7) {
        const float want = s < seq ? static_cast<float>((r * seq + s) * dim + d) : static_cast<float>(r * dim + d);
        ASSERT_EQ(got[(r * (seq + 1) + s) * dim + d], want) << r << "," << s << "," << d;
      }
    }
  }
}

TEST(Split, EqualSizesInputAndAttribute) {
  Tensor x = iota_tensor<int32_t>(Shape{2, 6});
  auto eq = OpCall("Split", 13, "", 3).attr_int("axis", 1).run({x});
  ASSERT_TRUE(eq) << eq.status().message();
  EXPECT_EQ(values_of<int32_t>((*eq)[0]), (std::vector<int32_t>{0, 1, 6, 7}));
  EXPECT_EQ(values_of<int32_t>((*eq)[2]), (std::vector<int32_t>{4, 5, 10, 11}));
  auto sized = OpCall("Split", 13, "", 2).attr_int("axis", -1).run({x, i64s({1, 5})});
  ASSERT_TRUE(sized) << sized.status().message();
  EXPECT_EQ((*sized)[1].shape(), (Shape{2, 5}));
  EXPECT_EQ(values_of<int32_t>((*sized)[1]), (std::vector<int32_t>{1, 2, 3, 4, 5, 7, 8, 9, 10, 11}));
  auto attr = OpCall("Split", 11, "", 2).attr_ints("split", {2, 0}).run({Tensor(x)});
  ASSERT_TRUE(attr) << attr.status().message();
  EXPECT_EQ((*attr)[0].shape(), (Shape{2, 6}));
  EXPECT_EQ((*attr)[1].shape(), (Shape{0, 6}));
}

TEST(Split, NumOutputsUnevenAndErrors) {
  Tensor x = iota_tensor<float>(Shape{5});
  auto out = OpCall("Split", 18, "", 2).attr_int("num_outputs", 2).run({x});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(values_of<float>((*out)[1]), (std::vector<float>{3, 4}));
  EXPECT_FALSE(OpCall("Split", 13, "", 2).run({x}));                 // 5 does not halve
  EXPECT_FALSE(OpCall("Split", 13, "", 2).run({x, i64s({2, 2})}));   // sums to 4
  EXPECT_FALSE(OpCall("Split", 13, "", 2).run({x, i64s({6, -1})}));  // negative size
  EXPECT_FALSE(OpCall("Split", 13, "", 2).attr_int("axis", 1).run({x}));
}

}  // namespace
}  // namespace onnx_genai::testing
