// The device fusions (runtime/fusion_passes.h) on small decoder-MLP and sibling-projection
// graphs, without a GPU: the passes run for the CPU's kernels (which include the fused op's
// reference kernel), then the fused graph is checked node by node, left alone where a
// precondition fails, and run in a CPU session against the unfused graph. Sessions themselves
// fuse only for devices with their own kernels: CPU and stand-in sessions keep the model's nodes.
#include "runtime/fusion_passes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
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
constexpr int kF32 = onnx::TensorProto::FLOAT;
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
    } else if (dtype == kF32) {
      const float v = value(rng);
      bytes.append(reinterpret_cast<const char*>(&v), 4);
    } else {
      const uint16_t bits = Float16::from_float(value(rng));
      bytes.append(reinterpret_cast<const char*>(&bits), 2);
    }
  }
  t->set_raw_data(bytes);
}

// One projection `name` of `input`: MatMulNBits (4-bit) or MatMul with a [K, N] weight, with
// knobs that break one precondition each.
struct ProjectionSpec {
  std::string name;
  std::string input = "x";
  int dtype = kF16;  // of the input, the scales, the float zero points, the bias and a MatMul weight
  int64_t k = 64, n = 24, block = 32, accuracy_level = 0, bits = 4;
  enum class ZeroPoints { kNone, kPacked, kFloat } zero_points = ZeroPoints::kNone;
  bool bias = true;            // an Add of a constant [N] after the product
  bool bias_2d = false;        // that constant is [1, N]: no MatMulNBits bias
  bool bias_first = false;     // Add(bias, product)
  bool weights_input = false;  // B (or W) is a graph input, not a constant
};

// The weight inputs of MatMulNBits `p`, made here; returns the node's inputs.
std::vector<std::string> add_quantized_weights(ModelBuilder& b, const ProjectionSpec& p, std::mt19937& rng) {
  const int64_t blocks = (p.k + p.block - 1) / p.block;
  std::vector<std::string> inputs{p.input, p.name + ".B", p.name + ".scales"};
  if (p.weights_input) {
    b.input(p.name + ".B", kU8, {p.n, blocks, p.block * p.bits / 8});
  } else {
    add_initializer(b, p.name + ".B", kU8, {p.n, blocks, p.block * p.bits / 8}, rng);
  }
  add_initializer(b, p.name + ".scales", p.dtype, {p.n * blocks}, rng);
  if (p.zero_points == ProjectionSpec::ZeroPoints::kPacked) {
    // Each row padded to a byte.
    add_initializer(b, p.name + ".zp", kU8, {p.n, (blocks * p.bits + 7) / 8}, rng);
  } else if (p.zero_points == ProjectionSpec::ZeroPoints::kFloat) {
    add_initializer(b, p.name + ".zp", p.dtype, {p.n * blocks}, rng);
  }
  if (p.zero_points != ProjectionSpec::ZeroPoints::kNone) inputs.push_back(p.name + ".zp");
  return inputs;
}

// Adds projection `p` (quantized: MatMulNBits, else MatMul) and its bias; returns its output.
std::string add_projection(ModelBuilder& b, const ProjectionSpec& p, bool quantized, std::mt19937& rng) {
  const std::string product = p.name + ".product";
  if (quantized) {
    auto& node = b.node("MatMulNBits", add_quantized_weights(b, p, rng), {product}, p.name);
    node.set_domain("com.microsoft");
    for (const auto& [attr, v] : {std::pair<const char*, int64_t>{"K", p.k}, {"N", p.n}, {"bits", p.bits},
                                  {"block_size", p.block}, {"accuracy_level", p.accuracy_level}}) {
      ModelBuilder::attr_int(node, attr, v);
    }
  } else {
    if (p.weights_input) {
      b.input(p.name + ".W", p.dtype, {p.k, p.n});
    } else {
      add_initializer(b, p.name + ".W", p.dtype, {p.k, p.n}, rng);
    }
    b.node("MatMul", {p.input, p.name + ".W"}, {product}, p.name);
  }
  if (!p.bias) return product;
  const std::string bias = p.name + ".bias";
  add_initializer(b, bias, p.dtype, p.bias_2d ? std::vector<int64_t>{1, p.n} : std::vector<int64_t>{p.n}, rng);
  b.node("Add", p.bias_first ? std::vector<std::string>{bias, product} : std::vector<std::string>{product, bias},
         {p.name + ".sum"});
  return p.name + ".sum";
}

std::shared_ptr<Model> load(const ModelBuilder& b, const std::string& name) {
  auto owner = std::make_shared<std::string>(b.bytes());
  auto model = load_onnx_model_from_memory(reinterpret_cast<const uint8_t*>(owner->data()), owner->size(), owner, ".",
                                           name);
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  EXPECT_TRUE(infer_types_and_check_support(*(*model)->graph).is_ok());
  return *model;
}

std::shared_ptr<Model> mlp_model(const MlpSpec& s) {
  std::mt19937 rng(7);
  ModelBuilder b;
  auto* ms = b.model().add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  b.input("x", kF16, {-1, s.k}, {"m"});
  const auto projection = [&](const std::string& name, int64_t block) {
    ProjectionSpec p{.name = name, .k = s.k, .n = s.n, .block = block, .accuracy_level = s.accuracy_level};
    if (s.zero_points) p.zero_points = ProjectionSpec::ZeroPoints::kPacked;
    p.bias = s.biases, p.bias_2d = s.bias_2d && name == "gate", p.bias_first = s.swapped;
    p.weights_input = s.up_weights_input && name == "up";
    return add_projection(b, p, true, rng);
  };
  const std::string g = projection("gate", s.block);
  const std::string u = projection("up", s.up_block);
  b.node("Sigmoid", {g}, {"sig"});
  b.node("Mul", s.swapped ? std::vector<std::string>{"sig", g} : std::vector<std::string>{g, "sig"}, {"silu"});
  b.node("Mul", s.swapped ? std::vector<std::string>{u, "silu"} : std::vector<std::string>{"silu", u}, {"y"});
  b.output("y", kF16);
  if (s.gate_also_output) b.output(g, kF16);
  if (s.sigmoid_also_output) b.output("sig", kF16);
  return load(b, "mlp.onnx");
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
  // Where gate and up still fit one node, the sibling pass joins them (one MatMulNBits, a Split).
  const auto no_swiglu = [](MlpSpec s, const char* why, bool siblings_joined) {
    std::shared_ptr<Model> model = mlp_model(s);
    auto fused = fuse_for_device(*model->graph, DeviceType::kCpu);
    ASSERT_TRUE(fused.is_ok()) << fused.status().message();
    EXPECT_EQ(count_ops(*model->graph, "MatMulNBitsSwiGLU"), 0) << why;
    EXPECT_EQ(count_ops(*model->graph, "Sigmoid"), 1) << why;
    EXPECT_EQ(count_ops(*model->graph, "MatMulNBits"), siblings_joined ? 1 : 2) << why;
    EXPECT_EQ(count_ops(*model->graph, "Split"), siblings_joined ? 1 : 0) << why;
  };
  MlpSpec s;
  s.gate_also_output = true;
  no_swiglu(s, "the gate product is also a graph output", true);
  s = MlpSpec{};
  s.sigmoid_also_output = true;
  no_swiglu(s, "the sigmoid is read elsewhere", true);
  s = MlpSpec{};
  s.up_block = 16;
  no_swiglu(s, "block sizes differ", false);
  s = MlpSpec{};
  s.up_weights_input = true;
  no_swiglu(s, "up's weights are not constant", false);
  s = MlpSpec{};
  s.bias_2d = true;
  no_swiglu(s, "the gate keeps its [1, N] Add, so its product has no SwiGLU shape (nor gate a bias)", false);
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

// A tensor for every input of `graph`, its symbolic dims `m`: floats in [-2, 2), random bytes.
std::vector<Tensor> random_inputs(const Graph& graph, int64_t m, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<Tensor> inputs;
  for (const Value* in : graph.inputs) {
    std::vector<int64_t> dims;
    for (const Dim& d : *in->dims) dims.push_back(d.known() ? d.value : m);
    Tensor t = Tensor::allocate(in->dtype, Shape(std::move(dims))).value();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (in->dtype == DType::kF32) {
        t.data<float>()[i] = dist(rng);
      } else if (in->dtype == DType::kF16) {
        t.data<Float16>()[i] = Float16(dist(rng));
      } else {
        t.data<uint8_t>()[i] = static_cast<uint8_t>(rng() & 0xFF);
      }
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

float element(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kF32 ? t.data<float>()[i] : static_cast<float>(t.data<Float16>()[i]);
}

// `model`'s outputs for `inputs` in a CPU session.
Result<std::vector<Tensor>> run_on_cpu(const std::shared_ptr<Model>& model, const std::vector<Tensor>& inputs) {
  OG_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::create(model, SessionOptions{}));
  return session->run(inputs);
}

// Every element of `got` within `relative` of `want`'s element, or of the rms for values near 0.
void expect_close(const Tensor& got, const Tensor& want, double relative, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double sq = 0;
  for (int64_t i = 0; i < want.numel(); ++i) sq += std::pow(element(want, i), 2);
  const double rms = std::sqrt(sq / static_cast<double>(std::max<int64_t>(1, want.numel())));
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float w = element(want, i);
    EXPECT_NEAR(element(got, i), w, relative * (std::fabs(w) + rms)) << what << " element " << i;
  }
}

// y of the fused and the unfused graph in CPU sessions. Both round the projections to f16; the
// fused op then rounds once where the graph's Sigmoid, Mul, Mul round three times, so the two
// are at most 2 f16 ulps (2^-10 relative each at worst) apart: 3e-3 of the value, or of the rms
// for values near 0.
void expect_fused_matches_unfused(const MlpSpec& s, int64_t m) {
  std::shared_ptr<Model> plain = mlp_model(s), fused = mlp_model(s);
  ASSERT_EQ(*fuse_for_device(*fused->graph, DeviceType::kCpu), 3);
  const std::vector<Tensor> x = random_inputs(*plain->graph, m, static_cast<unsigned>(m));
  auto want = run_on_cpu(plain, x), got = run_on_cpu(fused, x);
  ASSERT_TRUE(want.is_ok() && got.is_ok()) << want.status().message() << got.status().message();
  expect_close((*got)[0], (*want)[0], 3e-3, "M=" + std::to_string(m));
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

// Projections of x side by side, each output read by a Neg that follows it in the file, so a
// reader of one sibling precedes the next sibling (as q's Reshape precedes k_proj in torch exports).
std::shared_ptr<Model> siblings_model(const std::vector<ProjectionSpec>& projections, bool quantized) {
  std::mt19937 rng(11);
  ModelBuilder b;
  auto* ms = b.model().add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  const ProjectionSpec& first = projections[0];
  b.input("x", first.dtype, {-1, first.k}, {"m"});
  if (std::any_of(projections.begin(), projections.end(), [](const ProjectionSpec& p) { return p.input == "x2"; })) {
    b.input("x2", first.dtype, {-1, first.k}, {"m"});
  }
  for (const ProjectionSpec& p : projections) {
    b.node("Neg", {add_projection(b, p, quantized, rng)}, {p.name + ".y"});
    b.output(p.name + ".y", p.dtype);
  }
  return load(b, "siblings.onnx");
}

// q, k and v MatMulNBits of odd widths over K = 96 in blocks of 32: 3 blocks, so each row of
// packed zero points ends in a pad nibble.
std::vector<ProjectionSpec> qkv(ProjectionSpec::ZeroPoints zero_points, bool bias, int64_t accuracy_level = 0) {
  std::vector<ProjectionSpec> projections;
  for (const auto& [name, n] : {std::pair<const char*, int64_t>{"q", 12}, {"k", 7}, {"v", 5}}) {
    ProjectionSpec p{.name = name, .k = 96, .n = n, .block = 32, .accuracy_level = accuracy_level};
    p.zero_points = zero_points, p.bias = bias;
    projections.push_back(p);
  }
  return projections;
}

// How far a joined graph's outputs may be from the unjoined one's, relative to the value (or the
// rms near 0); 0 is bit for bit. One row (decode) and more rows (prefill) take different kernels.
struct Tolerance {
  double one_row = 0;
  double rows = 0;
};

// Every output of the graph as fuse_for_device leaves it against the model's graph with only its
// bias Adds fused (a bias inside MatMulNBits rounds once, where the Add rounds the product
// again), in CPU sessions at M = 1 and 5.
void expect_joined_matches_unjoined(const std::vector<ProjectionSpec>& spec, bool quantized, Tolerance tolerance) {
  std::shared_ptr<Model> plain = siblings_model(spec, quantized), joined = siblings_model(spec, quantized);
  fuse_matmul_nbits_bias(*plain->graph, DeviceType::kCpu);
  plain->graph->eliminate_dead_nodes();
  ASSERT_TRUE(fuse_for_device(*joined->graph, DeviceType::kCpu).is_ok());
  for (const int64_t m : {1, 5}) {
    const std::vector<Tensor> inputs = random_inputs(*plain->graph, m, static_cast<unsigned>(m));
    auto want = run_on_cpu(plain, inputs), got = run_on_cpu(joined, inputs);
    ASSERT_TRUE(want.is_ok() && got.is_ok()) << want.status().message() << got.status().message();
    const double relative = m == 1 ? tolerance.one_row : tolerance.rows;
    for (size_t i = 0; i < want->size(); ++i) {
      const Tensor& w = (*want)[i];
      const Tensor& g = (*got)[i];
      const std::string what = "M=" + std::to_string(m) + " output " + spec[i].name;
      if (relative > 0) {
        expect_close(g, w, relative, what);
        continue;
      }
      ASSERT_EQ(g.shape(), w.shape()) << what;
      EXPECT_EQ(std::memcmp(g.raw(), w.raw(), static_cast<size_t>(w.nbytes())), 0) << what << " differs";
    }
  }
}

// MatMulNBits on the CPU: one row (a GEMV) and int8 activations (accuracy_level 4) compute each
// output column alone from its weight row and A, so joining changes no bit; more rows in f32
// dequantise B in panels of columns whose edges move with the join, so a sum may round its last
// f32 bit differently and its f16 output move by one ulp (under 2^-10 of the value).
Tolerance quantized_tolerance(int64_t accuracy_level) { return {0, accuracy_level >= 4 ? 0 : 1e-3}; }

size_t position(const Graph& graph, const Node* node) {
  const auto& nodes = graph.nodes();
  return static_cast<size_t>(std::find_if(nodes.begin(), nodes.end(), [&](const auto& n) { return n.get() == node; }) -
                             nodes.begin());
}

TEST(FusionPasses, JoinsSiblingMatMulNBitsIntoOneNodeAndASplit) {
  using ZeroPoints = ProjectionSpec::ZeroPoints;
  const char* const slots[] = {"B", "scales", "zp", "g_idx", "bias"};  // MatMulNBits inputs 1 to 5
  for (const bool bias : {false, true}) {
    for (const ZeroPoints zero_points : {ZeroPoints::kNone, ZeroPoints::kPacked, ZeroPoints::kFloat}) {
      const std::vector<ProjectionSpec> spec = qkv(zero_points, bias);
      std::shared_ptr<Model> model = siblings_model(spec, true);
      Graph& graph = *model->graph;
      // Each joined weight's rows, in order: q's 12, k's 7, v's 5.
      std::map<std::string, std::vector<std::string>> rows;
      for (const ProjectionSpec& p : spec) {
        for (const char* slot : slots) {
          const Value* v = graph.find_value(p.name + "." + slot);
          for (int64_t r = 0; v != nullptr && r < p.n; ++r) rows[slot].push_back(row_bytes(v, p.n, r));
        }
      }
      const std::string why = std::string(bias ? "with" : "without") + " bias, zero points " +
                              std::to_string(static_cast<int>(zero_points));
      auto fused = fuse_for_device(graph, DeviceType::kCpu);
      ASSERT_TRUE(fused.is_ok()) << fused.status().message();
      EXPECT_EQ(*fused, (bias ? 3 : 0) + 1) << why << ": the bias Adds, then one group of siblings";
      EXPECT_EQ(count_ops(graph, "MatMulNBits"), 1) << why;
      EXPECT_EQ(count_ops(graph, "Add"), 0) << why;
      ASSERT_EQ(count_ops(graph, "Split"), 1) << why;
      const Node* split = graph.find_value("q.y")->producer->inputs[0]->producer;
      ASSERT_EQ(split->op_type, "Split") << why;
      const Node& joined = *split->inputs[0]->producer;
      EXPECT_EQ(joined.op_type, "MatMulNBits");
      EXPECT_EQ(joined.attrs.get_int("N", 0), 24);
      EXPECT_EQ(joined.inputs[0], graph.find_value("x"));
      EXPECT_EQ(joined.input(1)->initializer.shape(), (Shape{24, 3, 16}));
      for (size_t i = 0; i < std::size(slots); ++i) {
        const Value* v = joined.input(i + 1);
        EXPECT_EQ(v != nullptr, rows.count(slots[i]) != 0) << why << " input " << i + 1;
        for (int64_t r = 0; v != nullptr && r < 24; ++r) {
          const std::string& want = rows[slots[i]][static_cast<size_t>(r)];
          EXPECT_EQ(row_bytes(v, 24, r), want) << why << " " << slots[i] << " row " << r;
        }
      }
      EXPECT_EQ(split->attrs.get_int("axis", 0), -1);
      const Tensor& sizes = split->inputs[1]->initializer;
      EXPECT_EQ(std::vector<int64_t>(sizes.data<int64_t>(), sizes.data<int64_t>() + sizes.numel()),
                (std::vector<int64_t>{12, 7, 5}));
      for (size_t i = 0; i < spec.size(); ++i) {
        const Value* out = graph.find_value(spec[i].name + (bias ? ".sum" : ".product"));
        EXPECT_EQ(split->outputs[i], out) << "the Split gives back " << out->name;
        EXPECT_LT(position(graph, split), position(graph, out->consumers.at(0))) << "before its reader " << out->name;
      }
      EXPECT_FALSE(graph.find_value("k.B")->is_constant()) << "the replaced weights are released";
      EXPECT_FALSE(graph.find_value("v.scales")->is_constant());
    }
  }
}

// Each output column reads the same weight row and the same A as before the join.
TEST(FusionPasses, JoinedMatMulNBitsMatchTheUnjoinedGraph) {
  using ZeroPoints = ProjectionSpec::ZeroPoints;
  for (const int64_t level : {0, 4}) {
    for (const ZeroPoints zero_points : {ZeroPoints::kNone, ZeroPoints::kPacked, ZeroPoints::kFloat}) {
      for (const bool bias : {false, true}) {
        expect_joined_matches_unjoined(qkv(zero_points, bias, level), true, quantized_tolerance(level));
      }
    }
  }
}

TEST(FusionPasses, JoinsSiblingMatMulsAlongTheirColumns) {
  for (const int dtype : {kF32, kF16}) {
    std::vector<ProjectionSpec> spec;
    for (const auto& [name, n] : {std::pair<const char*, int64_t>{"q", 40}, {"k", 9}, {"v", 9}}) {
      spec.push_back(ProjectionSpec{.name = name, .dtype = dtype, .k = 64, .n = n});
    }
    std::shared_ptr<Model> model = siblings_model(spec, false);
    Graph& graph = *model->graph;
    std::vector<std::string> joined_rows(64);
    for (const ProjectionSpec& p : spec) {
      const Value* w = graph.find_value(p.name + ".W");
      for (int64_t r = 0; r < 64; ++r) joined_rows[static_cast<size_t>(r)] += row_bytes(w, 64, r);
    }
    auto fused = fuse_for_device(graph, DeviceType::kCpu);
    ASSERT_TRUE(fused.is_ok()) << fused.status().message();
    EXPECT_EQ(*fused, 1);
    EXPECT_EQ(count_ops(graph, "MatMul"), 1);
    EXPECT_EQ(count_ops(graph, "Split"), 1);
    EXPECT_EQ(count_ops(graph, "Add"), 3) << "the biases stay after the Split";
    const Value* w = graph.find_value("q.sum")->producer->inputs[0]->producer->inputs[0]->producer->inputs[1];
    ASSERT_TRUE(w->is_constant());
    EXPECT_EQ(w->initializer.shape(), (Shape{64, 58}));
    for (int64_t r = 0; r < 64; ++r) EXPECT_EQ(row_bytes(w, 64, r), joined_rows[static_cast<size_t>(r)]) << "row " << r;
    // The CPU GEMM may tile a 58-wide product differently from 40- and 9-wide ones, so a sum may
    // round in another order (on an AVX-512 machine all came out bit for bit): f32 within 1e-5 of
    // the value (or the rms), f16 within one ulp (2^-10).
    const double relative = dtype == kF32 ? 1e-5 : 1e-3;
    expect_joined_matches_unjoined(spec, false, {relative, relative});
  }
}

TEST(FusionPasses, LeavesSiblingsThatCannotShareOneNode) {
  using ZeroPoints = ProjectionSpec::ZeroPoints;
  struct Case {
    const char* why;
    std::vector<ProjectionSpec> projections;
    bool quantized = true;
    int groups = 0;
  };
  const ProjectionSpec q{.name = "q", .bias = false}, k{.name = "k", .bias = false}, v{.name = "v", .bias = false};
  ProjectionSpec k_block = k, k_input = k, k_x2 = k, k_float_zp = k, k_bias = k, q_packed_zp = q;
  k_block.block = 16, k_input.weights_input = true, k_x2.input = "x2", k_bias.bias = true;
  k_float_zp.zero_points = ZeroPoints::kFloat, q_packed_zp.zero_points = ZeroPoints::kPacked;
  const std::vector<Case> cases = {
      {"block sizes differ", {q, k_block}},
      {"k's B is a graph input", {q, k_input}},
      {"k reads another activation", {q, k_x2}},
      {"zero points packed and in floats", {q_packed_zp, k_float_zp}},
      {"only k has a bias", {q, k_bias}},
      {"k's MatMul weight is a graph input", {q, k_input}, false},
      {"q and v join without k, whose blocks differ", {q, k_block, v}, true, 1},
  };
  for (const Case& c : cases) {
    std::shared_ptr<Model> model = siblings_model(c.projections, c.quantized);
    Graph& graph = *model->graph;
    fuse_matmul_nbits_bias(graph, DeviceType::kCpu);
    auto joined = fuse_sibling_projections(graph, DeviceType::kCpu);
    ASSERT_TRUE(joined.is_ok()) << joined.status().message();
    EXPECT_EQ(*joined, c.groups) << c.why;
    graph.eliminate_dead_nodes();
    EXPECT_EQ(count_ops(graph, c.quantized ? "MatMulNBits" : "MatMul"),
              static_cast<int>(c.projections.size()) - c.groups) << c.why;
    EXPECT_EQ(count_ops(graph, "Split"), c.groups) << c.why;
    expect_joined_matches_unjoined(c.projections, c.quantized, quantized_tolerance(0));
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

// ---------------------------------------------------------------------------------------------
// The norm fusion: an RMS norm and the one projection node that reads it.

// x (+ skip) -> norm -> y -> its reader(s), with knobs that break one precondition each.
struct NormSpec {
  enum class Norm { kSkip, kSimplified, kRms } norm = Norm::kSkip;
  // One MatMulNBits; q/k/v MatMulNBits (joined first); a gate/up SwiGLU MLP (fused first); or a
  // MatMul with constant weights (no fusion).
  enum class Reader { kMatMulNBits, kSiblings, kSwiGLU, kMatMul } reader = Reader::kMatMulNBits;
  int dtype = kF16;
  int64_t bits = 4;
  bool sum_read = false;      // the Skip norm's sum is read (by a Neg)
  bool sum_output = false;    // the Skip norm's sum is a graph output
  bool y_read_twice = false;  // a Neg reads y too
  bool y_output = false;      // y is a graph output
  bool stats_read = false;    // the Skip norm's mean, or SimplifiedLayerNormalization's inv_std_var, is a graph output
};

constexpr int64_t kNormK = 64;

std::string describe(const NormSpec& s) {
  static const char* kNorms[] = {"Skip", "Simplified", "RMSNormalization"};
  static const char* kReaders[] = {"MatMulNBits", "siblings", "SwiGLU", "MatMul"};
  return std::string(kNorms[static_cast<int>(s.norm)]) + " -> " + kReaders[static_cast<int>(s.reader)] +
         (s.dtype == kF32 ? " f32" : " f16") + " bits=" + std::to_string(s.bits) + (s.sum_read ? " sum read" : "") +
         (s.sum_output ? " sum output" : "");
}

void attr_float(onnx::NodeProto& node, const std::string& name, float v) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

// The norm of `s`, writing y (and its other outputs where the spec reads them).
void add_norm(ModelBuilder& b, const NormSpec& s) {
  if (s.norm == NormSpec::Norm::kSkip) {
    b.input("skip", s.dtype, {-1, kNormK}, {"m"});
    std::vector<std::string> outputs{"y"};
    if (s.stats_read) outputs.push_back("mean");
    if (s.sum_read || s.sum_output) outputs = {"y", s.stats_read ? "mean" : "", "", "sum"};
    auto& norm = b.node("SkipSimplifiedLayerNormalization", {"x", "skip", "gamma"}, outputs, "norm");
    norm.set_domain("com.microsoft");
    attr_float(norm, "epsilon", 1e-6f);
    if (s.stats_read) b.output("mean", kF32);
    if (s.sum_read) b.node("Neg", {"sum"}, {"sum.neg"}), b.output("sum.neg", s.dtype);
    if (s.sum_output) b.output("sum", s.dtype);
    return;
  }
  const bool rms = s.norm == NormSpec::Norm::kRms;
  std::vector<std::string> outputs{"y"};
  if (s.stats_read) outputs.push_back("inv_std");
  auto& norm = b.node(rms ? "RMSNormalization" : "SimplifiedLayerNormalization", {"x", "gamma"}, outputs, "norm");
  attr_float(norm, "epsilon", 1e-5f);
  ModelBuilder::attr_int(norm, "axis", -1);
  if (s.stats_read) b.output("inv_std", kF32);
}

std::shared_ptr<Model> norm_model(const NormSpec& s) {
  std::mt19937 rng(13);
  ModelBuilder b(s.norm == NormSpec::Norm::kRms ? 23 : 17);  // RMSNormalization is opset 23
  auto* ms = b.model().add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  b.input("x", s.dtype, {-1, kNormK}, {"m"});
  add_initializer(b, "gamma", s.dtype, {kNormK}, rng);
  add_norm(b, s);
  const auto projection = [&](const std::string& name, int64_t n) {
    ProjectionSpec p{.name = name, .input = "y", .dtype = s.dtype, .k = kNormK, .n = n, .bits = s.bits};
    p.bias = false;
    return add_projection(b, p, s.reader != NormSpec::Reader::kMatMul, rng);
  };
  if (s.reader == NormSpec::Reader::kSiblings) {
    for (const auto& [name, n] : {std::pair<const char*, int64_t>{"q", 12}, {"k", 7}, {"v", 5}}) {
      b.node("Neg", {projection(name, n)}, {std::string(name) + ".y"});
      b.output(std::string(name) + ".y", s.dtype);
    }
  } else if (s.reader == NormSpec::Reader::kSwiGLU) {
    const std::string g = projection("gate", 24), u = projection("up", 24);
    b.node("Sigmoid", {g}, {"sig"});
    b.node("Mul", {g, "sig"}, {"silu"});
    b.node("Mul", {"silu", u}, {"mlp"});
    b.output("mlp", s.dtype);
  } else {
    b.output(projection("proj", 24), s.dtype);
  }
  if (s.y_read_twice) b.node("Neg", {"y"}, {"y.neg"}), b.output("y.neg", s.dtype);
  if (s.y_output) b.output("y", s.dtype);
  return load(b, "norm.onnx");
}

int count_norms(const Graph& graph) {
  return count_ops(graph, "SkipSimplifiedLayerNormalization") + count_ops(graph, "SimplifiedLayerNormalization") +
         count_ops(graph, "RMSNormalization");
}

// Every pass but the norm fusion, as fuse_for_device runs them.
void fuse_all_but_norms(Graph& graph) {
  fuse_matmul_nbits_bias(graph, DeviceType::kCpu);
  ASSERT_TRUE(fuse_matmul_nbits_swiglu(graph, DeviceType::kCpu).is_ok());
  ASSERT_TRUE(fuse_sibling_projections(graph, DeviceType::kCpu).is_ok());
  graph.eliminate_dead_nodes();
}

const Node* only_node(const Graph& graph, const std::string& op_type) {
  const Node* found = nullptr;
  for (const auto& node : graph.nodes()) {
    if (node->op_type != op_type) continue;
    if (found != nullptr) return nullptr;
    found = node.get();
  }
  return found;
}

TEST(FusionPasses, FusesTheNormIntoTheProjectionThatReadsIt) {
  using Norm = NormSpec::Norm;
  using Reader = NormSpec::Reader;
  for (const Norm norm : {Norm::kSkip, Norm::kSimplified, Norm::kRms}) {
    for (const Reader reader : {Reader::kMatMulNBits, Reader::kSiblings, Reader::kSwiGLU}) {
      for (const bool sum : {false, true}) {
        if (sum && norm != Norm::kSkip) continue;
        const NormSpec s{.norm = norm, .reader = reader, .sum_read = sum};
        std::shared_ptr<Model> model = norm_model(s);
        Graph& graph = *model->graph;
        ASSERT_TRUE(fuse_for_device(graph, DeviceType::kCpu).is_ok()) << describe(s);
        EXPECT_EQ(count_norms(graph), 0) << describe(s);
        EXPECT_EQ(count_ops(graph, "MatMulNBits") + count_ops(graph, "MatMulNBitsSwiGLU"), 0) << describe(s);
        const Node* fused = only_node(graph, "RmsNormMatMulNBits");
        ASSERT_NE(fused, nullptr) << describe(s);
        EXPECT_EQ(fused->domain, "onnx_genai");
        EXPECT_EQ(fused->input(0), graph.find_value("x"));
        EXPECT_EQ(fused->input(1), norm == Norm::kSkip ? graph.find_value("skip") : nullptr);
        EXPECT_EQ(fused->input(2), graph.find_value("gamma"));
        EXPECT_EQ(fused->attrs.get_int("swiglu", -1), reader == Reader::kSwiGLU ? 1 : 0) << describe(s);
        EXPECT_EQ(fused->attrs.get_int("N", 0), 24) << describe(s) << ": the output width (q/k/v joined: 12 + 7 + 5)";
        EXPECT_FLOAT_EQ(fused->attrs.get_float("epsilon", 0), norm == Norm::kSkip ? 1e-6f : 1e-5f);
        ASSERT_EQ(fused->outputs.size(), sum ? 2u : 1u) << describe(s);
        if (sum) {
          EXPECT_EQ(fused->outputs[1], graph.find_value("sum"));
        }
        if (reader == Reader::kMatMulNBits) {
          EXPECT_EQ(fused->outputs[0], graph.find_value("proj.product"));
        }
      }
    }
  }
}

// The fused node runs the norm's and the product's own CPU kernels: the unfused graph's outputs
// (the other fusions applied to both), bit for bit, at M = 1 and 5.
TEST(FusionPasses, FusedNormMatchesTheUnfusedGraphExactly) {
  using Norm = NormSpec::Norm;
  using Reader = NormSpec::Reader;
  std::vector<NormSpec> specs;
  for (const Norm norm : {Norm::kSkip, Norm::kSimplified, Norm::kRms}) {
    for (const Reader reader : {Reader::kMatMulNBits, Reader::kSiblings, Reader::kSwiGLU}) {
      for (const int64_t bits : {4, 8}) {
        specs.push_back({.norm = norm, .reader = reader, .bits = bits});
        if (norm != Norm::kSkip) continue;
        specs.push_back({.norm = norm, .reader = reader, .bits = bits, .sum_read = true});
        specs.push_back({.norm = norm, .reader = reader, .bits = bits, .sum_output = true});
      }
    }
    specs.push_back({.norm = norm, .dtype = kF32});
  }
  for (const NormSpec& s : specs) {
    std::shared_ptr<Model> plain = norm_model(s), fused = norm_model(s);
    fuse_all_but_norms(*plain->graph);
    ASSERT_TRUE(fuse_for_device(*fused->graph, DeviceType::kCpu).is_ok());
    ASSERT_EQ(count_ops(*fused->graph, "RmsNormMatMulNBits"), 1) << describe(s);
    ASSERT_EQ(count_norms(*plain->graph), 1) << describe(s);
    for (const int64_t m : {1, 5}) {
      const std::vector<Tensor> inputs = random_inputs(*plain->graph, m, static_cast<unsigned>(m));
      auto want = run_on_cpu(plain, inputs), got = run_on_cpu(fused, inputs);
      ASSERT_TRUE(want.is_ok() && got.is_ok())
          << describe(s) << ": " << want.status().message() << got.status().message();
      ASSERT_EQ(got->size(), want->size());
      for (size_t i = 0; i < want->size(); ++i) {
        const Tensor& w = (*want)[i];
        const Tensor& g = (*got)[i];
        ASSERT_EQ(g.shape(), w.shape()) << describe(s);
        EXPECT_EQ(std::memcmp(g.raw(), w.raw(), static_cast<size_t>(w.nbytes())), 0)
            << describe(s) << " M=" << m << " output " << i << " differs";
      }
    }
  }
}

TEST(FusionPasses, LeavesNormsThatCannotFuse) {
  using Norm = NormSpec::Norm;
  struct Case {
    const char* why;
    NormSpec spec;
  };
  const std::vector<Case> cases = {
      {"y is read twice", {.y_read_twice = true}},
      {"y is a graph output", {.y_output = true}},
      {"y is read by a MatMul", {.reader = NormSpec::Reader::kMatMul}},
      {"the Skip norm's mean is read", {.stats_read = true}},
      {"SimplifiedLayerNormalization's inv_std_var is read", {.norm = Norm::kSimplified, .stats_read = true}},
      {"y of an RMSNormalization is read twice", {.norm = Norm::kRms, .y_read_twice = true}},
  };
  for (const Case& c : cases) {
    std::shared_ptr<Model> model = norm_model(c.spec);
    Graph& graph = *model->graph;
    fuse_all_but_norms(graph);
    EXPECT_EQ(fuse_norm_matmul(graph, DeviceType::kCpu), 0) << c.why;
    graph.eliminate_dead_nodes();
    EXPECT_EQ(count_norms(graph), 1) << c.why;
    EXPECT_EQ(count_ops(graph, "RmsNormMatMulNBits"), 0) << c.why;
  }
}

// A norm with a bias (beta) is not an RMS norm this fusion takes.
TEST(FusionPasses, LeavesNormsWithABias) {
  NormSpec s{.norm = NormSpec::Norm::kSimplified};
  std::shared_ptr<Model> model = norm_model(s);
  Graph& graph = *model->graph;
  Node* norm = graph.find_value("y")->producer;
  ASSERT_NE(norm, nullptr);
  Value* gamma = graph.find_value("gamma");
  norm->inputs.push_back(gamma);  // gamma stands in as the bias: a value of the right shape
  gamma->consumers.push_back(norm);
  EXPECT_EQ(fuse_norm_matmul(graph, DeviceType::kCpu), 0);
}

}  // namespace
}  // namespace onnx_genai
