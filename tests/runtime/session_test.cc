#include "onnx_genai/session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "onnx/model.h"
#include "onnx_model_builder.h"

namespace onnx_genai {
namespace {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

std::unique_ptr<Session> make_session(const ModelBuilder& b, int threads = 1) {
  const std::string bytes = b.bytes();
  auto owner = std::make_shared<std::string>(bytes);
  auto model = load_onnx_model_from_memory(reinterpret_cast<const uint8_t*>(owner->data()), owner->size(), owner, ".",
                                           "test.onnx");
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  SessionOptions options;
  options.num_threads = threads;
  auto session = Session::create(std::move(model).value(), options);
  EXPECT_TRUE(session.is_ok()) << session.status().message();
  return std::move(session).value();
}

Tensor floats(Shape shape, std::vector<float> v) { return Tensor::from_vector<float>(std::move(shape), v); }

TEST(Session, RunsAndCachesPlansPerShape) {
  ModelBuilder b;
  b.input("x", kF32, {-1, 2}, {"batch"});
  b.initializer_f32("w", {2}, {10, 20});
  b.node("Add", {"x", "w"}, {"s"});
  b.node("Relu", {"s"}, {"y"});
  b.output("y", kF32);
  auto session = make_session(b);
  auto out = session->run({floats({2, 2}, {1, -30, 3, 4})});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  const float* y = (*out)[0].data<float>();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
  EXPECT_FLOAT_EQ(y[0], 11);
  EXPECT_FLOAT_EQ(y[1], 0);
  EXPECT_FLOAT_EQ(y[3], 24);
  ASSERT_TRUE(session->run({floats({2, 2}, {0, 0, 0, 0})}).is_ok());
  ASSERT_TRUE(session->run({floats({3, 2}, {0, 0, 0, 0, 0, 0})}).is_ok());
  const SessionStats stats = session->stats();
  EXPECT_EQ(stats.plans_compiled, 2);
  EXPECT_EQ(stats.plan_cache_hits, 1);
}

// A late input is filled before its reader runs (device_placement_test.cc checks the order on a
// device); one whose values decide shapes, or a position past the inputs, is refused.
TEST(Session, LateInputsAreFilledBeforeTheirReaderAndNeverDecideShapes) {
  ModelBuilder b;
  b.input("x", kF32, {2});
  b.input("shape", onnx::TensorProto::INT64, {1});
  b.node("Reshape", {"x", "shape"}, {"r"});
  b.node("Add", {"r", "x"}, {"y"});
  b.output("y", kF32);
  auto session = make_session(b);
  std::vector<Tensor> inputs = {floats({2}, {0, 0}), Tensor::from_vector<int64_t>(Shape{1}, {2})};
  std::vector<Tensor> outputs;
  LateInputs late;
  late.inputs = {0};
  late.fill = [&] {
    inputs[0].data<float>()[0] = 3;
    inputs[0].data<float>()[1] = 4;
    return Status::ok();
  };
  ASSERT_TRUE(session->run_into(inputs, outputs, late).is_ok());
  EXPECT_FLOAT_EQ(outputs[0].data<float>()[0], 6);
  EXPECT_FLOAT_EQ(outputs[0].data<float>()[1], 8);
  late.inputs = {1};
  const Status keyed = session->run_into(inputs, outputs, late);
  ASSERT_FALSE(keyed.is_ok());
  EXPECT_NE(keyed.message().find("'shape' decides shapes"), std::string::npos) << keyed.message();
  late.inputs = {2};
  EXPECT_FALSE(session->run_into(inputs, outputs, late).is_ok());
}

TEST(Session, SymbolicDimsMustAgreeAcrossInputs) {
  ModelBuilder b;
  b.input("a", kF32, {-1, 2}, {"batch"});
  b.input("c", kF32, {-1, 2}, {"batch"});
  b.node("Add", {"a", "c"}, {"y"});
  b.output("y", kF32);
  auto session = make_session(b);
  auto bad = session->run({floats({1, 2}, {1, 2}), floats({2, 2}, {1, 2, 3, 4})});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'batch'"), std::string::npos) << bad.status().message();
}

TEST(Session, ShapeArithmeticIsEvaluatedWhilePlanning) {
  // y = Reshape(x, Concat(Shape(x)[0:1], [2, 3])): the classic exported-decoder pattern.
  ModelBuilder b;
  b.input("x", kF32, {-1, 6}, {"n"});
  b.initializer_i64("zero", {1}, {0});
  b.initializer_i64("tail", {2}, {2, 3});
  b.node("Shape", {"x"}, {"shape"});
  b.node("Gather", {"shape", "zero"}, {"n_dim"});
  b.node("Concat", {"n_dim", "tail"}, {"new_shape"}).add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  b.node("Reshape", {"x", "new_shape"}, {"r"});
  b.node("Relu", {"r"}, {"y"});
  b.output("y", kF32);
  auto session = make_session(b);
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 5;
  auto out = session->run({floats({2, 6}, v)});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2, 3}));
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[11], 6);
  // Only Reshape (a view) and Relu remain as steps; Shape/Gather/Concat ran while planning.
  EXPECT_EQ(session->stats().last_plan_steps, 2);
}

TEST(Session, IfOnBooleanInputInlinesTheTakenBranch) {
  // Optimum "merged" decoders switch on a boolean graph input like this.
  ModelBuilder b;
  b.input("x", kF32, {2});
  b.input("cond", onnx::TensorProto::BOOL, {});
  b.initializer_f32("one", {1}, {1});
  b.initializer_f32("two", {1}, {2});
  auto& n = b.node("If", {"cond"}, {"y"}, "if_node");
  auto branch = [](const std::string& op, const std::string& constant) {
    onnx::GraphProto g;
    g.set_name(op + "_branch");
    auto* node = g.add_node();
    node->set_op_type(op);
    node->add_input("x");  // outer-scope reference
    node->add_input(constant);
    node->add_output(op + "_out");
    auto* out = g.add_output();
    out->set_name(op + "_out");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    return g;
  };
  for (auto [name, g] : {std::pair{"then_branch", branch("Add", "one")}, std::pair{"else_branch", branch("Mul", "two")}}) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = g;
  }
  b.output("y", kF32);
  auto session = make_session(b);
  auto cond = [](bool c) {
    Tensor t = Tensor::allocate(DType::kBool, Shape{}).value();
    t.data<uint8_t>()[0] = c;
    return t;
  };
  auto t = session->run({floats({2}, {3, 4}), cond(true)});
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_FLOAT_EQ((*t)[0].data<float>()[1], 5);
  auto e = session->run({floats({2}, {3, 4}), cond(false)});
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_FLOAT_EQ((*e)[0].data<float>()[1], 8);
  EXPECT_EQ(session->stats().plans_compiled, 2);  // the condition's value keys the plan
}

TEST(Session, MemoryPlanReusesBuffersAlongAChain) {
  ModelBuilder b;
  b.input("x", kF32, {4096});
  std::string prev = "x";
  for (int i = 0; i < 10; ++i) {
    const std::string out = i == 9 ? "y" : "t" + std::to_string(i);
    b.node(i % 2 ? "Relu" : "Neg", {prev}, {out});
    prev = out;
  }
  b.output("y", kF32);
  auto session = make_session(b);
  std::vector<float> v(4096, 1.0f);
  auto out = session->run({floats({4096}, v)});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  const SessionStats s = session->stats();
  // 9 intermediates of 16 KiB; only two are ever live at once.
  EXPECT_EQ(s.last_plan_requested_bytes, 9 * 16384);
  EXPECT_EQ(s.last_plan_arena_bytes, 2 * 16384);
  std::printf("chain of 10 ops: requested %lld bytes, arena (peak) %lld bytes\n",
              static_cast<long long>(s.last_plan_requested_bytes), static_cast<long long>(s.last_plan_arena_bytes));
}

TEST(Session, OutputThatIsAnInputIsCopied) {
  ModelBuilder b;
  b.input("x", kF32, {2});
  b.node("Identity", {"x"}, {"y"});
  b.output("y", kF32);
  b.output("x", kF32);
  auto session = make_session(b);
  auto out = session->run({floats({2}, {7, 8})});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[1], 8);
  EXPECT_FLOAT_EQ((*out)[1].data<float>()[0], 7);
}

TEST(Session, ConstantSubgraphsAreFoldedAtLoad) {
  ModelBuilder b;
  b.input("x", kF32, {2});
  b.initializer_f32("a", {2}, {1, 2});
  b.initializer_f32("c", {2}, {3, 4});
  b.node("Mul", {"a", "c"}, {"ac"});
  b.node("Add", {"x", "ac"}, {"y"});
  b.output("y", kF32);
  auto session = make_session(b);
  EXPECT_EQ(session->stats().nodes_folded, 1);
  auto out = session->run({floats({2}, {1, 1})});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[1], 9);
}

// A weight's Transpose is folded whatever its size (tied embeddings: the table is the LM head's
// weight transposed); a large Expand of a small constant is left to run time.
TEST(Session, LargeLayoutOfAWeightIsFoldedButALargeExpandIsNot) {
  constexpr int64_t kRows = 3, kCols = (1 << 22) / 3 + 1;  // past the folding size limit
  std::vector<float> weight(static_cast<size_t>(kRows * kCols));
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = static_cast<float>(i % 1000);
  ModelBuilder b;
  b.input("ids", onnx::TensorProto::INT64, {2});
  b.initializer_f32("w", {kRows, kCols}, weight);
  b.initializer_f32("one", {1}, {1.0f});
  b.initializer_i64("big", {1}, {kRows * kCols});
  ModelBuilder::attr_ints(b.node("Transpose", {"w"}, {"table"}), "perm", {1, 0});
  b.node("Gather", {"table", "ids"}, {"rows"});
  b.node("Expand", {"one", "big"}, {"ones"});
  b.node("ReduceSum", {"ones"}, {"count"});
  b.output("rows", kF32);
  b.output("count", kF32);
  auto session = make_session(b);
  EXPECT_EQ(session->stats().nodes_folded, 1) << "the Transpose, not the Expand";
  Tensor ids = Tensor::allocate(DType::kI64, Shape{2}).value();
  ids.data<int64_t>()[0] = 5;
  ids.data<int64_t>()[1] = kCols - 1;
  auto out = session->run({ids});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_FLOAT_EQ((*out)[0].data<float>()[r], weight[static_cast<size_t>(r * kCols + 5)]) << r;
    EXPECT_FLOAT_EQ((*out)[0].data<float>()[kRows + r], weight[static_cast<size_t>(r * kCols + kCols - 1)]) << r;
  }
  EXPECT_FLOAT_EQ((*out)[1].data<float>()[0], static_cast<float>(kRows * kCols));
}

}  // namespace
}  // namespace onnx_genai
