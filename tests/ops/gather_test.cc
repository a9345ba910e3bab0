// Gather family: Gather, GatherElements, GatherND, ScatterElements, ScatterND. Expected values
// are worked out by hand from the ONNX spec; large cases compare with a plain indexing loop.
#include <gtest/gtest.h>

#include "ops/data_test_util.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

TEST(Gather, Axis0RowsWithNegativeInt32Indices) {
  Tensor data = iota_tensor<float>(Shape{4, 3});
  Tensor idx = Tensor::from_vector<int32_t>({2}, {-1, 1});
  auto out = OpCall("Gather", 13).run({data, idx});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{9, 10, 11, 3, 4, 5}));
}

TEST(Gather, InnerAxisWith2DIndicesAndScalarIndex) {
  Tensor data = iota_tensor<int16_t>(Shape{2, 3, 2});
  Tensor idx = Tensor::from_vector<int64_t>({2, 2}, {2, 0, 1, 1});
  auto out = OpCall("Gather", 13).attr_int("axis", -2).run({data, idx});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2, 2, 2}));
  // data[b, i, c] = 6b + 2i + c
  EXPECT_EQ(values_of<int16_t>((*out)[0]),
            (std::vector<int16_t>{4, 5, 0, 1, 2, 3, 2, 3, 10, 11, 6, 7, 8, 9, 8, 9}));
  auto scalar = OpCall("Gather", 13).attr_int("axis", 1).run({data, i64_scalar(1)});
  ASSERT_TRUE(scalar) << scalar.status().message();
  EXPECT_EQ((*scalar)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values_of<int16_t>((*scalar)[0]), (std::vector<int16_t>{2, 3, 8, 9}));
}

TEST(Gather, EmptyIndicesAndBadInput) {
  Tensor data = iota_tensor<float>(Shape{4, 3});
  auto empty = OpCall("Gather", 13).run({data, Tensor::from_vector<int64_t>({0}, std::vector<int64_t>{})});
  ASSERT_TRUE(empty) << empty.status().message();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 3}));
  auto bad = OpCall("Gather", 13).run({data, i64s({1, 4})});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("index 4"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(OpCall("Gather", 13).run({data, i64s({-5})}));
  EXPECT_FALSE(OpCall("Gather", 13).attr_int("axis", 2).run({data, i64s({0})}));
  EXPECT_FALSE(OpCall("Gather", 13).run({data, Tensor::from_vector<float>({1}, {0.f})}));
}

TEST(Gather, LargeEmbeddingLookupOnThreadPool) {
  const int64_t vocab = 300, hidden = 257, tokens = 1000;
  Tensor table = iota_tensor<float>(Shape{vocab, hidden});
  std::vector<int64_t> ids(tokens);
  for (int64_t t = 0; t < tokens; ++t) ids[static_cast<size_t>(t)] = (t * 37) % vocab - (t % 2 ? vocab : 0);
  ThreadPool pool(4);
  auto out = OpCall("Gather", 13).run({table, Tensor::from_vector<int64_t>({tokens}, ids)}, &pool);
  ASSERT_TRUE(out) << out.status().message();
  const float* got = (*out)[0].data<float>();
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t row = ids[static_cast<size_t>(t)] < 0 ? ids[static_cast<size_t>(t)] + vocab : ids[static_cast<size_t>(t)];
    for (int64_t h = 0; h < hidden; h += 64) ASSERT_EQ(got[t * hidden + h], static_cast<float>(row * hidden + h));
  }
}

TEST(GatherElements, BothAxesAndErrors) {
  Tensor data = Tensor::from_vector<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor idx = Tensor::from_vector<int64_t>({2, 3}, {1, 2, 0, 2, 0, -3});
  auto rows = OpCall("GatherElements", 13).attr_int("axis", 0).run({data, idx});
  ASSERT_TRUE(rows) << rows.status().message();
  EXPECT_EQ(values_of<float>((*rows)[0]), (std::vector<float>{4, 8, 3, 7, 2, 3}));
  Tensor idx2 = Tensor::from_vector<int32_t>({3, 2}, {0, 0, 1, 0, 2, -1});
  auto cols = OpCall("GatherElements", 13).attr_int("axis", -1).run({data, idx2});
  ASSERT_TRUE(cols) << cols.status().message();
  EXPECT_EQ(values_of<float>((*cols)[0]), (std::vector<float>{1, 1, 5, 4, 9, 9}));
  EXPECT_FALSE(OpCall("GatherElements", 13).attr_int("axis", 0).run({data, i64s({3})}));  // rank mismatch
  EXPECT_FALSE(OpCall("GatherElements", 13).run({data, Tensor::from_vector<int64_t>({1, 1}, {3})}));
}

TEST(GatherND, BatchDimsAndSlices) {
  Tensor data = iota_tensor<int32_t>(Shape{2, 2, 2});
  auto slices = OpCall("GatherND", 13).run({data, Tensor::from_vector<int64_t>({2, 1}, {1, 0})});
  ASSERT_TRUE(slices) << slices.status().message();
  EXPECT_EQ((*slices)[0].shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(values_of<int32_t>((*slices)[0]), (std::vector<int32_t>{4, 5, 6, 7, 0, 1, 2, 3}));
  auto batched = OpCall("GatherND", 13).attr_int("batch_dims", 1).run({data, Tensor::from_vector<int64_t>({2, 2}, {1, 0, 0, -1})});
  ASSERT_TRUE(batched) << batched.status().message();
  EXPECT_EQ(values_of<int32_t>((*batched)[0]), (std::vector<int32_t>{2, 5}));
  EXPECT_FALSE(OpCall("GatherND", 13).run({data, Tensor::from_vector<int64_t>({1, 2}, {0, 2})}));
}

TEST(ScatterElements, ReductionsAndDuplicates) {
  Tensor data = Tensor::from_vector<float>({1, 5}, {1, 2, 3, 4, 5});
  Tensor idx = Tensor::from_vector<int64_t>({1, 3}, {1, -4, 3});
  Tensor upd = Tensor::from_vector<float>({1, 3}, {10, 20, 30});
  auto none = OpCall("ScatterElements", 16).attr_int("axis", 1).run({data, idx, upd});
  ASSERT_TRUE(none) << none.status().message();
  EXPECT_EQ(values_of<float>((*none)[0]), (std::vector<float>{1, 20, 3, 30, 5}));  // last duplicate wins
  auto add = OpCall("ScatterElements", 16).attr_int("axis", 1).attr_string("reduction", "add").run({data, idx, upd});
  ASSERT_TRUE(add) << add.status().message();
  EXPECT_EQ(values_of<float>((*add)[0]), (std::vector<float>{1, 32, 3, 34, 5}));
  auto mx = OpCall("ScatterElements", 18).attr_int("axis", 1).attr_string("reduction", "max").run({data, idx, upd});
  ASSERT_TRUE(mx) << mx.status().message();
  EXPECT_EQ(values_of<float>((*mx)[0]), (std::vector<float>{1, 20, 3, 30, 5}));
  EXPECT_EQ(values_of<float>(data), (std::vector<float>{1, 2, 3, 4, 5}));  // input untouched
  Tensor bad = Tensor::from_vector<int64_t>({1, 3}, {1, 5, 0});
  EXPECT_FALSE(OpCall("ScatterElements", 16).attr_int("axis", 1).run({data, bad, upd}));
}

TEST(ScatterND, SliceUpdatesWithMul) {
  Tensor data = iota_tensor<int64_t>(Shape{3, 2});
  Tensor idx = Tensor::from_vector<int64_t>({2, 1}, {2, -3});
  Tensor upd = Tensor::from_vector<int64_t>({2, 2}, {10, 20, 30, 40});
  auto set = OpCall("ScatterND", 16).run({data, idx, upd});
  ASSERT_TRUE(set) << set.status().message();
  EXPECT_EQ(values_of<int64_t>((*set)[0]), (std::vector<int64_t>{30, 40, 2, 3, 10, 20}));
  auto mul = OpCall("ScatterND", 16).attr_string("reduction", "mul").run({data, idx, upd});
  ASSERT_TRUE(mul) << mul.status().message();
  EXPECT_EQ(values_of<int64_t>((*mul)[0]), (std::vector<int64_t>{0, 40, 2, 3, 40, 100}));
  EXPECT_FALSE(OpCall("ScatterND", 16).run({data, Tensor::from_vector<int64_t>({2, 1}, {0, 3}), upd}));
  EXPECT_FALSE(OpCall("ScatterND", 16).run({data, idx, Tensor::from_vector<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6})}));
}

}  // namespace
}  // namespace onnx_genai::testing
