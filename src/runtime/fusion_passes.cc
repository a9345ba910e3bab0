// The device fusions (fusion_passes.h). A fusion rewrites the first node of its pattern in place
// (its position already has every input the fused node reads, and every reader of the pattern's
// output comes later) and detaches the others, which eliminate_dead_nodes then drops: the node
// order stays topological without re-finalizing the graph, which would also drop the links of
// values read inside If branches.
#include "runtime/fusion_passes.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/op.h"
#include "ops/schema/fused_matmul.h"
#include "ops/schema/quantized_matmul.h"

namespace onnx_genai {

namespace {

using P = MatMulNBitsParams;
constexpr const char* kMicrosoft = "com.microsoft";

bool is_op(const Node* node, const char* domain, const char* op_type, size_t outputs = 1) {
  return node != nullptr && node->domain == domain && node->op_type == op_type && node->outputs.size() == outputs &&
         node->outputs[0] != nullptr;
}

bool is_graph_output(const Graph& graph, const Value* v) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), v) != graph.outputs.end();
}

// Whether `v` is read by exactly `readers`, once each, and is no graph output: the fused node
// may then stop producing it.
bool read_only_by(const Graph& graph, const Value* v, std::initializer_list<const Node*> readers) {
  if (is_graph_output(graph, v) || v->consumers.size() != readers.size()) return false;
  return std::all_of(readers.begin(), readers.end(),
                     [&](const Node* r) { return std::count(v->consumers.begin(), v->consumers.end(), r) == 1; });
}

// The only node reading `v` where read_only_by holds for it, else null.
Node* sole_reader(const Graph& graph, const Value* v) {
  return v->consumers.size() == 1 && read_only_by(graph, v, {v->consumers[0]}) ? v->consumers[0] : nullptr;
}

// The operand of the two-input `node` that is not `v`, or null unless `v` is exactly one of them.
Value* other_operand(const Node& node, const Value* v) {
  if (node.inputs.size() != 2 || (node.inputs[0] == v) == (node.inputs[1] == v)) return nullptr;
  return node.inputs[0] == v ? node.inputs[1] : node.inputs[0];
}

// A fusion applies only where the device has a kernel for what it makes.
bool has_kernel(const Node& node, DeviceType kernels) {
  std::vector<DType> dtypes;
  for (const Value* in : node.inputs) dtypes.push_back(in != nullptr ? in->dtype : DType::kUndefined);
  return OpRegistry::instance().find_kernel(node, kernels, dtypes).is_ok();
}

// Unlinks `node` from what it reads and writes and empties it: eliminate_dead_nodes removes it.
void detach(Node* node) {
  for (Value* in : node->all_inputs()) {
    if (in != nullptr) std::erase(in->consumers, node);
  }
  for (Value* out : node->outputs) {
    if (out != nullptr && out->producer == node) out->producer = nullptr;
  }
  node->inputs.clear();
  node->implicit_inputs.clear();
  node->outputs.clear();
}

// Input `slot` of `node` becomes `v` (inputs grow with omitted ones), consumer lists kept right.
void set_input(Node* node, size_t slot, Value* v) {
  if (node->inputs.size() <= slot) node->inputs.resize(slot + 1, nullptr);
  if (Value* old = node->inputs[slot]) {
    auto it = std::find(old->consumers.begin(), old->consumers.end(), node);
    if (it != old->consumers.end()) old->consumers.erase(it);
  }
  node->inputs[slot] = v;
  if (v != nullptr) v->consumers.push_back(node);
}

// `node` produces `out` (whose producer was detached) in place of its output 0.
void take_output(Node* node, Value* out) {
  node->outputs[0]->producer = nullptr;
  node->outputs[0] = out;
  out->producer = node;
}

bool is_matmul_nbits(const Node* node) { return is_op(node, kMicrosoft, "MatMulNBits"); }

}  // namespace

int fuse_matmul_nbits_bias(Graph& graph, DeviceType kernels) {
  int fused = 0;
  for (const auto& owned : graph.nodes()) {
    Node* matmul = owned.get();
    if (!is_matmul_nbits(matmul) || matmul->input(P::kBias) != nullptr || matmul->inputs.size() > P::kBias + 1) continue;
    Value* product = matmul->outputs[0];
    Node* add = sole_reader(graph, product);
    if (!is_op(add, "", "Add")) continue;
    Value* bias = other_operand(*add, product);
    const Shape bias_shape{matmul->attrs.get_int("N", 0)};
    if (bias == nullptr || !bias->is_constant() || bias->initializer.dtype() != product->dtype ||
        bias->initializer.shape() != bias_shape) {
      continue;
    }
    Node candidate = *matmul;
    candidate.inputs.resize(P::kBias + 1, nullptr);
    candidate.inputs[P::kBias] = bias;
    if (!has_kernel(candidate, kernels)) continue;
    Value* sum = add->outputs[0];
    detach(add);
    set_input(matmul, P::kBias, bias);
    take_output(matmul, sum);
    ++fused;
  }
  return fused;
}

namespace {

// The nodes of g = gate(A), u = up(A), Y = out_mul(gate_mul(g, sigmoid(g)), u).
struct SwiGLUMatch {
  Node* gate = nullptr;
  Node* up = nullptr;
  Node* sigmoid = nullptr;
  Node* gate_mul = nullptr;
  Node* out_mul = nullptr;
};

constexpr int kWeightSlots[] = {P::kB, P::kScales, P::kZeroPoints, P::kBias};

// Row i of every weight input of `gate` and `up` must sit at the same bytes (equal shapes and
// dtypes, rows evenly split by N), all constant; the same optional inputs; no g_idx.
bool interleavable(const Node& gate, const Node& up) {
  const int64_t n = gate.attrs.get_int("N", 0);
  if (n <= 0 || gate.input(P::kA) != up.input(P::kA) || gate.input(P::kGIdx) != nullptr ||
      up.input(P::kGIdx) != nullptr || gate.inputs.size() > P::kBias + 1 || up.inputs.size() > P::kBias + 1) {
    return false;
  }
  for (const char* name : {"K", "N", "block_size", "accuracy_level"}) {
    if (gate.attrs.get_int(name, 0) != up.attrs.get_int(name, 0)) return false;
  }
  if (gate.attrs.get_int("bits", 4) != 4 || up.attrs.get_int("bits", 4) != 4) return false;
  for (int slot : kWeightSlots) {
    const Value* g = gate.input(static_cast<size_t>(slot));
    const Value* u = up.input(static_cast<size_t>(slot));
    if ((g == nullptr) != (u == nullptr)) return false;
    if (g == nullptr) continue;
    if (!g->is_constant() || !u->is_constant()) return false;
    const Tensor& gt = g->initializer;
    if (gt.dtype() != u->initializer.dtype() || gt.shape() != u->initializer.shape() || gt.shape().rank() < 1 ||
        gt.shape()[0] % n != 0 || gt.nbytes() % n != 0) {
      return false;
    }
  }
  return true;
}

std::optional<SwiGLUMatch> match_swiglu(const Graph& graph, Node* sigmoid) {
  if (!is_op(sigmoid, "", "Sigmoid") || sigmoid->inputs.size() != 1 || sigmoid->inputs[0] == nullptr) return std::nullopt;
  SwiGLUMatch m;
  m.sigmoid = sigmoid;
  Value* g = sigmoid->inputs[0];
  m.gate_mul = sole_reader(graph, sigmoid->outputs[0]);
  if (!is_op(m.gate_mul, "", "Mul") || other_operand(*m.gate_mul, sigmoid->outputs[0]) != g) return std::nullopt;
  m.out_mul = sole_reader(graph, m.gate_mul->outputs[0]);
  if (!is_op(m.out_mul, "", "Mul")) return std::nullopt;
  Value* u = other_operand(*m.out_mul, m.gate_mul->outputs[0]);
  if (u == nullptr || sole_reader(graph, u) != m.out_mul || !read_only_by(graph, g, {m.sigmoid, m.gate_mul})) {
    return std::nullopt;
  }
  m.gate = g->producer;
  m.up = u->producer;
  if (!is_matmul_nbits(m.gate) || !is_matmul_nbits(m.up) || m.gate == m.up || !interleavable(*m.gate, *m.up)) {
    return std::nullopt;
  }
  return m;
}

// Rows of `gate` and `up` alternately: row 2i is gate's row i, row 2i + 1 up's (N rows each).
Result<Tensor> interleave_rows(const Tensor& gate, const Tensor& up, int64_t n) {
  std::vector<int64_t> dims = gate.shape().dims();
  dims[0] *= 2;
  OG_ASSIGN_OR_RETURN(Tensor rows, Tensor::allocate(gate.dtype(), Shape(std::move(dims))));
  const auto row_bytes = static_cast<size_t>(gate.nbytes() / n);
  auto* dst = static_cast<char*>(rows.raw());
  const auto* g = static_cast<const char*>(gate.raw());
  const auto* u = static_cast<const char*>(up.raw());
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + 2 * i * row_bytes, g + i * row_bytes, row_bytes);
    std::memcpy(dst + (2 * i + 1) * row_bytes, u + i * row_bytes, row_bytes);
  }
  return rows;
}

// A new initializer the graph owns, named after `like` (made unique).
Value* add_constant(Graph& graph, const std::string& like, Tensor value) {
  std::string name = like + "/swiglu_interleaved";
  while (graph.find_value(name) != nullptr) name += "_";
  Value* v = graph.add_value(name);
  v->dtype = value.dtype();
  v->initializer = std::move(value);
  return v;
}

// The gate node becomes the fused node, where it stands (its inputs are ready there, and Y's
// readers all follow the out Mul, which follows it); the other four are detached.
Status fuse(Graph& graph, const SwiGLUMatch& m) {
  Node* fused = m.gate;
  const int64_t n = fused->attrs.get_int("N", 0);
  std::vector<std::pair<int, Tensor>> weights;
  std::vector<Value*> replaced;
  for (int slot : kWeightSlots) {
    const auto i = static_cast<size_t>(slot);
    if (fused->input(i) == nullptr) continue;
    OG_ASSIGN_OR_RETURN(Tensor rows, interleave_rows(fused->input(i)->initializer, m.up->input(i)->initializer, n));
    weights.emplace_back(slot, std::move(rows));
    replaced.insert(replaced.end(), {fused->input(i), m.up->input(i)});
  }
  Value* y = m.out_mul->outputs[0];
  for (Node* gone : {m.up, m.sigmoid, m.gate_mul, m.out_mul}) detach(gone);
  for (auto& [slot, rows] : weights) {
    const auto i = static_cast<size_t>(slot);
    set_input(fused, i, add_constant(graph, fused->input(i)->name, std::move(rows)));
  }
  fused->domain = MatMulNBitsSwiGLUParams::kDomain;
  fused->op_type = MatMulNBitsSwiGLUParams::kOpType;
  fused->opset = 1;
  take_output(fused, y);
  // Weights nothing reads any more are released (a copied model would otherwise hold them twice).
  for (Value* v : replaced) {
    if (v->consumers.empty() && !is_graph_output(graph, v)) v->initializer = Tensor();
  }
  return Status::ok();
}

}  // namespace

Result<int> fuse_matmul_nbits_swiglu(Graph& graph, DeviceType kernels) {
  int fused = 0;
  std::vector<Node*> sigmoids;
  for (const auto& node : graph.nodes()) {
    if (is_op(node.get(), "", "Sigmoid")) sigmoids.push_back(node.get());
  }
  for (Node* sigmoid : sigmoids) {
    const std::optional<SwiGLUMatch> m = match_swiglu(graph, sigmoid);
    if (!m) continue;
    // The fused node reads what the gate node reads (interleaved weights keep their dtypes).
    Node candidate = *m->gate;
    candidate.domain = MatMulNBitsSwiGLUParams::kDomain;
    candidate.op_type = MatMulNBitsSwiGLUParams::kOpType;
    candidate.opset = 1;
    if (!has_kernel(candidate, kernels)) continue;
    OG_RETURN_IF_ERROR(fuse(graph, *m));
    ++fused;
  }
  return fused;
}

Result<int> fuse_for_device(Graph& graph, DeviceType kernels) {
  const int biases = fuse_matmul_nbits_bias(graph, kernels);
  OG_ASSIGN_OR_RETURN(const int mlps, fuse_matmul_nbits_swiglu(graph, kernels));
  graph.eliminate_dead_nodes();
  return biases + mlps;
}

}  // namespace onnx_genai
