// GroupQueryAttention -> PagedAttention (paged_attention_pass.h).
#include "runtime/paged_attention_pass.h"

#include <algorithm>
#include <memory>

#include "ops/schema/attention.h"
#include "ops/schema/paged_attention.h"

namespace onnx_genai {

namespace {

bool is_gqa(const Node& node) { return node.op_type == "GroupQueryAttention" && node.domain == "com.microsoft"; }

// Why `node` cannot become a PagedAttention, or "" when it can.
std::string unsupported(const Graph& graph, const Node& node) {
  using G = GqaParams;
  const Value* past_k = node.input(G::kPastKey);
  const Value* past_v = node.input(G::kPastValue);
  if (past_k == nullptr || past_v == nullptr || !past_k->is_graph_input || !past_v->is_graph_input) {
    return "its past_key / past_value are not graph inputs";
  }
  if (past_k->consumers.size() != 1 || past_v->consumers.size() != 1) return "another node reads its past key or value";
  if (!past_k->dims || past_k->dims->size() != 4 || !(*past_k->dims)[3].known()) {
    return "its past_key has no declared head size (dim 3)";
  }
  for (int i = G::kPresentKey; i <= G::kPresentValue; ++i) {
    const Value* present = i < static_cast<int>(node.outputs.size()) ? node.outputs[static_cast<size_t>(i)] : nullptr;
    if (present != nullptr && (!graph.is_output(present) || !present->consumers.empty())) {
      return "its present key or value is read inside the graph";
    }
  }
  for (int i : {G::kPositionIds, G::kAttentionBias}) {
    if (node.input(static_cast<size_t>(i)) != nullptr) return "it takes position_ids or attention_bias";
  }
  if (node.inputs.size() > G::kHeadSink + 1) return "it takes quantized-cache or QK-norm inputs";
  const Attributes& a = node.attrs;
  if (a.get_int("smooth_softmax", 0) != 0 || a.get_int("causal", 1) != 1) return "it is not plainly causal (smooth_softmax or causal=0)";
  if (a.get_int("sliding_window_cache", 0) != 0 || a.get_int("qk_output", 0) != 0 || a.get_int("kv_cache_bit_width", 0) != 0) {
    return "it uses a sliding-window cache, QK output or a quantized cache";
  }
  if ((node.input(G::kKey) == nullptr) != (node.input(G::kValue) == nullptr)) return "it has only one of key and value";
  return "";
}

void copy_attribute(const Node& from, Node& to, const char* name) {
  if (const Attribute* a = from.attrs.find(name)) to.attrs.set(name, *a);
}

}  // namespace

Result<PagedRewrite> rewrite_to_paged_attention(Graph& graph, int64_t block_size) {
  PagedRewrite result;
  std::vector<Node*> attention;
  for (const auto& node : graph.nodes()) {
    if (!is_gqa(*node)) continue;
    std::string why = unsupported(graph, *node);
    const Value* past = node->input(GqaParams::kPastKey);
    const int64_t kv_heads = node->attrs.get_int("kv_num_heads", 0);
    if (why.empty() && attention.empty()) {
      result.kv_dtype = past->dtype;
      result.kv_heads = kv_heads;
      result.head_size = (*past->dims)[3].value;
      const Value* cos = node->input(GqaParams::kCosCache);
      if (cos != nullptr && cos->is_constant() && node->attrs.get_int("do_rotary", 0) != 0) {
        result.rotary_rows = cos->initializer.shape()[0];
      }
    } else if (why.empty() && (past->dtype != result.kv_dtype || kv_heads != result.kv_heads ||
                               (*past->dims)[3].value != result.head_size)) {
      why = "its KV heads, head size or dtype differ from the first attention node's";
    }
    if (!why.empty()) {
      result.reason = node->describe() + ": " + why;
      return result;
    }
    attention.push_back(node.get());
  }
  if (attention.empty()) {
    result.reason = "the graph has no GroupQueryAttention node";
    return result;
  }
  for (const char* name : {kBlockTablesInput, kQueryStartsInput, kSeqLensInput}) {
    if (graph.find_value(name) != nullptr) return OG_ERROR("the decoder already has a value named '", name, "'");
  }
  const Dim sequences{-1, "paged_sequences"};
  Value* tables = graph.add_input(kBlockTablesInput, DType::kI32, {sequences, Dim{-1, "paged_max_blocks"}});
  Value* starts = graph.add_input(kQueryStartsInput, DType::kI32, {Dim{-1, "paged_sequences_plus_1"}});
  Value* lens = graph.add_input(kSeqLensInput, DType::kI32, {sequences});

  for (size_t layer = 0; layer < attention.size(); ++layer) {
    Node* gqa = attention[layer];
    const Value* past = gqa->input(GqaParams::kPastKey);
    const std::string n = std::to_string(layer);
    const std::vector<Dim> cache_dims{Dim{-1, "kv_blocks"}, Dim{block_size, ""}, Dim{result.kv_heads, ""},
                                      Dim{result.head_size, ""}};
    PagedLayer names{"onnx_genai.key_cache." + n, "onnx_genai.value_cache." + n, "onnx_genai.key_cache_out." + n,
                     "onnx_genai.value_cache_out." + n};
    Value* key_cache = graph.add_input(names.key_cache, past->dtype, cache_dims);
    Value* value_cache = graph.add_input(names.value_cache, past->dtype, cache_dims);
    Value* key_out = graph.add_value(names.key_cache_out);
    Value* value_out = graph.add_value(names.value_cache_out);
    graph.outputs.push_back(key_out);
    graph.outputs.push_back(value_out);

    auto paged = std::make_unique<Node>();
    paged->name = gqa->name + "/paged";
    paged->op_type = PagedAttentionParams::kOpType;
    paged->domain = PagedAttentionParams::kDomain;
    paged->opset = 1;
    paged->inputs = {gqa->input(GqaParams::kQuery), gqa->input(GqaParams::kKey), gqa->input(GqaParams::kValue),
                     key_cache, value_cache, tables, starts, lens, gqa->input(GqaParams::kCosCache),
                     gqa->input(GqaParams::kSinCache), gqa->input(GqaParams::kHeadSink)};
    while (!paged->inputs.empty() && paged->inputs.back() == nullptr) paged->inputs.pop_back();
    paged->outputs = {gqa->outputs[0], key_out, value_out};
    for (const char* a : {"num_heads", "kv_num_heads", "scale", "softcap", "local_window_size", "do_rotary",
                          "rotary_interleaved"}) {
      copy_attribute(*gqa, *paged, a);
    }
    // The old node stops producing its output; its presents leave the graph outputs.
    gqa->outputs[0] = nullptr;
    for (size_t i = 1; i < gqa->outputs.size(); ++i) {
      if (Value* present = gqa->outputs[i]) std::erase(graph.outputs, present);
    }
    graph.add_node(std::move(paged));
    result.layers.push_back(std::move(names));
  }
  // The GQA nodes now reach no output: dead-node elimination drops them and their length
  // plumbing; inputs nothing reads any more (past, usually attention_mask) go too.
  OG_RETURN_IF_ERROR(graph.finalize().with_context("rewriting attention to paged attention"));
  graph.eliminate_dead_nodes();
  std::erase_if(graph.inputs, [](const Value* v) { return v->consumers.empty(); });
  OG_RETURN_IF_ERROR(graph.finalize().with_context("rewriting attention to paged attention"));
  result.rewritten = true;
  return result;
}

}  // namespace onnx_genai
