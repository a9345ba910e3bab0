// Shape inference for the ops decoder exports lean on, through the registry exactly as the
// planner calls it: concrete input shapes (and values for value inputs) in, output shapes out.
#include <gtest/gtest.h>

#include "ops/op.h"

namespace onnx_genai {
namespace {

struct Infer {
  Graph graph;  // owns the placeholder input values
  Node node;
  std::vector<TensorInfo> infos;
  std::vector<Tensor> values;  // undefined = not known

  Infer(std::string op, int opset, size_t num_outputs = 1) {
    node.op_type = std::move(op);
    node.opset = opset;
    node.name = "n";
    node.outputs.assign(num_outputs, nullptr);
  }
  Infer& in(DType t, Shape s) {
    node.inputs.push_back(graph.add_value("in" + std::to_string(infos.size())));
    infos.push_back({t, std::move(s)});
    values.emplace_back();
    return *this;
  }
  Infer& in_value(Tensor v) {
    node.inputs.push_back(graph.add_value("in" + std::to_string(infos.size())));
    infos.push_back({v.dtype(), v.shape()});
    values.push_back(std::move(v));
    return *this;
  }
  Infer& ints(const std::string& name, std::vector<int64_t> v) {
    Attribute a;
    a.kind = Attribute::Kind::kInts;
    a.ints = std::move(v);
    node.attrs.set(name, std::move(a));
    return *this;
  }
  Infer& i(const std::string& name, int64_t v) {
    Attribute a;
    a.kind = Attribute::Kind::kInt;
    a.i = v;
    node.attrs.set(name, std::move(a));
    return *this;
  }
  Result<std::vector<TensorInfo>> run() {
    const OpSchema* schema = OpRegistry::instance().find_schema("", node.op_type);
    if (schema == nullptr) return OG_ERROR("no schema for ", node.op_type);
    InferContext ctx{node, {}, {}, {}};
    for (size_t k = 0; k < infos.size(); ++k) {
      ctx.inputs.push_back(&infos[k]);
      ctx.input_values.push_back(values[k].defined() ? &values[k] : nullptr);
    }
    ctx.outputs.resize(node.outputs.size());
    OG_RETURN_IF_ERROR(schema->infer_shapes(ctx));
    std::vector<TensorInfo> out;
    for (auto& o : ctx.outputs) out.push_back(o ? *o : TensorInfo{});
    return out;
  }
  Shape shape() {
    auto r = run();
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r.is_ok() ? (*r)[0].shape : Shape{-1};
  }
};

Tensor i64(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v); }

TEST(ShapeInference, MatMulBroadcastsBatchDims) {
  EXPECT_EQ(Infer("MatMul", 17).in(DType::kF32, {2, 1, 5, 3}).in(DType::kF32, {4, 3, 7}).shape(), (Shape{2, 4, 5, 7}));
  EXPECT_EQ(Infer("MatMul", 17).in(DType::kF32, {3}).in(DType::kF32, {3, 7}).shape(), (Shape{7}));
  EXPECT_FALSE(Infer("MatMul", 17).in(DType::kF32, {2, 3}).in(DType::kF32, {4, 5}).run().is_ok());
}

TEST(ShapeInference, ReshapeResolvesZeroAndMinusOne) {
  EXPECT_EQ(Infer("Reshape", 17).in(DType::kF32, {2, 3, 4}).in_value(i64({0, -1})).shape(), (Shape{2, 12}));
  EXPECT_FALSE(Infer("Reshape", 17).in(DType::kF32, {2, 3, 4}).in_value(i64({5, -1})).run().is_ok());
}

TEST(ShapeInference, UnsqueezeAxesMovedToAnInputAtOpset13) {
  EXPECT_EQ(Infer("Unsqueeze", 11).in(DType::kF32, {3, 4}).ints("axes", {0, -1}).shape(), (Shape{1, 3, 4, 1}));
  EXPECT_EQ(Infer("Unsqueeze", 13).in(DType::kF32, {3, 4}).in_value(i64({1})).shape(), (Shape{3, 1, 4}));
}

TEST(ShapeInference, ConcatGatherTransposeSlice) {
  EXPECT_EQ(Infer("Concat", 17).in(DType::kF32, {2, 3}).in(DType::kF32, {2, 5}).i("axis", -1).shape(), (Shape{2, 8}));
  EXPECT_FALSE(Infer("Concat", 17).in(DType::kF32, {2, 3}).in(DType::kF32, {3, 5}).i("axis", 1).run().is_ok());
  EXPECT_EQ(Infer("Gather", 17).in(DType::kF32, {100, 16}).in(DType::kI64, {2, 7}).shape(), (Shape{2, 7, 16}));
  EXPECT_EQ(Infer("Transpose", 17).in(DType::kF32, {2, 3, 4}).ints("perm", {2, 0, 1}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(Infer("Transpose", 17).in(DType::kF32, {2, 3, 4}).shape(), (Shape{4, 3, 2}));
  // x[1:-1, ::-2] of a [5, 6] tensor.
  EXPECT_EQ(Infer("Slice", 17)
                .in(DType::kF32, {5, 6})
                .in_value(i64({1, -1}))
                .in_value(i64({-1, INT64_MIN}))
                .in_value(i64({0, 1}))
                .in_value(i64({1, -2}))
                .shape(),
            (Shape{3, 3}));
}

TEST(ShapeInference, ReductionsAndSoftmax) {
  EXPECT_EQ(Infer("ReduceMean", 17).in(DType::kF32, {2, 3, 4}).ints("axes", {-1}).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(Infer("ReduceMean", 17).in(DType::kF32, {2, 3, 4}).ints("axes", {1}).i("keepdims", 0).shape(), (Shape{2, 4}));
  EXPECT_EQ(Infer("ReduceSum", 13).in(DType::kF32, {2, 3, 4}).in_value(i64({0, 2})).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(Infer("Softmax", 13).in(DType::kF32, {2, 151936}).shape(), (Shape{2, 151936}));
}

TEST(ShapeInference, BroadcastingElementwiseAndWhere) {
  EXPECT_EQ(Infer("Add", 14).in(DType::kF32, {2, 1, 4}).in(DType::kF32, {3, 1}).shape(), (Shape{2, 3, 4}));
  EXPECT_FALSE(Infer("Add", 14).in(DType::kF32, {2, 3}).in(DType::kF32, {4}).run().is_ok());
  EXPECT_EQ(Infer("Where", 16).in(DType::kBool, {1, 1, 5, 5}).in(DType::kF32, {1}).in(DType::kF32, {2, 4, 5, 5}).shape(),
            (Shape{2, 4, 5, 5}));
}

TEST(ShapeInference, RangeAndConstantOfShapeUseValues) {
  EXPECT_EQ(Infer("Range", 17).in_value(Tensor::scalar_i64(2)).in_value(Tensor::scalar_i64(11)).in_value(Tensor::scalar_i64(3)).shape(),
            (Shape{3}));
  EXPECT_EQ(Infer("ConstantOfShape", 17).in_value(i64({2, 0, 3})).shape(), (Shape{2, 0, 3}));
}

}  // namespace
}  // namespace onnx_genai
