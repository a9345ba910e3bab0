// The device fusions (runtime/fusion_passes.h) on small decoder-MLP graphs, without a GPU: the
// passes run for the CPU's kernels (which include the fused op's reference kernel), then the
// fused graph is checked node by node, left alone where a precondition fails, and run in a CPU
// session against the unfused graph. Sessions themselves fuse only for devices with their own
// kernels: CPU and stand-in sessions keep the model's nodes.
#include "runtime/fusion_passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "onnx/model.h"
#include "onnx_genai/session.h"
#include "onnx_model_builder.h"
#include "runtime/graph_passes.h"
#include "runtime/stand_in_device.h"

namespace onnx_genai {
namespace {

using testing::ModelBuilder;
constexpr int kF16 = onnx::TensorProto::FLOAT16;
constexpr int kU8 = onnx::TensorProto::UINT8;

// g = gate(x) (+ bg), u = up(x) (+ bu), y = (g * sigmoid(g)) * u, with knobs that break one
// precondition each.
struct MlpSpec {
  int64_t k = 64, n = 24, block = 32, up_block = 32, accuracy_level = 0;
  bool zero_points = false, biases = true;
  bool swapped = false;           // every commutative operand order reversed
  bool gate_also_output = false;  // g is a graph output too
  bool sigmoid_also_output = false;
  bool up_weights_input = false;  // up's B is a graph input (not a constant)
  bool bias_2d = false;           // the gate bias is [1, N]: not a MatMulNBits bias
};

void add_initializer(ModelBuilder& b, const std::string& name, int dtype, std::vector<int64_t> dims,
                     std::mt19937& rng) {
  onnx::TensorProto* t = b.graph().add_initializer();
  t->set_name(name);
  t->set_data_type(dtype);
  int64_t count = 1;
  for (int64_t d : dims) t->add_dims(d), count *= d;
  std::string bytes;
  std::uniform_real_distribution<float> value(-0.1f, 0.1f);
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == kU8) {
      bytes.push_back(static_cast<char>(rng() & 0xFF));
      continue;
    }
    const uint16_t bits = Float16::from_float(value(rng));
    bytes.append(reinterpret_cast<const char*>(&bits), 2);
  }
  t->set_raw_data(bytes);
}

// One MatMulNBits named `name` over x, its weights made here; returns its output.
std::string add_projection(ModelBuilder& b, const MlpSpec& s, const std::string& name, int64_t block,
                           std::mt19937& rng) {
  const int64_t blocks = (s.k + block - 1) / block;
  std::vector<std::string> inputs{"x", name + ".B", name + ".scales"};
  if (s.up_weights_input && name == "up") {
    b.input(name + ".B", kU8, {s.n, blocks, block / 2});
  } else {
    add_initializer(b, name + ".B", kU8, {s.n, blocks, block / 2}, rng);
  }
  add_initializer(b, name + ".scales", kF16, {s.n * blocks}, rng);
  if (s.zero_points) {
    add_initializer(b, name + ".zp", kU8, {s.n, (blocks + 1) / 2}, rng);
    inputs.push_back(name + ".zp");
  }
  auto& node = b.node("MatMulNBits", inputs, {name + ".product"}, name);
  node.set_domain("com.microsoft");
  for (const auto& [attr, v] : {std::pair<const char*, int64_t>{"K", s.k}, {"N", s.n}, {"bits", 4}, {"block_size", block},
                                {"accuracy_level", s.accuracy_level}}) {
    ModelBuilder::attr_int(node, attr, v);
  }
  if (!s.biases) return name + ".product";
  add_initializer(b, name + ".bias", kF16, s.bias_2d && name == "gate" ? std::vector<int64_t>{1, s.n} : std::vector<int64_t>{s.n}, rng);
  const std::string p = name + ".product", bias = name + ".bias";
  b.node("Add", s.swapped ? std::vector<std::string>{bias, p} : std::vector<std::string>{p, bias}, {name + ".sum"});
  return name + ".sum";
}

std::shared_ptr<Model> mlp_model(const MlpSpec& s) {
  std::mt19937 rng(7);
  ModelBuilder b;
  auto* ms = b.model().add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  b.input("x", kF16, {-1, s.k}, {"m"});
  const std::string g = add_projection(b, s, "gate", s.block, rng);
  const std::string u = add_projection(b, s, "up", s.up_block, rng);
  b.node("Sigmoid", {g}, {"sig"});
  b.node("Mul", s.swapped ? std::vector<std::string>{"sig", g} : std::vector<std::string>{g, "sig"}, {"silu"});
  b.node("Mul", s.swapped ? std::vector<std::string>{u, "silu"} : std::vector<std::string>{"silu", u}, {"y"});
  b.output("y", kF16);
  if (s.gate_also_output) b.output(g, kF16);
  if (s.sigmoid_also_output) b.output("sig", kF16);
  auto owner = std::make_shared<std::string>(b.bytes());
  auto model = load_onnx_model_from_memory(reinterpret_cast<const uint8_t*>(owner->data()), owner->size(), owner, ".",
                                           "mlp.onnx");
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  EXPECT_TRUE(infer_types_and_check_support(*(*model)->graph).is_ok());
  return *model;
}

int count_ops(const Graph& graph, const std::string& op_type) {
  int count = 0;
  for (const auto& node : graph.nodes()) count += node->op_type == op_type;
  return count;
}

// Row r of an initializer split into `rows` rows of equal bytes.
std::string row_bytes(const Value* v, int64_t rows, int64_t r) {
  const size_t bytes = static_cast<size_t>(v->initializer.nbytes() / rows);
  return std::string(static_cast<const char*>(v->initializer.raw()) + r * bytes, bytes);
}

TEST(FusionPasses, FusesBiasesAndGateUpSwiGLUIntoOneNode) {
  for (const bool swapped : {false, true}) {
    for (const bool zero_points : {false, true}) {
      MlpSpec s;
      s.swapped = swapped, s.zero_points = zero_points;
      std::shared_ptr<Model> model = mlp_model(s);
      Graph& graph = *model->graph;
      std::vector<std::string> gate_rows, up_rows;
      for (int64_t i = 0; i < s.n; ++i) {
        gate_rows.push_back(row_bytes(graph.find_value("gate.B"), s.n, i));
        up_rows.push_back(row_bytes(graph.find_value("up.B"), s.n, i));
      }
      const std::string up_bias_first = row_bytes(graph.find_value("up.bias"), s.n, 0);
      auto fused = fuse_for_device(graph, DeviceType::kCpu);
      ASSERT_TRUE(fused.is_ok()) << fused.status().message();
      EXPECT_EQ(*fused, 3) << "two bias Adds and one MLP";
      ASSERT_EQ(graph.nodes().size(), 1u);
      const Node& node = *graph.nodes()[0];
      EXPECT_EQ(node.domain, "onnx_genai");
      EXPECT_EQ(node.op_type, "MatMulNBitsSwiGLU");
      EXPECT_EQ(node.attrs.get_int("N", 0), s.n) << "N is the output width";
      EXPECT_EQ(node.outputs[0], graph.find_value("y"));
      ASSERT_EQ(node.inputs.size(), 6u);
      EXPECT_EQ(node.inputs[0], graph.find_value("x"));
      EXPECT_EQ(node.inputs[3] != nullptr, zero_points);
      EXPECT_EQ(node.inputs[4], nullptr);
      ASSERT_NE(node.inputs[5], nullptr);
      const Value* b = node.inputs[1];
      ASSERT_TRUE(b->is_constant());
      EXPECT_EQ(b->initializer.shape(), (Shape{2 * s.n, 2, s.block / 2}));
      for (int64_t i = 0; i < s.n; ++i) {
        EXPECT_EQ(row_bytes(b, 2 * s.n, 2 * i), gate_rows[i]) << "row " << 2 * i << " is gate row " << i;
        EXPECT_EQ(row_bytes(b, 2 * s.n, 2 * i + 1), up_rows[i]) << "row " << 2 * i + 1 << " is up row " << i;
      }
      EXPECT_EQ(row_bytes(node.inputs[5], 2 * s.n, 1), up_bias_first);
      EXPECT_FALSE(graph.find_value("gate.B")->is_constant()) << "the replaced weights are released";
      EXPECT_FALSE(graph.find_value("up.scales")->is_constant());
    }
  }
}

TEST(FusionPasses, LeavesTheMlpWhenAPreconditionFails) {
  const auto no_swiglu = [](MlpSpec s, const char* why, int sigmoids_left = 1) {
    std::shared_ptr<Model> model = mlp_model(s);
    auto fused = fuse_for_device(*model->graph, DeviceType::kCpu);
    ASSERT_TRUE(fused.is_ok()) << fused.status().message();
    EXPECT_EQ(count_ops(*model->graph, "MatMulNBitsSwiGLU"), 0) << why;
    EXPECT_EQ(count_ops(*model->graph, "Sigmoid"), sigmoids_left) << why;
    EXPECT_EQ(count_ops(*model->graph, "MatMulNBits"), 2) << why;
  };
  MlpSpec s;
  s.gate_also_output = true;
  no_swiglu(s, "the gate product is also a graph output");
  s = MlpSpec{};
  s.sigmoid_also_output = true;
  no_swiglu(s, "the sigmoid is read elsewhere");
  s = MlpSpec{};
  s.up_block = 16;
  no_swiglu(s, "block sizes differ");
  s = MlpSpec{};
  s.up_weights_input = true;
  no_swiglu(s, "up's weights are not constant");
  s = MlpSpec{};
  s.bias_2d = true;
  no_swiglu(s, "the gate keeps its [1, N] Add, so its product has no SwiGLU shape");
}

TEST(FusionPasses, BiasFusionNeedsAVectorOfN) {
  MlpSpec s;
  s.bias_2d = true;
  s.up_block = 16;  // no SwiGLU fusion either: only the bias passes are seen
  std::shared_ptr<Model> model = mlp_model(s);
  EXPECT_EQ(fuse_matmul_nbits_bias(*model->graph, DeviceType::kCpu), 1) << "up's [N] bias only";
  model->graph->eliminate_dead_nodes();
  EXPECT_EQ(count_ops(*model->graph, "Add"), 1);
}

// y of the fused and the unfused graph in CPU sessions. Both round the projections to f16; the
// fused op then rounds once where the graph's Sigmoid, Mul, Mul round three times, so the two
// are at most 2 f16 ulps (2^-10 relative each at worst) apart: 3e-3 of the value, or of the rms
// for values near 0.
void expect_fused_matches_unfused(const MlpSpec& s, int64_t m) {
  std::shared_ptr<Model> plain = mlp_model(s), fused = mlp_model(s);
  ASSERT_EQ(*fuse_for_device(*fused->graph, DeviceType::kCpu), 3);
  Tensor x = Tensor::allocate(DType::kF16, Shape{m, s.k}).value();
  std::mt19937 rng(static_cast<unsigned>(m));
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<Float16>()[i] = Float16(dist(rng));
  std::vector<Tensor> outputs;
  for (const auto& model : {plain, fused}) {
    auto session = Session::create(model, SessionOptions{});
    ASSERT_TRUE(session.is_ok()) << session.status().message();
    auto out = (*session)->run({x});
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    outputs.push_back((*out)[0]);
  }
  ASSERT_EQ(outputs[0].shape(), outputs[1].shape());
  double sq = 0;
  for (int64_t i = 0; i < outputs[0].numel(); ++i) sq += std::pow(static_cast<float>(outputs[0].data<Float16>()[i]), 2);
  const double rms = std::sqrt(sq / static_cast<double>(outputs[0].numel()));
  for (int64_t i = 0; i < outputs[0].numel(); ++i) {
    const float want = static_cast<float>(outputs[0].data<Float16>()[i]);
    const float got = static_cast<float>(outputs[1].data<Float16>()[i]);
    EXPECT_NEAR(got, want, 3e-3 * (std::fabs(want) + rms)) << "M=" << m << " element " << i;
  }
}

TEST(FusionPasses, FusedGraphMatchesTheUnfusedOneOnTheCpu) {
  for (const int64_t level : {0, 4}) {
    for (const bool zero_points : {false, true}) {
      MlpSpec s;
      s.k = 200, s.n = 40, s.accuracy_level = level, s.zero_points = zero_points;  // K not a whole block
      s.block = s.up_block = 64;
      for (const int64_t m : {1, 5}) expect_fused_matches_unfused(s, m);
    }
  }
}

// The session criterion: a CPU session, and a stand-in device running the CPU kernels (whose
// tokens must equal the CPU's), keep every node of the model.
TEST(FusionPasses, SessionsOnTheCpuKernelsDoNotFuse) {
  std::shared_ptr<Model> model = mlp_model(MlpSpec{});
  ASSERT_TRUE(Session::create(model, SessionOptions{}).is_ok());
  EXPECT_EQ(count_ops(*model->graph, "Sigmoid"), 1);
  testing::StandInMemory memory;
  testing::StandInScope scope(memory);
  SessionOptions on_device;
  on_device.device = Device{DeviceType::kCuda, 0};
  auto session = Session::create(model, on_device);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  EXPECT_EQ(scope.opened, 1);
  EXPECT_EQ(count_ops(*model->graph, "Sigmoid"), 1);
  EXPECT_EQ(count_ops(*model->graph, "Add"), 2);
}

}  // namespace
}  // namespace onnx_genai
