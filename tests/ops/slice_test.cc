// Slice (opset 1-9 attributes, opset >= 10 inputs). Expected values are worked out by hand
// with numpy's slicing rules, which the ONNX spec follows.
#include <gtest/gtest.h>

#include <climits>

#include "ops/data_test_util.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

TEST(Slice, StepsAndNegativeAxes) {
  Tensor x = iota_tensor<float>(Shape{3, 5});
  // x[0:3:2, 1:5:3]
  auto out = OpCall("Slice", 13).run({x, i64s({0, 1}), i64s({3, 5}), i64s({0, -1}), i64s({2, 3})});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{1, 4, 11, 14}));
}

TEST(Slice, NegativeStepsReverse) {
  Tensor x = iota_tensor<int64_t>(Shape{2, 4});
  // x[:, ::-1] with end = INT64_MIN; x[-1:-3:-1, 3:0:-2]
  auto rev = OpCall("Slice", 13).run({x, i64s({-1}), i64s({INT64_MIN}), i64s({1}), i64s({-1})});
  ASSERT_TRUE(rev) << rev.status().message();
  EXPECT_EQ(values_of<int64_t>((*rev)[0]), (std::vector<int64_t>{3, 2, 1, 0, 7, 6, 5, 4}));
  auto both = OpCall("Slice", 13).run({x, i64s({-1, 3}), i64s({-3, 0}), i64s({0, 1}), i64s({-1, -2})});
  ASSERT_TRUE(both) << both.status().message();
  EXPECT_EQ((*both)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values_of<int64_t>((*both)[0]), (std::vector<int64_t>{7, 5, 3, 1}));
}

TEST(Slice, ClampingAndEmptyResults) {
  Tensor x = iota_tensor<uint8_t>(Shape{4, 3});
  // x[1:INT64_MAX] keeps the tail; x[10:20] is empty; x[2:1] is empty.
  auto tail = OpCall("Slice", 13).run({x, i64s({1}), i64s({INT64_MAX})});
  ASSERT_TRUE(tail) << tail.status().message();
  EXPECT_EQ((*tail)[0].shape(), (Shape{3, 3}));
  EXPECT_EQ(values_of<uint8_t>((*tail)[0]).front(), 3);
  auto past_end = OpCall("Slice", 13).run({x, i64s({10}), i64s({20})});
  ASSERT_TRUE(past_end) << past_end.status().message();
  EXPECT_EQ((*past_end)[0].shape(), (Shape{0, 3}));
  auto backwards = OpCall("Slice", 13).run({x, i64s({0, 2}), i64s({4, 1})});
  ASSERT_TRUE(backwards) << backwards.status().message();
  EXPECT_EQ((*backwards)[0].shape(), (Shape{4, 0}));
  Tensor empty = Tensor::from_vector<float>({0, 3}, std::vector<float>{});
  auto of_empty = OpCall("Slice", 13).run({empty, i64s({0, -1}), i64s({5, INT64_MIN}), i64s({0, 1}), i64s({1, -1})});
  ASSERT_TRUE(of_empty) << of_empty.status().message();
  EXPECT_EQ((*of_empty)[0].shape(), (Shape{0, 3}));
}

TEST(Slice, Opset9Attributes) {
  Tensor x = iota_tensor<float>(Shape{2, 3});
  auto out = OpCall("Slice", 9).attr_ints("starts", {1}).attr_ints("ends", {-1}).attr_ints("axes", {1}).run({x});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{1, 4}));
}

TEST(Slice, BadParametersFail) {
  Tensor x = iota_tensor<float>(Shape{2, 3});
  EXPECT_FALSE(OpCall("Slice", 13).run({x, i64s({0}), i64s({1}), i64s({2})}));                    // axis
  EXPECT_FALSE(OpCall("Slice", 13).run({x, i64s({0}), i64s({1}), i64s({0}), i64s({0})}));         // step 0
  EXPECT_FALSE(OpCall("Slice", 13).run({x, i64s({0, 0}), i64s({1}), i64s({0, 1})}));              // lengths
  EXPECT_FALSE(OpCall("Slice", 13).run({x, i64s({0, 0}), i64s({1, 1}), i64s({1, -1})}));          // repeated
}

TEST(Slice, LargeStridedSliceOnThreadPool) {
  const int64_t rows = 257, cols = 1031;
  Tensor x = iota_tensor<int32_t>(Shape{rows, cols});
  ThreadPool pool(4);
  // x[250:3:-3, 5:1000:2]
  auto out = OpCall("Slice", 13).run({x, i64s({250, 5}), i64s({3, 1000}), i64s({0, 1}), i64s({-3, 2})}, &pool);
  ASSERT_TRUE(out) << out.status().message();
  const Tensor& y = (*out)[0];
  ASSERT_EQ(y.shape(), (Shape{83, 498}));
  for (int64_t i = 0; i < 83; ++i) {
    for (int64_t j = 0; j < 498; ++j) {
      ASSERT_EQ(y.data<int32_t>()[i * 498 + j], (250 - 3 * i) * cols + 5 + 2 * j) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace onnx_genai::testing
