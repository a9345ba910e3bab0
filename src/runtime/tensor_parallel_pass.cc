// Sharding a decoder graph for tensor parallelism (tensor_parallel_pass.h).
#include "runtime/tensor_parallel_pass.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ops/schema/attention.h"
#include "ops/schema/collective.h"
#include "ops/schema/moe.h"
#include "runtime/generation_passes.h"
#include "runtime/graph_edit.h"
#include "runtime/tensor_parallel_weights.h"

namespace onnx_genai {

namespace {

using G = GqaParams;

struct Rank {
  int64_t rank = 0, world = 1;
  // Rank r's share [r n/N, (r+1) n/N) of n things (n % N == 0 checked by the caller).
  std::pair<int64_t, int64_t> share(int64_t n) const { return {rank * n / world, (rank + 1) * n / world}; }
};

Attribute int_attribute(int64_t value) { return Attribute{.kind = Attribute::Kind::kInt, .i = value}; }

bool is_gqa(const Node& node) { return node.op_type == "GroupQueryAttention" && node.domain == "com.microsoft"; }

Status indivisible(const Node& node, const char* what, int64_t count, const Rank& r) {
  return OG_ERROR(node.describe(), ": ", what, " ", count, " cannot be split evenly across ", r.world,
                  " tensor-parallel ranks");
}

// `producer` now writes a new value, which `node` reads to give `out` (its former output, whose
// name, readers and place among the graph outputs stay). Returns the new value.
Value* take_over_output(Graph& graph, Node& producer, std::unique_ptr<Node> node) {
  Value* out = producer.outputs[0];
  Value* part = add_fresh_value(graph, out->name + "/part");
  part->dtype = out->dtype;
  producer.outputs[0] = part;
  part->producer = &producer;
  Node* added = graph.add_node(std::move(node));
  set_input(added, 0, part);
  added->outputs.insert(added->outputs.begin(), out);
  out->producer = added;
  return part;
}

std::unique_ptr<Node> collective(const Value& after, const char* op_type) {
  auto node = std::make_unique<Node>();
  node->name = after.name + "/" + op_type;
  node->op_type = op_type;
  node->domain = CollectiveOps::kDomain;
  node->opset = 1;
  return node;
}

void add_all_reduce(Graph& graph, Node& producer) {
  Value* sum = producer.outputs[0];
  take_over_output(graph, producer, collective(*sum, CollectiveOps::kAllReduce))->dims = sum->dims;
}

// The projection computing `v`, possibly through an Add of a constant bias; only `reader` may
// read `v` (and the projection's output only the bias Add).
struct ColumnSource {
  Node* projection = nullptr;
  Node* bias = nullptr;
};

Result<ColumnSource> column_source(const Graph& graph, Value* v, const Node& reader) {
  const auto fail = [&] {
    return OG_ERROR(reader.describe(), ": input '", v->name,
                    "' is not a projection (MatMul with constant weights or MatMulNBits, optionally + a constant "
                    "bias) read only here; the tensor-parallel pass supports the model builder's genai layouts");
  };
  if (v->consumers.size() != 1 || graph.is_output(v) || v->producer == nullptr) return fail();
  ColumnSource source;
  Node* node = v->producer;
  if (node->op_type == "Add" && node->domain.empty() && node->inputs.size() == 2) {
    const int bias_slot = node->inputs[1] != nullptr && node->inputs[1]->is_constant() ? 1 : 0;
    Value* bias = node->inputs[static_cast<size_t>(bias_slot)];
    Value* x = node->inputs[static_cast<size_t>(1 - bias_slot)];
    if (bias == nullptr || !bias->is_constant() || bias->initializer.rank() != 1 || x == nullptr ||
        x->consumers.size() != 1 || graph.is_output(x)) {
      return fail();
    }
    source.bias = node;
    node = x->producer;
  }
  if (!is_projection(node)) return fail();
  source.projection = node;
  return source;
}

Status keep_columns(Graph& graph, const ColumnSource& source, const IndexRanges& ranges) {
  OG_RETURN_IF_ERROR(keep_output_columns(graph, *source.projection, ranges));
  if (source.bias == nullptr) return Status::ok();
  const size_t slot = source.bias->inputs[1]->is_constant() ? 1 : 0;
  Value* old = source.bias->inputs[slot];
  OG_ASSIGN_OR_RETURN(Tensor cut, keep_along_axis(old->initializer, 0, ranges));
  set_input(source.bias, slot, add_constant(graph, old->name + "/shard", std::move(cut)));
  release_unread(graph, {old});
  return Status::ok();
}

// A past or present KV value [B, kv_heads, T, head_size] of this rank keeps kv_heads / N heads.
void shrink_kv_dims(Value* v, int64_t kv_heads) {
  if (v != nullptr && v->dims && v->dims->size() == 4) (*v->dims)[1] = Dim{.value = kv_heads};
}

// This rank's columns of q, k and v heads packed side by side in one projection's output.
IndexRanges packed_qkv_columns(int64_t heads, int64_t kv_heads, int64_t head_size, const Rank& r) {
  const auto [h0, h1] = r.share(heads);
  const auto [k0, k1] = r.share(kv_heads);
  const int64_t k_base = heads * head_size, v_base = (heads + kv_heads) * head_size;
  return {{h0 * head_size, h1 * head_size}, {k_base + k0 * head_size, k_base + k1 * head_size},
          {v_base + k0 * head_size, v_base + k1 * head_size}};
}

// A 1-D int64 constant, or null.
const Tensor* int64_constant(const Value* v) {
  return v != nullptr && v->is_constant() && v->initializer.dtype() == DType::kI64 && v->initializer.rank() == 1
             ? &v->initializer
             : nullptr;
}

// Per-head steps between a projection and attention, which a rank's heads pass through as they
// are: com.microsoft RotaryEmbedding (models with position_ids) and Qwen3's q / k norms,
// Reshape(x, [.., -1, head_size]) -> SimplifiedLayerNormalization or RMSNormalization over
// head_size -> Reshape(.., [.., width]). Only a rotary's num_heads (when set) and the norm's last
// Reshape width shrink.
struct PerHeadPath {
  Value* source = nullptr;     // what the projection gives
  std::vector<Node*> rotaries;
  Node* widen = nullptr;       // the Reshape closing a head norm, if any
};

PerHeadPath per_head_path(const Graph& graph, Value* v) {
  const auto single_reader = [&](const Value* x) { return x != nullptr && x->consumers.size() == 1 && !graph.is_output(x); };
  const auto is_onnx = [](const Node* n, const char* op) { return n != nullptr && n->op_type == op && n->domain.empty(); };
  PerHeadPath path{v};
  for (Node* n = v->producer; n != nullptr; n = path.source->producer) {
    if (n->op_type == "RotaryEmbedding" && n->domain == "com.microsoft" && single_reader(n->inputs[0])) {
      path.rotaries.push_back(n);
      path.source = n->inputs[0];
      continue;
    }
    if (path.widen != nullptr || !is_onnx(n, "Reshape") || !int64_constant(n->inputs[1]) || !single_reader(n->inputs[0])) break;
    Node* norm = n->inputs[0]->producer;
    if (!(is_onnx(norm, "SimplifiedLayerNormalization") || is_onnx(norm, "RMSNormalization")) || norm->outputs.size() != 1 ||
        !single_reader(norm->inputs[0])) {
      break;
    }
    Node* split_heads = norm->inputs[0]->producer;
    if (!is_onnx(split_heads, "Reshape") || !single_reader(split_heads->inputs[0])) break;
    path.widen = n;
    path.source = split_heads->inputs[0];
  }
  return path;
}

// The Reshape closing a head norm: its target width (the last entry, the others 0 or -1) becomes
// this rank's share; so does a rotary's head count where it names one.
Status shrink_per_head_path(Graph& graph, const PerHeadPath& path, int64_t width, const Rank& r) {
  for (Node* rotary : path.rotaries) {
    const int64_t heads = rotary->attrs.get_int("num_heads", 0);
    if (heads != 0) rotary->attrs.set("num_heads", int_attribute(heads / r.world));
  }
  if (path.widen == nullptr) return Status::ok();
  Node& widen = *path.widen;
  Value* old = widen.inputs[1];
  const Tensor& shape = *int64_constant(old);
  std::vector<int64_t> dims(shape.data<int64_t>(), shape.data<int64_t>() + shape.numel());
  if (dims.empty() || dims.back() != width || std::any_of(dims.begin(), dims.end() - 1, [](int64_t d) { return d > 0; })) {
    return OG_ERROR(widen.describe(), ": reshapes the heads to a shape other than [.., ", width, "]");
  }
  dims.back() = width / r.world;
  const auto n = static_cast<int64_t>(dims.size());
  set_input(&widen, 1, add_constant(graph, old->name + "/shard", Tensor::from_vector<int64_t>(Shape{n}, std::move(dims))));
  release_unread(graph, {old});
  return Status::ok();
}

// q/k/v packed in one projection, then Split(packed, [q, kv, kv]) into the attention's three
// inputs: the projection keeps this rank's columns of each part and the split sizes shrink.
// Returns the head size.
Result<int64_t> shard_split_qkv(Graph& graph, Node& split, Node& gqa, const std::array<Value*, 3>& parts, int64_t heads,
                       int64_t kv_heads, const Rank& r) {
  const Tensor* sizes = split.inputs.size() == 2 ? int64_constant(split.inputs[1]) : nullptr;
  if (split.op_type != "Split" || !split.domain.empty() || sizes == nullptr || sizes->numel() != 3 ||
      split.outputs.size() != 3 || parts[0] != split.outputs[0] || parts[1] != split.outputs[1] || parts[2] != split.outputs[2]) {
    return OG_ERROR(gqa.describe(), ": its query, key and value come from ", split.describe(),
                    ", which is not a Split of one projection into them with constant sizes");
  }
  const int64_t q_width = sizes->data<int64_t>()[0], kv_width = sizes->data<int64_t>()[1];
  const int64_t head_size = q_width / heads;
  if (q_width % heads != 0 || kv_width != kv_heads * head_size || sizes->data<int64_t>()[2] != kv_width) {
    return OG_ERROR(split.describe(), ": sizes are not whole query and key/value heads");
  }
  OG_ASSIGN_OR_RETURN(ColumnSource packed, column_source(graph, split.inputs[0], split));
  OG_RETURN_IF_ERROR(keep_columns(graph, packed, packed_qkv_columns(heads, kv_heads, head_size, r)));
  Value* old = split.inputs[1];
  set_input(&split, 1, add_constant(graph, old->name + "/shard",
                                    Tensor::from_vector<int64_t>(Shape{3}, {q_width / r.world, kv_width / r.world, kv_width / r.world})));
  release_unread(graph, {old});
  return head_size;
}

// Query, key and value as three inputs: each its own projection, or three parts of one Split;
// the query and key possibly through per-head steps (rotary, norms).
Status shard_separate_qkv(Graph& graph, Node& gqa, int64_t heads, int64_t kv_heads, const Rank& r) {
  if (gqa.input(G::kKey) == nullptr || gqa.input(G::kValue) == nullptr) {
    return OG_ERROR(gqa.describe(), ": has only one of key and value");
  }
  const PerHeadPath q_path = per_head_path(graph, gqa.inputs[G::kQuery]), k_path = per_head_path(graph, gqa.inputs[G::kKey]);
  Value* q_in = q_path.source;
  Value* k_in = k_path.source;
  Value* v_in = gqa.inputs[G::kValue];
  Node* split = q_in->producer;
  int64_t head_size = 0;
  if (split != nullptr && split->op_type == "Split" && k_in->producer == split && v_in->producer == split) {
    OG_ASSIGN_OR_RETURN(head_size, shard_split_qkv(graph, *split, gqa, {q_in, k_in, v_in}, heads, kv_heads, r));
  } else {
    OG_ASSIGN_OR_RETURN(ColumnSource q, column_source(graph, q_in, gqa));
    OG_ASSIGN_OR_RETURN(ColumnSource k, column_source(graph, k_in, gqa));
    OG_ASSIGN_OR_RETURN(ColumnSource v, column_source(graph, v_in, gqa));
    const int64_t q_width = projection_outputs(*q.projection);
    head_size = q_width / heads;
    if (head_size <= 0 || q_width % heads != 0) {
      return OG_ERROR(gqa.describe(), ": its query projection's width ", q_width, " is not a whole number of heads");
    }
    const auto [h0, h1] = r.share(heads);
    const auto [k0, k1] = r.share(kv_heads);
    OG_RETURN_IF_ERROR(keep_columns(graph, q, {{h0 * head_size, h1 * head_size}}));
    OG_RETURN_IF_ERROR(keep_columns(graph, k, {{k0 * head_size, k1 * head_size}}));
    OG_RETURN_IF_ERROR(keep_columns(graph, v, {{k0 * head_size, k1 * head_size}}));
  }
  OG_RETURN_IF_ERROR(shrink_per_head_path(graph, q_path, heads * head_size, r));
  return shrink_per_head_path(graph, k_path, kv_heads * head_size, r);
}

Status shard_qkv(Graph& graph, Node& gqa, int64_t heads, int64_t kv_heads, const Rank& r) {
  if (gqa.input(G::kKey) != nullptr || gqa.input(G::kValue) != nullptr) return shard_separate_qkv(graph, gqa, heads, kv_heads, r);
  // Packed: one projection gives the query, key and value heads side by side.
  OG_ASSIGN_OR_RETURN(ColumnSource qkv, column_source(graph, gqa.inputs[G::kQuery], gqa));
  const int64_t width = projection_outputs(*qkv.projection);
  const int64_t head_size = width / (heads + 2 * kv_heads);
  if (head_size <= 0 || width % (heads + 2 * kv_heads) != 0) {
    return OG_ERROR(gqa.describe(), ": its query projection's width ", width, " is not a whole number of heads");
  }
  return keep_columns(graph, qkv, packed_qkv_columns(heads, kv_heads, head_size, r));
}

// The rank's query heads of a per-head input along `axis`: head_sink [heads] (gpt-oss's sinks) or
// attention_bias [B | 1, heads | 1, S, T]. One that broadcasts over the heads (1 along the axis)
// every rank reads whole; a constant one is cut; a computed one of several heads is refused.
Status shard_per_head_input(Graph& graph, Node& gqa, int slot, int axis, int64_t heads, const Rank& r) {
  Value* v = gqa.input(static_cast<size_t>(slot));
  if (v == nullptr) return Status::ok();
  const char* name = slot == G::kHeadSink ? "head_sink" : "attention_bias";
  if (v->is_constant()) {
    const Tensor& whole = v->initializer;
    if (whole.rank() <= axis) return OG_ERROR(gqa.describe(), ": ", name, " has no heads axis ", axis);
    if (whole.shape()[axis] == 1) return Status::ok();
    if (whole.shape()[axis] != heads) {
      return OG_ERROR(gqa.describe(), ": ", name, " has ", whole.shape()[axis], " heads along axis ", axis, ", not num_heads ", heads);
    }
    const auto [h0, h1] = r.share(heads);
    OG_ASSIGN_OR_RETURN(Tensor cut, keep_along_axis(whole, axis, {{h0, h1}}));
    set_input(&gqa, static_cast<size_t>(slot), add_constant(graph, v->name + "/shard", std::move(cut)));
    release_unread(graph, {v});
    return Status::ok();
  }
  if (v->dims && static_cast<int>(v->dims->size()) > axis && (*v->dims)[static_cast<size_t>(axis)].value == 1) return Status::ok();
  return OG_ERROR(gqa.describe(), ": ", name, " '", v->name,
                  "' is computed per head; the tensor-parallel pass splits constant ones or ones broadcast over the heads");
}

Status shard_attention(Graph& graph, Node& gqa, const Rank& r) {
  // position_ids hold one position per token, the same for every head: every rank reads them.
  const int64_t heads = gqa.attrs.get_int("num_heads", 0), kv_heads = gqa.attrs.get_int("kv_num_heads", 0);
  if (kv_heads <= 0 || kv_heads % r.world != 0) return indivisible(gqa, "kv_num_heads", kv_heads, r);
  if (heads <= 0 || heads % kv_heads != 0) return OG_ERROR(gqa.describe(), ": num_heads ", heads, " is not a multiple of kv_num_heads ", kv_heads);
  OG_RETURN_IF_ERROR(shard_per_head_input(graph, gqa, G::kHeadSink, 0, heads, r));
  OG_RETURN_IF_ERROR(shard_per_head_input(graph, gqa, G::kAttentionBias, 1, heads, r));
  OG_RETURN_IF_ERROR(shard_qkv(graph, gqa, heads, kv_heads, r));
  Value* out = gqa.outputs[G::kOutput];
  Node* o_proj = out->consumers.size() == 1 && !graph.is_output(out) ? out->consumers[0] : nullptr;
  if (!is_projection(o_proj) || o_proj->inputs[0] != out) {
    return OG_ERROR(gqa.describe(), ": its output is not read by one output projection alone");
  }
  const int64_t width = projection_inputs(*o_proj);
  if (width % r.world != 0) return indivisible(*o_proj, "K", width, r);
  const auto [begin, end] = r.share(width);
  OG_RETURN_IF_ERROR(keep_input_rows(graph, *o_proj, begin, end));
  add_all_reduce(graph, *o_proj);
  gqa.attrs.set("num_heads", int_attribute(heads / r.world));
  gqa.attrs.set("kv_num_heads", int_attribute(kv_heads / r.world));
  for (int slot : {G::kPastKey, G::kPastValue}) shrink_kv_dims(gqa.input(static_cast<size_t>(slot)), kv_heads / r.world);
  for (size_t slot : {size_t{G::kPresentKey}, size_t{G::kPresentValue}}) {
    if (slot < gqa.outputs.size()) shrink_kv_dims(gqa.outputs[slot], kv_heads / r.world);
  }
  return Status::ok();
}

// ---- MLP -------------------------------------------------------------------------------------

bool is_elementwise(const Node& node) {
  static const std::set<std::string> kOnnx = {"Mul", "Add", "Sub", "Div", "Sigmoid", "Tanh", "Gelu", "Relu", "Erf"};
  static const std::set<std::string> kMicrosoft = {"FastGelu", "QuickGelu", "Gelu"};
  if (node.outputs.size() != 1) return false;
  return node.domain.empty() ? kOnnx.count(node.op_type) != 0
                             : node.domain == "com.microsoft" && kMicrosoft.count(node.op_type) != 0;
}

struct MlpMatch {
  std::vector<Node*> chain;  // elementwise nodes between the gate/up projections and down
  std::vector<Node*> roots;  // the gate/up projections
};

bool only_read_inside(const Graph& graph, const Value* v, const std::set<const Node*>& inside) {
  if (graph.is_output(v)) return false;
  return std::all_of(v->consumers.begin(), v->consumers.end(), [&](const Node* n) { return inside.count(n) != 0; });
}

// `down` as a down projection: its input computed elementwise (constants of one element aside)
// from projections of one activation, every value between read only there. Else nullopt.
std::optional<MlpMatch> match_mlp(const Graph& graph, Node& down) {
  MlpMatch m;
  std::set<const Node*> inside{&down};
  std::vector<Value*> pending{down.inputs[0]};
  while (!pending.empty()) {
    Value* v = pending.back();
    pending.pop_back();
    Node* node = v->producer;
    if (node == nullptr || inside.count(node) != 0) {
      if (node == nullptr) return std::nullopt;
      continue;
    }
    inside.insert(node);
    if (is_projection(node)) {
      m.roots.push_back(node);
      continue;
    }
    if (!is_elementwise(*node)) return std::nullopt;
    m.chain.push_back(node);
    for (Value* in : node->inputs) {
      if (in == nullptr) continue;
      if (in->is_constant()) {
        if (in->initializer.numel() != 1) return std::nullopt;
      } else {
        pending.push_back(in);
      }
    }
  }
  if (m.chain.empty() || m.roots.empty()) return std::nullopt;
  for (const Node* node : m.chain) {
    if (!only_read_inside(graph, node->outputs[0], inside)) return std::nullopt;
  }
  for (const Node* root : m.roots) {
    if (root->inputs[0] != m.roots[0]->inputs[0] || !only_read_inside(graph, root->outputs[0], inside)) return std::nullopt;
  }
  return m;
}

Status shard_mlp(Graph& graph, Node& down, const MlpMatch& m, const Rank& r) {
  const int64_t width = projection_inputs(down);
  for (Node* root : m.roots) {
    if (projection_outputs(*root) != width) {
      return OG_ERROR(root->describe(), ": gives ", projection_outputs(*root), " columns where ", down.describe(),
                      " reads ", width);
    }
  }
  if (width % r.world != 0) return indivisible(down, "the intermediate size", width, r);
  const auto [begin, end] = r.share(width);
  for (Node* root : m.roots) OG_RETURN_IF_ERROR(keep_output_columns(graph, *root, {{begin, end}}));
  OG_RETURN_IF_ERROR(keep_input_rows(graph, down, begin, end));
  add_all_reduce(graph, down);
  return Status::ok();
}

// ---- vocabulary ------------------------------------------------------------------------------

Status shard_lm_head(Graph& graph, Node& head, const Rank& r) {
  const int64_t vocab = projection_outputs(head);
  if (vocab % r.world != 0) return indivisible(head, "the vocabulary size", vocab, r);
  const auto [begin, end] = r.share(vocab);
  OG_RETURN_IF_ERROR(keep_output_columns(graph, head, {{begin, end}}));
  std::unique_ptr<Node> gather = collective(*head.outputs[0], CollectiveOps::kAllGather);
  gather->attrs.set("axis", int_attribute(-1));
  gather->attrs.set("world_size", int_attribute(r.world));
  take_over_output(graph, head, std::move(gather));  // the slice's dims stay unknown
  return Status::ok();
}

// ---- MoE experts ---------------------------------------------------------------------------------
// com.microsoft MoE / QMoE (ops/schema/moe.h): every expert's intermediate features are split as
// an MLP's are. fc1 / fc3 keep the rank's rows of N (with swiglu_fusion 1 the interleaved gate/up
// pairs, with 2 both halves), fc2 the same features along K (whole bytes and quantization blocks),
// fc2's bias stays on rank 0 alone, and AllReduce sums the ranks' outputs. The router is whole on
// every rank, so every rank routes each token to the same experts.

bool is_moe(const Node& node) { return node.domain == "com.microsoft" && (node.op_type == "MoE" || node.op_type == "QMoE"); }

// `node`'s constant input `slot` with `ranges` along `axis`; absent inputs stay absent.
Status cut_input(Graph& graph, Node& node, int slot, int axis, const IndexRanges& ranges) {
  Value* v = node.input(static_cast<size_t>(slot));
  if (v == nullptr) return Status::ok();
  if (!v->is_constant()) return OG_ERROR(node.describe(), ": input '", v->name, "' is not a constant to split");
  OG_ASSIGN_OR_RETURN(Tensor cut, keep_along_axis(v->initializer, axis, ranges));
  set_input(&node, static_cast<size_t>(slot), add_constant(graph, v->name + "/shard", std::move(cut)));
  release_unread(graph, {v});
  return Status::ok();
}

Status shard_moe(Graph& graph, Node& moe, const Rank& r) {
  const bool quantized = moe.op_type == "QMoE";
  const bool fp4 = quantized && moe.attrs.get_string("quant_type", "int") == "fp4";
  const int64_t bits = !quantized ? 0 : fp4 ? 4 : moe.attrs.get_int("expert_weight_bits", 4);
  const int64_t block = fp4 ? 32 : quantized ? moe.attrs.get_int("block_size", 0) : 0;
  using S = MoEParams;
  const S::Slots fc1 = S::slots(quantized, 0), fc2 = S::slots(quantized, 1), fc3 = S::slots(quantized, 2);
  const Value* down = moe.input(static_cast<size_t>(fc2.weights));
  if (down == nullptr || !down->is_constant() || down->initializer.rank() != 3) {
    return OG_ERROR(moe.describe(), ": fc2_experts_weights is not a constant [experts, hidden, inter] to split");
  }
  const int64_t packed = down->initializer.shape()[2];
  const int64_t inter = quantized ? packed * 8 / bits : packed;
  if (inter % r.world != 0) return indivisible(moe, "the experts' intermediate size", inter, r);
  const auto [i0, i1] = r.share(inter);
  if (quantized && (i0 * bits % 8 != 0 || (block > 0 && i0 % block != 0))) {
    return OG_ERROR(moe.describe(), ": the ranks' intermediate features [", i0, ", ", i1, ") do not fall on its ",
                    block > 0 ? "quantization blocks of " : "bytes of ", block > 0 ? block : 8 / bits, " values");
  }
  // fc1 / fc3 rows: the rank's features (and their pairs or halves when fc1 holds gate and up).
  const bool fused = moe.attrs.get_string("activation_type", "relu") == "swiglu" && moe.attrs.get_int("swiglu_fusion", 0) != 0;
  const int64_t fusion = fused ? moe.attrs.get_int("swiglu_fusion", 0) : 0;
  const IndexRanges rows = fusion == 1 ? IndexRanges{{2 * i0, 2 * i1}}
                           : fusion == 2 ? IndexRanges{{i0, i1}, {inter + i0, inter + i1}}
                                         : IndexRanges{{i0, i1}};
  for (const S::Slots& fc : {fc1, fc3}) {
    if (moe.input(static_cast<size_t>(fc.weights)) == nullptr) continue;
    if (fc.zero_points >= 0 && moe.input(static_cast<size_t>(fc.zero_points)) != nullptr && block == 0 && bits != 8) {
      return OG_ERROR(moe.describe(), ": per-row zero points packed along N are not split by the tensor-parallel pass");
    }
    for (const int slot : {fc.weights, fc.scales, fc.bias, fc.zero_points}) {
      if (slot >= 0) OG_RETURN_IF_ERROR(cut_input(graph, moe, slot, 1, rows));
    }
  }
  // fc2 along K: packed bytes, one scale (and zero point) per block; per-row scales stay whole.
  const IndexRanges bytes = {{quantized ? i0 * bits / 8 : i0, quantized ? i1 * bits / 8 : i1}};
  OG_RETURN_IF_ERROR(cut_input(graph, moe, fc2.weights, 2, bytes));
  if (block > 0) {
    OG_RETURN_IF_ERROR(cut_input(graph, moe, fc2.scales, 2, {{i0 / block, i1 / block}}));
    if (fc2.zero_points >= 0 && moe.input(static_cast<size_t>(fc2.zero_points)) != nullptr) {
      const int64_t per_byte = 8 / bits;
      if ((i0 / block) % per_byte != 0 || (i1 / block) % per_byte != 0) {
        return OG_ERROR(moe.describe(), ": fc2's packed zero points do not split on whole bytes across the ranks");
      }
      OG_RETURN_IF_ERROR(cut_input(graph, moe, fc2.zero_points, 2, {{i0 / block / per_byte, i1 / block / per_byte}}));
    }
  }
  // fc2's bias is added once: after the sum, as rank 0's alone.
  if (Value* bias = moe.input(static_cast<size_t>(fc2.bias)); bias != nullptr && r.rank != 0) {
    if (!bias->is_constant()) return OG_ERROR(moe.describe(), ": fc2_experts_bias is not a constant");
    OG_ASSIGN_OR_RETURN(Tensor zeros, Tensor::allocate(bias->initializer.dtype(), bias->initializer.shape()));
    set_input(&moe, static_cast<size_t>(fc2.bias), add_constant(graph, bias->name + "/shard", std::move(zeros)));
    release_unread(graph, {bias});
  }
  add_all_reduce(graph, moe);
  return Status::ok();
}

int opset_of(const Graph& graph) {
  auto it = graph.opset_imports.find("");
  return it != graph.opset_imports.end() ? it->second : 13;
}

// out = op(inputs), a new node of the default domain.
Value* add_op(Graph& graph, const std::string& base, const char* op_type, std::vector<Value*> inputs, DType dtype) {
  auto node = std::make_unique<Node>();
  node->name = base + "/" + op_type;
  node->op_type = op_type;
  node->opset = opset_of(graph);
  Node* added = graph.add_node(std::move(node));
  for (size_t i = 0; i < inputs.size(); ++i) set_input(added, i, inputs[i]);
  Value* out = add_fresh_value(graph, added->name + "/output_0");
  out->dtype = dtype;
  added->outputs = {out};
  out->producer = added;
  return out;
}

template <typename T>
Value* scalar(Graph& graph, const std::string& name, T value) {
  return add_constant(graph, name, Tensor::from_vector<T>(Shape{}, std::vector<T>{value}));
}

Value* scalar_like(Graph& graph, const std::string& name, DType dtype, int64_t value) {
  return dtype == DType::kI32 ? scalar<int32_t>(graph, name, static_cast<int32_t>(value)) : scalar<int64_t>(graph, name, value);
}

// Gather(table, ids) -> rows of this rank's table slice where the id falls in it, zeros elsewhere.
Status shard_embedding(Graph& graph, Node& gather, const Rank& r) {
  Value* table = gather.inputs[0];
  Value* ids = gather.inputs[1];
  const int64_t vocab = table->initializer.shape()[0];
  if (vocab % r.world != 0) return indivisible(gather, "the vocabulary size", vocab, r);
  const auto [begin, end] = r.share(vocab);
  OG_ASSIGN_OR_RETURN(Tensor rows, keep_along_axis(table->initializer, 0, {{begin, end}}));
  set_input(&gather, 0, add_constant(graph, table->name + "/shard", std::move(rows)));
  release_unread(graph, {table});
  const std::string base = gather.name + "/shard";
  const DType id_type = ids->dtype;
  Value* local = add_op(graph, base, "Sub", {ids, scalar_like(graph, base + "/begin", id_type, begin)}, id_type);
  Value* low = add_op(graph, base, "GreaterOrEqual", {local, scalar_like(graph, base + "/zero", id_type, 0)}, DType::kBool);
  Value* high = add_op(graph, base, "Less", {local, scalar_like(graph, base + "/rows", id_type, end - begin)}, DType::kBool);
  Value* mine = add_op(graph, base, "And", {low, high}, DType::kBool);
  Value* safe = add_op(graph, base, "Where", {mine, local, scalar_like(graph, base + "/first", id_type, 0)}, id_type);
  set_input(&gather, 1, safe);
  // The looked-up rows where the id is this rank's, zeros elsewhere; then the sum over ranks.
  auto select = std::make_unique<Node>();
  select->name = base + "/Where_rows";
  select->op_type = "Where";
  select->opset = opset_of(graph);
  Value* axes = add_constant(graph, base + "/axes", Tensor::from_vector<int64_t>(Shape{1}, std::vector<int64_t>{-1}));
  Value* column = add_op(graph, base, "Unsqueeze", {mine, axes}, DType::kBool);
  Node* where = select.get();
  Value* rows_found = take_over_output(graph, gather, std::move(select));
  set_input(where, 0, column);
  set_input(where, 1, rows_found);
  set_input(where, 2, scalar<float>(graph, base + "/nothing", 0.0f));
  add_all_reduce(graph, *where);
  return Status::ok();
}

// The token embedding this pass can shard: a Gather (axis 0) of a constant float32 [V, hidden]
// table by a graph input.
Node* find_embedding(const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    if (node->op_type != "Gather" || !node->domain.empty() || node->inputs.size() != 2 || node->attrs.get_int("axis", 0) != 0) continue;
    const Value* table = node->inputs[0];
    const Value* ids = node->inputs[1];
    if (table != nullptr && table->is_constant() && table->initializer.rank() == 2 &&
        table->initializer.dtype() == DType::kF32 && ids != nullptr && ids->is_graph_input) {
      return node.get();
    }
  }
  return nullptr;
}

}  // namespace

Result<TensorParallelShards> shard_for_tensor_parallel(Graph& graph, const std::string& logits, int rank,
                                                       int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return OG_ERROR("tensor parallelism needs 1 <= N and 0 <= rank < N, got rank ", rank, " of ", world_size);
  }
  TensorParallelShards shards;
  if (world_size == 1) return shards;
  const Rank r{rank, world_size};
  std::vector<Node*> nodes;
  for (const auto& node : graph.nodes()) nodes.push_back(node.get());
  for (Node* node : nodes) {
    if (!is_gqa(*node)) continue;
    OG_RETURN_IF_ERROR(shard_attention(graph, *node, r));
    ++shards.attention_layers;
  }
  if (shards.attention_layers == 0) {
    return OG_ERROR("the graph has no com.microsoft GroupQueryAttention node; the tensor-parallel pass shards "
                    "model-builder (genai-style) decoders only");
  }
  Value* logits_value = graph.find_value(logits);
  std::vector<Value*> chain;
  Node* head = logits_value != nullptr && graph.is_output(logits_value) ? find_lm_head(logits_value, chain) : nullptr;
  if (head == nullptr || !is_projection(head)) {
    return OG_ERROR("output '", logits, "': no LM head (a projection feeding it through position-wise ops) to shard");
  }
  for (Node* node : nodes) {
    if (is_moe(*node)) {
      OG_RETURN_IF_ERROR(shard_moe(graph, *node, r));
      ++shards.moe_layers;
      continue;
    }
    if (node == head || !is_projection(node)) continue;
    if (std::optional<MlpMatch> m = match_mlp(graph, *node)) {
      OG_RETURN_IF_ERROR(shard_mlp(graph, *node, *m, r));
      ++shards.mlps;
    }
  }
  OG_RETURN_IF_ERROR(shard_lm_head(graph, *head, r));
  shards.lm_head = true;
  if (Node* embedding = find_embedding(graph)) {
    OG_RETURN_IF_ERROR(shard_embedding(graph, *embedding, r));
    shards.embedding = true;
  }
  OG_RETURN_IF_ERROR(graph.finalize());
  graph.eliminate_dead_nodes();
  return shards;
}

}  // namespace onnx_genai
