// The device fusions (fusion_passes.h). A fusion rewrites the first node of its pattern in place
// (its position already has every input the fused node reads, and every reader of the pattern's
// output comes later) and detaches the others, which eliminate_dead_nodes then drops: the node
// order stays topological without re-sorting. The sibling fusion is the exception: its new Split
// must stand between the joined projection and the first reader of any sibling, which may precede
// the other siblings, so it re-sorts the graph (Graph::finalize). That keeps every link the plan
// reads: a value read inside an If branch is one of the If node's implicit inputs, which finalize
// links like explicit ones; the branch nodes' own links to it never outlive loading, where the
// enclosing graph's finalize rebuilds its values' links from its own nodes.
#include "runtime/fusion_passes.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ops/op.h"
#include "ops/schema/fused_matmul.h"
#include "ops/schema/quantized_matmul.h"
#include "runtime/graph_edit.h"

namespace onnx_genai {

namespace {

using P = MatMulNBitsParams;
constexpr const char* kMicrosoft = "com.microsoft";

bool is_op(const Node* node, const char* domain, const char* op_type, size_t outputs = 1) {
  return node != nullptr && node->domain == domain && node->op_type == op_type && node->outputs.size() == outputs &&
         node->outputs[0] != nullptr;
}

// Whether `v` is read by exactly `readers`, once each, and is no graph output: the fused node
// may then stop producing it.
bool read_only_by(const Graph& graph, const Value* v, std::initializer_list<const Node*> readers) {
  if (graph.is_output(v) || v->consumers.size() != readers.size()) return false;
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
bool has_kernel(const Node& node, DeviceType kernels, std::span<const DType> input_dtypes) {
  return OpRegistry::instance().find_kernel(node, kernels, input_dtypes).is_ok();
}

bool has_kernel(const Node& node, DeviceType kernels) {
  std::vector<DType> dtypes;
  for (const Value* in : node.inputs) dtypes.push_back(in != nullptr ? in->dtype : DType::kUndefined);
  return has_kernel(node, kernels, dtypes);
}

// `node` produces `out` (whose producer was detached) in place of its output 0.
void take_output(Node* node, Value* out) {
  node->outputs[0]->producer = nullptr;
  node->outputs[0] = out;
  out->producer = node;
}

bool is_matmul_nbits(const Node* node) { return is_op(node, kMicrosoft, "MatMulNBits"); }

// Two MatMulNBits quantised alike over the same A: equal K, bits, block_size and accuracy_level,
// no g_idx, no input past the bias. Their weights' rows then hold the same bytes per output.
bool same_quantization(const Node& a, const Node& b) {
  if (a.input(P::kA) == nullptr || a.input(P::kA) != b.input(P::kA)) return false;
  for (const Node* node : {&a, &b}) {
    if (node->input(P::kGIdx) != nullptr || node->inputs.size() > P::kBias + 1) return false;
  }
  for (const char* name : {"K", "block_size", "accuracy_level"}) {
    if (a.attrs.get_int(name, 0) != b.attrs.get_int(name, 0)) return false;
  }
  return a.attrs.get_int("bits", 4) == b.attrs.get_int("bits", 4);
}

// Weights `a` of a projection with `na` outputs and `b` of one with `nb`: both absent, or both
// constant with one whole-byte dtype and equal dims except along `axis`, where each output owns
// the same count of entries. Joined along `axis`, b's output i is then the join's output na + i.
bool same_output_layout(const Value* a, const Value* b, int axis, int64_t na, int64_t nb) {
  if (a == nullptr || b == nullptr) return a == nullptr && b == nullptr;
  if (!a->is_constant() || !b->is_constant() || na <= 0 || nb <= 0) return false;
  const Shape& sa = a->initializer.shape();
  const Shape& sb = b->initializer.shape();
  const DType dtype = a->initializer.dtype();
  if (dtype != b->initializer.dtype() || dtype_bits(dtype) % 8 != 0 || sa.rank() != sb.rank() || sa.rank() <= axis) {
    return false;
  }
  for (int d = 0; d < sa.rank(); ++d) {
    if (d != axis && sa[d] != sb[d]) return false;
  }
  return sa[axis] % na == 0 && sb[axis] % nb == 0 && sa[axis] / na == sb[axis] / nb;
}

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

// Row i of every weight input of `gate` and `up` must sit at the same bytes (4- or 8-bit weights of
// equal N, quantised alike, the same optional inputs), all constant.
bool interleavable(const Node& gate, const Node& up) {
  const int64_t n = gate.attrs.get_int("N", 0);
  if (n != up.attrs.get_int("N", 0) || !same_quantization(gate, up)) return false;
  return std::all_of(std::begin(kWeightSlots), std::end(kWeightSlots), [&](int slot) {
    const auto i = static_cast<size_t>(slot);
    return same_output_layout(gate.input(i), up.input(i), 0, n, n);
  });
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
    set_input(fused, i, add_constant(graph, fused->input(i)->name + "/swiglu_interleaved", std::move(rows)));
  }
  fused->domain = MatMulNBitsSwiGLUParams::kDomain;
  fused->op_type = MatMulNBitsSwiGLUParams::kOpType;
  fused->opset = 1;
  take_output(fused, y);
  release_unread(graph, replaced);
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

namespace {

// A projection of activation A (input 0) by constant weights, as the sibling fusion sees it.
struct Projection {
  Node* node = nullptr;
  int64_t n = 0;                // output width
  int n_axis = 0;               // the axis of each weight input along which its outputs run
  std::vector<size_t> weight_slots;
};

// MatMulNBits keeps B, scales, zero points and bias output-major (axis 0); MatMul(A, W) counts a
// 2-D weight W [K, N] along axis 1.
std::optional<Projection> as_projection(Node* node) {
  if (node == nullptr || node->input(0) == nullptr) return std::nullopt;
  if (is_matmul_nbits(node)) {
    return Projection{node, node->attrs.get_int("N", 0), 0, {P::kB, P::kScales, P::kZeroPoints, P::kBias}};
  }
  if (!is_op(node, "", "MatMul") || node->inputs.size() != 2) return std::nullopt;
  const Value* w = node->inputs[1];
  if (w == nullptr || !w->is_constant() || w->initializer.rank() != 2) return std::nullopt;
  return Projection{node, w->initializer.shape()[1], 1, {1}};
}

// Whether `other` computes what `leader` computes, from the same A, for other output columns.
bool joinable(const Projection& leader, const Projection& other) {
  const Node& a = *leader.node;
  const Node& b = *other.node;
  if (a.domain != b.domain || a.op_type != b.op_type || a.input(0) != b.input(0)) return false;
  if (is_matmul_nbits(&a) && !same_quantization(a, b)) return false;
  return std::all_of(leader.weight_slots.begin(), leader.weight_slots.end(), [&](size_t slot) {
    return same_output_layout(a.input(slot), b.input(slot), leader.n_axis, leader.n, other.n);
  });
}

// `leader` and the readers of its A that can join it, none already taken, leader first.
std::vector<Projection> siblings_of(const Projection& leader, const std::set<const Node*>& taken) {
  std::vector<Projection> group{leader};
  for (Node* reader : leader.node->input(0)->consumers) {
    const bool seen = std::any_of(group.begin(), group.end(), [&](const Projection& p) { return p.node == reader; });
    if (seen || taken.count(reader) != 0) continue;
    std::optional<Projection> candidate = as_projection(reader);
    if (candidate && joinable(leader, *candidate)) group.push_back(*candidate);
  }
  return group;
}

// Split reads its sizes from input 1 from this opset on (before, from an attribute).
constexpr int kSplitSizesAsInput = 13;

std::unique_ptr<Node> split_along_last_axis(std::string name) {
  auto split = std::make_unique<Node>();
  split->name = std::move(name);
  split->op_type = "Split";
  split->opset = kSplitSizesAsInput;
  split->attrs.set("axis", Attribute{.kind = Attribute::Kind::kInt, .i = -1});
  return split;
}

// The joined node keeps the leader's op, opset and input dtypes, so the leader's kernel lookup
// answers for it; the Split cuts values of the leader's output dtype.
bool device_runs_joined(const Projection& leader, DeviceType kernels) {
  const DType split_inputs[] = {leader.node->outputs[0]->dtype, DType::kI64};
  return has_kernel(*leader.node, kernels) && has_kernel(*split_along_last_axis(""), kernels, split_inputs);
}

// `parts` (dims equal except along `axis`) joined along `axis`: for each index of the dims
// before `axis`, each part's run of bytes in turn.
Result<Tensor> join(const std::vector<const Tensor*>& parts, int axis) {
  std::vector<int64_t> dims = parts[0]->shape().dims();
  dims[static_cast<size_t>(axis)] = 0;
  for (const Tensor* part : parts) dims[static_cast<size_t>(axis)] += part->shape()[axis];
  OG_ASSIGN_OR_RETURN(Tensor joined, Tensor::allocate(parts[0]->dtype(), Shape(std::move(dims))));
  const int64_t outer = joined.shape().numel(0, axis);
  auto* dst = static_cast<char*>(joined.raw());
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor* part : parts) {
      const auto run = static_cast<size_t>(part->nbytes() / outer);
      std::memcpy(dst, static_cast<const char*>(part->raw()) + o * run, run);
      dst += run;
    }
  }
  return joined;
}

// The leader becomes one node over the joined weights, where it stands; a new Split (ordered by
// the caller's re-sort) gives each sibling's output value back, so their readers are untouched.
Status join_siblings(Graph& graph, const std::vector<Projection>& group) {
  Node* joined = group[0].node;
  std::vector<std::pair<size_t, Tensor>> weights;
  std::vector<Value*> replaced;
  for (size_t slot : group[0].weight_slots) {
    if (joined->input(slot) == nullptr) continue;
    std::vector<const Tensor*> parts;
    for (const Projection& p : group) {
      parts.push_back(&p.node->input(slot)->initializer);
      replaced.push_back(p.node->input(slot));
    }
    OG_ASSIGN_OR_RETURN(Tensor weight, join(parts, group[0].n_axis));
    weights.emplace_back(slot, std::move(weight));
  }
  std::vector<int64_t> widths;
  std::vector<Value*> outputs;
  for (const Projection& p : group) {
    widths.push_back(p.n);
    outputs.push_back(p.node->outputs[0]);
  }
  for (size_t i = 1; i < group.size(); ++i) detach(group[i].node);
  for (auto& [slot, weight] : weights) {
    set_input(joined, slot, add_constant(graph, joined->input(slot)->name + "/joined", std::move(weight)));
  }
  int64_t width = 0;
  for (int64_t w : widths) width += w;
  if (is_matmul_nbits(joined)) joined->attrs.set("N", Attribute{.kind = Attribute::Kind::kInt, .i = width});
  Value* product = add_fresh_value(graph, outputs[0]->name + "/joined");
  product->dtype = outputs[0]->dtype;
  take_output(joined, product);

  Node* split = graph.add_node(split_along_last_axis(joined->name + "/split"));
  const auto count = static_cast<int64_t>(widths.size());
  Value* sizes = add_constant(graph, joined->name + "/split_sizes", Tensor::from_vector(Shape{count}, widths));
  split->inputs = {product, sizes};
  for (Value* in : split->inputs) in->consumers.push_back(split);
  split->outputs = outputs;
  for (Value* out : outputs) out->producer = split;
  release_unread(graph, replaced);
  return Status::ok();
}

}  // namespace

Result<int> fuse_sibling_projections(Graph& graph, DeviceType kernels) {
  std::vector<std::vector<Projection>> groups;
  std::set<const Node*> taken;
  // A node joins the group of the first earlier node it can join (the checks are equalities), so
  // each group's leader is its first member in node order.
  for (const auto& owned : graph.nodes()) {
    const std::optional<Projection> leader = as_projection(owned.get());
    if (!leader || taken.count(leader->node) != 0) continue;
    std::vector<Projection> group = siblings_of(*leader, taken);
    for (const Projection& p : group) taken.insert(p.node);
    if (group.size() >= 2 && device_runs_joined(*leader, kernels)) groups.push_back(std::move(group));
  }
  for (const std::vector<Projection>& group : groups) OG_RETURN_IF_ERROR(join_siblings(graph, group));
  if (!groups.empty()) OG_RETURN_IF_ERROR(graph.finalize(graph.outer()));
  return static_cast<int>(groups.size());
}

namespace {

using NM = RmsNormMatMulNBitsParams;

// An RMS norm whose normalised output only one product reads, as the norm fusion takes it.
struct NormMatch {
  Node* product = nullptr;
  Value* skip = nullptr;  // null for the norms without one
  Value* sum = nullptr;   // the Skip norm's x + skip where read (or a graph output), else null
  float epsilon = 0;
};

// Absent, or neither read nor a graph output: the fused node need not produce it.
bool unread(const Graph& graph, const Value* v) {
  return v == nullptr || (v->consumers.empty() && !graph.is_output(v));
}

// `v` is a vector of `k` elements: a constant, or a value whose dims say so.
bool is_vector_of(const Value* v, int64_t k) {
  if (v->is_constant()) return v->initializer.shape() == Shape{k};
  return v->dims && v->dims->size() == 1 && (*v->dims)[0].known() && (*v->dims)[0].value == k;
}

// The norm's parts: SkipSimplifiedLayerNormalization (x, skip, gamma) with its mean and
// inv_std_var unread, or SimplifiedLayerNormalization / RMSNormalization (x, gamma) over the last
// axis, inv_std_var unread (RMSNormalization computes what SimplifiedLayerNormalization does).
// No bias: decoders have none. Fills m.skip, m.sum and m.epsilon; false where `norm` is none.
bool match_norm_parts(const Graph& graph, const Node& norm, NormMatch& m) {
  const size_t n_in = norm.inputs.size();
  if (norm.outputs.empty() || norm.outputs[0] == nullptr) return false;
  if (norm.domain == kMicrosoft && norm.op_type == "SkipSimplifiedLayerNormalization") {
    if (n_in < 3 || norm.input(3) != nullptr || n_in > 4 || norm.inputs[1] == nullptr) return false;
    if (norm.outputs.size() > 4 || !unread(graph, norm.outputs.size() > 1 ? norm.outputs[1] : nullptr) ||
        !unread(graph, norm.outputs.size() > 2 ? norm.outputs[2] : nullptr)) {
      return false;
    }
    m.skip = norm.inputs[1];
    m.sum = norm.outputs.size() > 3 && !unread(graph, norm.outputs[3]) ? norm.outputs[3] : nullptr;
    m.epsilon = norm.attrs.get_float("epsilon", 1e-12f);
    return true;
  }
  const bool simplified =
      (norm.domain == kMicrosoft || norm.domain.empty()) && norm.op_type == "SimplifiedLayerNormalization";
  const bool rms = norm.domain.empty() && norm.op_type == "RMSNormalization";
  if (!simplified && !rms) return false;
  if (n_in < 2 || norm.input(2) != nullptr || n_in > 3 || norm.outputs.size() > 2) return false;
  if (!unread(graph, norm.outputs.size() > 1 ? norm.outputs[1] : nullptr)) return false;
  const Value* x = norm.inputs[0];
  const int64_t axis = norm.attrs.get_int("axis", -1);
  const bool last_axis = axis == -1 || (x != nullptr && x->dims && axis == static_cast<int64_t>(x->dims->size()) - 1);
  if (!last_axis || norm.attrs.get_int("stash_type", 1) != 1) return false;
  m.epsilon = norm.attrs.get_float("epsilon", 1e-5f);
  return true;
}

// The norm's scale: input 2 of the Skip norm, 1 of the others.
Value* gamma_of(const Node& norm, const NormMatch& m) { return norm.input(m.skip != nullptr ? 2 : 1); }

// The norm and its product: y read only by one MatMulNBits or MatMulNBitsSwiGLU (4 or 8 bits) as
// A, whose other inputs no node computes (so the fused node may stand where the norm stands).
std::optional<NormMatch> match_norm_matmul(const Graph& graph, const Node& norm) {
  NormMatch m;
  if (!match_norm_parts(graph, norm, m) || norm.inputs[0] == nullptr || gamma_of(norm, m) == nullptr) {
    return std::nullopt;
  }
  m.product = sole_reader(graph, norm.outputs[0]);
  const bool swiglu = is_op(m.product, MatMulNBitsSwiGLUParams::kDomain, MatMulNBitsSwiGLUParams::kOpType);
  if (!is_matmul_nbits(m.product) && !swiglu) return std::nullopt;
  const Node& product = *m.product;
  if (product.inputs[0] != norm.outputs[0] || product.input(P::kGIdx) != nullptr ||
      product.inputs.size() > P::kBias + 1) {
    return std::nullopt;
  }
  const int64_t bits = product.attrs.get_int("bits", 4);
  if ((bits != 4 && bits != 8) || !is_vector_of(gamma_of(norm, m), product.attrs.get_int("K", 0))) return std::nullopt;
  for (size_t i = 1; i < product.inputs.size(); ++i) {
    if (product.inputs[i] != nullptr && product.inputs[i]->producer != nullptr) return std::nullopt;
  }
  return m;
}

// The fused node `norm` becomes: the norm's inputs, the product's weights, their attributes.
Node fused_norm_matmul(const Node& norm, const NormMatch& m) {
  Node fused;
  fused.name = m.product->name;
  fused.domain = NM::kDomain;
  fused.op_type = NM::kOpType;
  fused.opset = 1;
  fused.inputs = {norm.inputs[0], m.skip, gamma_of(norm, m)};
  fused.inputs.insert(fused.inputs.end(), m.product->inputs.begin() + 1, m.product->inputs.end());
  fused.outputs = {m.product->outputs[0]};
  if (m.sum != nullptr) fused.outputs.push_back(m.sum);
  fused.attrs = m.product->attrs;
  fused.attrs.set("epsilon", Attribute{.kind = Attribute::Kind::kFloat, .f = m.epsilon});
  const bool swiglu = m.product->op_type == MatMulNBitsSwiGLUParams::kOpType;
  fused.attrs.set("swiglu", Attribute{.kind = Attribute::Kind::kInt, .i = swiglu ? 1 : 0});
  return fused;
}

// `norm` becomes `fused` where it stands (its inputs are ready there, the product's weights
// everywhere, and every reader of the product's output follows the product); the product goes.
void replace_norm(Node* norm, Node fused, Node* product) {
  detach(product);
  for (Value* in : norm->all_inputs()) {
    if (in == nullptr) continue;
    auto it = std::find(in->consumers.begin(), in->consumers.end(), norm);
    if (it != in->consumers.end()) in->consumers.erase(it);
  }
  for (Value* out : norm->outputs) {
    if (out != nullptr && out->producer == norm) out->producer = nullptr;
  }
  Node& n = *norm;
  n.name = std::move(fused.name);
  n.domain = std::move(fused.domain);
  n.op_type = std::move(fused.op_type);
  n.opset = fused.opset;
  n.attrs = std::move(fused.attrs);
  n.inputs = std::move(fused.inputs);
  n.outputs = std::move(fused.outputs);
  for (Value* in : n.inputs) {
    if (in != nullptr) in->consumers.push_back(norm);
  }
  for (Value* out : n.outputs) out->producer = norm;
}

}  // namespace

int fuse_norm_matmul(Graph& graph, DeviceType kernels) {
  std::vector<Node*> nodes;
  for (const auto& owned : graph.nodes()) nodes.push_back(owned.get());
  int fused = 0;
  for (Node* norm : nodes) {
    const std::optional<NormMatch> m = match_norm_matmul(graph, *norm);
    if (!m) continue;
    Node candidate = fused_norm_matmul(*norm, *m);
    if (!has_kernel(candidate, kernels)) continue;
    replace_norm(norm, std::move(candidate), m->product);
    ++fused;
  }
  return fused;
}

Result<int> fuse_for_device(Graph& graph, DeviceType kernels) {
  // Biases first: a projection's bias is part of the SwiGLU and of the siblings' joined weights.
  // SwiGLU before siblings: a gate/up pair joined into one MatMulNBits and a Split would no longer
  // match the SwiGLU pattern, whose one node also replaces the Sigmoid and both Muls; the
  // MatMulNBitsSwiGLU it makes is no projection the sibling pass joins.
  const int biases = fuse_matmul_nbits_bias(graph, kernels);
  OG_ASSIGN_OR_RETURN(const int mlps, fuse_matmul_nbits_swiglu(graph, kernels));
  OG_ASSIGN_OR_RETURN(const int siblings, fuse_sibling_projections(graph, kernels));
  // Norms last: each then meets the one node (joined projections, a SwiGLU MLP) that reads it.
  const int norms = fuse_norm_matmul(graph, kernels);
  graph.eliminate_dead_nodes();
  return biases + mlps + siblings + norms;
}

}  // namespace onnx_genai
