// com.microsoft MoE and QMoE (src/ops/schema/moe.h). Their numerics are checked against ONNX
// Runtime and a float64 evaluation on random single-node models by the differential test
// (tests/differential/moe.py); these tests pin what that cannot: routing ties against ORT, results
// independent of the thread count, and a one-line error naming the node for every bad input.
#include <gtest/gtest.h>

#include <random>

#include "ops/contrib_test_util.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

constexpr const char* kMoENode = "test_MoE";
constexpr const char* kQMoENode = "test_QMoE";

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

Tensor random_u8(Shape shape, uint32_t seed, DType dtype = DType::kU8) {
  std::mt19937 gen(seed);
  Tensor t = Tensor::from_vector<uint8_t>(shape, std::vector<uint8_t>(static_cast<size_t>(shape.numel())));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(gen());
  return Tensor::view(dtype, std::move(shape), t.raw(), std::make_shared<Tensor>(t));  // same bytes, another dtype
}

// A float MoE: tokens x hidden 8, experts, inter 4; relu unless the call says otherwise.
struct FloatMoE {
  int64_t tokens = 3, hidden = 8, inter = 4, experts = 4;
  Tensor x = f32({3, 8}, random_floats(24, 1));
  Tensor router = f32({3, 4}, random_floats(12, 2, 3.0f));
  Tensor fc1 = f32({4, 4, 8}, random_floats(128, 3));
  Tensor fc2 = f32({4, 8, 4}, random_floats(128, 4));

  std::vector<Tensor> inputs() const { return {x, router, fc1, Tensor(), fc2}; }
};

OpCall moe_call(int64_t k, const std::string& activation = "relu") {
  OpCall call("MoE", 1, "com.microsoft");
  call.attr_int("k", k).attr_string("activation_type", activation);
  return call;
}

// A QMoE with 4-bit codes in blocks of 16: hidden 32, inter 16, 4 experts.
struct QuantMoE {
  Tensor x = f32({2, 32}, random_floats(64, 5));
  Tensor router = f32({2, 4}, random_floats(8, 6, 3.0f));
  Tensor fc1 = random_u8({4, 16, 16}, 7), fc2 = random_u8({4, 32, 8}, 8);
  Tensor s1 = f32({4, 16, 2}, random_floats(128, 9, 0.05f)), s2 = f32({4, 32, 1}, random_floats(128, 10, 0.05f));

  std::vector<Tensor> inputs() const { return {x, router, fc1, s1, Tensor(), fc2, s2}; }
};

OpCall qmoe_call(int64_t k) {
  OpCall call("QMoE", 1, "com.microsoft");
  call.attr_int("k", k).attr_string("activation_type", "silu").attr_int("expert_weight_bits", 4).attr_int("block_size", 16);
  return call;
}

std::vector<Tensor> with(std::vector<Tensor> inputs, size_t slot, Tensor t) {
  if (inputs.size() <= slot) inputs.resize(slot + 1);
  inputs[slot] = std::move(t);
  return inputs;
}

// ---- Routing and threads ------------------------------------------------------------------------

// Tied router logits: ONNX Runtime sorts (value, index) pairs descending, so the higher expert
// index wins a tie; a k = 1 MoE shows which expert ran.
TEST(MoE, TiesGoToTheHigherExpertLikeOnnxRuntime) {
  const FloatMoE m;
  const Tensor router = f32({3, 4}, {1, 1, 1, 1, 0, 2, 2, 0, 0.5f, 0.5f, -1, -1});
  OrtNodeModel model{.op_type = "MoE", .domain = "com.microsoft",
                     .attributes = {{"k", 1}, {"activation_type", "identity"}, {"normalize_routing_weights", 1}},
                     .inputs = {"x", "router", "fc1", "", "fc2"}, .outputs = {"y"},
                     .feeds = {{"x", m.x}, {"router", router}}, .constants = {{"fc1", m.fc1}, {"fc2", m.fc2}}};
  auto both = run_ours_and_ort(model);
  ASSERT_TRUE(both.is_ok()) << both.status().message();
  expect_near_all(to_floats<float>(both->ours[0]), to_floats<float>(both->ort[0]), 1e-5f);
}

// Tasks are cut by expert and output rows, never by thread: 1 and 4 threads agree bit for bit.
TEST(QMoE, ResultDoesNotDependOnThreads) {
  const QuantMoE q;
  ThreadPool pool(4);
  auto one = qmoe_call(2).run(q.inputs());
  auto four = qmoe_call(2).run(q.inputs(), &pool);
  ASSERT_TRUE(one.is_ok()) << one.status().message();
  ASSERT_TRUE(four.is_ok()) << four.status().message();
  EXPECT_EQ(values_of<float>((*one)[0]), values_of<float>((*four)[0]));
}

// ---- Bad inputs ---------------------------------------------------------------------------------

TEST(MoE, BadAttributesAreErrorsNamingTheNode) {
  const FloatMoE m;
  OpCall no_k("MoE", 1, "com.microsoft");
  EXPECT_TRUE(fails_with(no_k.run(m.inputs()), kMoENode, "attribute k is required"));
  EXPECT_TRUE(fails_with(moe_call(5).run(m.inputs()), kMoENode, "k must be in [1, num_experts=4], got 5"));
  EXPECT_TRUE(fails_with(moe_call(0).run(m.inputs()), kMoENode, "k must be in [1, num_experts=4], got 0"));
  EXPECT_TRUE(fails_with(moe_call(2, "tanh").run(m.inputs()), kMoENode, "unsupported activation_type 'tanh'"));
  EXPECT_TRUE(fails_with(moe_call(3).attr_int("use_sparse_mixer", 1).run(m.inputs()), kMoENode, "use_sparse_mixer needs k 2, got 3"));
  EXPECT_TRUE(fails_with(moe_call(1).attr_int("use_sparse_mixer", 1).run(m.inputs()), kMoENode, "use_sparse_mixer needs k 2, got 1"));
  EXPECT_TRUE(moe_call(2).attr_int("use_sparse_mixer", 1).run(m.inputs()).is_ok());
  EXPECT_TRUE(fails_with(moe_call(2).attr_int("swiglu_fusion", 3).run(m.inputs()), kMoENode, "swiglu_fusion must be 0, 1 or 2"));
  EXPECT_TRUE(fails_with(moe_call(2).attr_int("block_size", 32).run(m.inputs()), kMoENode, "unsupported attribute 'block_size'"));
  EXPECT_TRUE(fails_with(moe_call(2, "swiglu").run(m.inputs()), kMoENode, "swiglu_fusion 0 needs fc3_experts_weights"));
  const Tensor fc3 = f32({4, 4, 8}, random_floats(128, 11));
  EXPECT_TRUE(fails_with(moe_call(2, "swiglu").attr_int("swiglu_fusion", 1).run(with(m.inputs(), 6, fc3)), kMoENode,
                         "fc3_experts_weights given with swiglu_fusion 1"));
}

TEST(MoE, BadShapesAreErrorsNamingTheNode) {
  const FloatMoE m;
  EXPECT_TRUE(fails_with(moe_call(2).run(with(m.inputs(), 0, f32({24}, random_floats(24, 1)))), kMoENode,
                         "input [24] must be 2-D or 3-D"));
  EXPECT_TRUE(fails_with(moe_call(2).run(with(m.inputs(), 1, f32({2, 4}, random_floats(8, 2)))), kMoENode,
                         "router_probs [2,4] should be [3, experts]"));
  EXPECT_TRUE(fails_with(moe_call(2).run(with(m.inputs(), 1, cast_tensor<Float16>({3, 4}, random_floats(12, 2)))), kMoENode,
                         "router_probs must have input's dtype float32"));
  EXPECT_TRUE(fails_with(moe_call(2).run(with(m.inputs(), 2, f32({4, 8, 4}, random_floats(128, 3)))), kMoENode,
                         "fc1_experts_weights shape [4,8,4] should be [4,4,8]"));
  EXPECT_TRUE(fails_with(moe_call(2).run(with(m.inputs(), 3, f32({4, 5}, random_floats(20, 3)))), kMoENode,
                         "fc1_experts_bias shape [4,5] should be [4,4]"));
  EXPECT_TRUE(fails_with(moe_call(2).run(with(m.inputs(), 4, f32({4, 8}, random_floats(32, 3)))), kMoENode,
                         "fc2_experts_weights [4,8] must be 3-D"));
  EXPECT_TRUE(fails_with(moe_call(2).run({m.x, m.router, m.fc1}), kMoENode,
                         "inputs fc1_experts_weights and fc2_experts_weights are required"));
}

TEST(QMoE, BadQuantisationIsAnErrorNamingTheNode) {
  const QuantMoE q;
  EXPECT_TRUE(fails_with(qmoe_call(2).attr_int("expert_weight_bits", 3).run(q.inputs()), kQMoENode,
                         "expert_weight_bits must be 2, 4 or 8, got 3"));
  EXPECT_TRUE(fails_with(qmoe_call(2).attr_int("block_size", 24).run(q.inputs()), kQMoENode,
                         "block_size must be a power of two >= 16, got 24"));
  EXPECT_TRUE(fails_with(qmoe_call(2).attr_int("block_size", 32).run(q.inputs()), kQMoENode,
                         "fc2 input size 16 is not a multiple of block_size 32"));
  OpCall per_row("QMoE", 1, "com.microsoft");
  per_row.attr_int("k", 2).attr_string("activation_type", "silu");
  EXPECT_TRUE(fails_with(per_row.run({q.x, q.router, random_u8({4, 8, 16}, 7), f32({4, 8}, random_floats(32, 9)), Tensor(),
                                      random_u8({4, 32, 4}, 8), f32({4, 32}, random_floats(128, 10))}),
                         kQMoENode, "fc2 input size 8 with per-row scales must be a multiple of 16"));
  EXPECT_TRUE(fails_with(qmoe_call(2).attr_string("quant_type", "nvfp4").run(q.inputs()), kQMoENode,
                         "unsupported quant_type 'nvfp4'"));
  EXPECT_TRUE(fails_with(qmoe_call(2).attr_int("weights_prepacked", 1).run(q.inputs()), kQMoENode,
                         "weights_prepacked 1"));
  EXPECT_TRUE(fails_with(qmoe_call(2).attr_string("quant_type", "fp4").attr_int("expert_weight_bits", 8).run(q.inputs()),
                         kQMoENode, "quant_type fp4 needs expert_weight_bits 4"));
  EXPECT_TRUE(fails_with(qmoe_call(2).run(with(q.inputs(), 3, Tensor())), kQMoENode, "input fc1_scales is required"));
  EXPECT_TRUE(fails_with(qmoe_call(2).run(with(q.inputs(), 3, f32({4, 16}, random_floats(64, 9)))), kQMoENode,
                         "fc1_scales shape [4,16] should be [4,16,2]"));
  EXPECT_TRUE(fails_with(qmoe_call(2).run(with(q.inputs(), 2, random_u8({4, 16, 8}, 7))), kQMoENode,
                         "fc1_experts_weights shape [4,16,8] should be [4,16,16]"));
  EXPECT_TRUE(fails_with(qmoe_call(2).run(with(q.inputs(), 11, random_u8({4, 16, 2}, 12))), kQMoENode,
                         "fc1_zero_points shape [4,16,2] should be [4,16,1]"));
  EXPECT_TRUE(fails_with(qmoe_call(2).run(with(q.inputs(), 14, f32({2, 3}, random_floats(6, 13)))), kQMoENode,
                         "router_weights shape [2,3] should be [2,4]"));
  EXPECT_TRUE(fails_with(qmoe_call(2).attr_int("use_sparse_mixer", 1).run(with(q.inputs(), 14, f32({2, 4}, random_floats(8, 13)))),
                         kQMoENode, "router_weights given with use_sparse_mixer"));
  EXPECT_TRUE(fails_with(qmoe_call(2).run(with(q.inputs(), 17, f32({1}, {1.0f}))), kQMoENode,
                         "input 17 (an FP8 activation scale) is not supported"));
}

TEST(QMoE, BadMxfp4InputsAreErrorsNamingTheNode) {
  const QuantMoE q;
  OpCall call("QMoE", 1, "com.microsoft");
  call.attr_int("k", 2).attr_string("activation_type", "relu").attr_string("quant_type", "fp4");
  // fp4 codes: [E, N, K / 2] with float8e8m0 scales per 32 inputs; hidden 64, inter 32.
  Tensor x = f32({2, 64}, random_floats(128, 14));
  Tensor fc1 = random_u8({4, 32, 32}, 15), fc2 = random_u8({4, 64, 16}, 16);
  const Tensor s1 = random_u8({4, 32, 2}, 17, DType::kF8E8M0), s2 = random_u8({4, 64, 1}, 18, DType::kF8E8M0);
  const Tensor g = f32({4}, {1, 1, 1, 1});
  const std::vector<Tensor> ok = {x, q.router, fc1, s1, Tensor(), fc2, s2, Tensor(), Tensor(), Tensor(), Tensor(),
                                  Tensor(), Tensor(), Tensor(), Tensor(), g, g};
  EXPECT_TRUE(call.run(ok).is_ok());
  EXPECT_TRUE(fails_with(call.run(with(ok, 16, Tensor())), kQMoENode, "quant_type fp4 needs input fc2_global_scale"));
  EXPECT_TRUE(fails_with(call.run(with(ok, 3, f32({4, 32, 2}, random_floats(256, 19)))), kQMoENode,
                         "fc1_scales must be float8e8m0, got float32"));
  EXPECT_TRUE(fails_with(call.run(with(ok, 11, random_u8({4, 32, 1}, 20))), kQMoENode, "fc1_zero_points given with quant_type fp4"));
  EXPECT_TRUE(fails_with(call.attr_int("block_size", 16).run(ok), kQMoENode, "quant_type fp4 needs block_size 32, got 16"));
}

}  // namespace
}  // namespace onnx_genai::testing
