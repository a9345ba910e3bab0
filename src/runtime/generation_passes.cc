// The generation passes (generation_passes.h).
#include "runtime/generation_passes.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "ops/schema/sampling.h"

namespace onnx_genai {

namespace {

bool is_gqa(const Node& node) { return node.op_type == "GroupQueryAttention" && node.domain == "com.microsoft"; }

// Whether `value` (a shape, or a dim of it) reaches nothing but GroupQueryAttention's
// total_sequence_length input, through shape plumbing only.
bool feeds_only_total_length(const Graph& graph, const Value* value, int depth = 0) {
  constexpr int kMaxDepth = 8;
  if (depth > kMaxDepth || graph.is_output(value)) return false;
  for (const Node* consumer : value->consumers) {
    if (is_gqa(*consumer)) {
      for (size_t i = 0; i < consumer->inputs.size(); ++i) {
        if (consumer->inputs[i] == value && i != 6) return false;  // 6: total_sequence_length
      }
      continue;
    }
    const std::string& op = consumer->op_type;
    const bool plumbing = op == "Gather" || op == "Cast" || op == "Squeeze" || op == "Unsqueeze" || op == "Reshape" ||
                          op == "Identity";
    if (!plumbing || consumer->input(0) != value || consumer->outputs.empty() || consumer->outputs[0] == nullptr ||
        !feeds_only_total_length(graph, consumer->outputs[0], depth + 1)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool mask_only_sets_lengths(const Graph& graph, const std::string& mask_name) {
  const Value* mask = graph.find_value(mask_name);
  if (mask == nullptr || !mask->is_graph_input || mask->consumers.empty()) return false;
  for (const Node* consumer : mask->consumers) {
    if (consumer->op_type == "ReduceSum") continue;
    if (consumer->op_type != "Shape" || consumer->outputs.empty() || consumer->outputs[0] == nullptr ||
        !feeds_only_total_length(graph, consumer->outputs[0])) {
      return false;
    }
  }
  return true;
}

std::set<std::string> inputs_read_as_gqa_past(const Graph& graph) {
  std::set<std::string> inputs;
  for (const auto& node : graph.nodes()) {
    if (!is_gqa(*node)) continue;
    for (size_t i : {3, 4}) {  // past_key, past_value
      const Value* past = node->input(i);
      if (past != nullptr && past->is_graph_input) inputs.insert(past->name);
    }
  }
  return inputs;
}

namespace {

bool is_constant_small(const Value* v) {
  return v != nullptr && v->is_constant() && v->initializer.rank() <= 1;
}

// Ops that map each position of their one varying input to the same position of their output,
// given constant scalar or per-channel other inputs.
bool is_position_wise(const Node& node, const Value* varying) {
  static const char* const kOps[] = {"Cast", "Tanh", "Mul", "Div", "Add", "Sub", "Identity"};
  if (!node.domain.empty() || std::none_of(std::begin(kOps), std::end(kOps), [&](const char* op) {
        return node.op_type == op;
      })) {
    return false;
  }
  for (const Value* in : node.inputs) {
    if (in != varying && !is_constant_small(in)) return false;
  }
  return node.outputs.size() == 1;
}

// Rows of a MatMul's 2-D weight: a constant, or the transpose of one (tied embeddings in
// standard-op exports); 0 for anything else.
int64_t weight_rows(const Value* weight) {
  if (weight == nullptr) return 0;
  if (weight->is_constant()) return weight->initializer.rank() == 2 ? weight->initializer.shape()[0] : 0;
  const Node* transpose = weight->producer;
  if (transpose == nullptr || transpose->op_type != "Transpose" || !transpose->domain.empty()) return 0;
  const Value* source = transpose->input(0);
  const std::vector<int64_t> perm = transpose->attrs.get_ints("perm");
  const bool swaps = perm.empty() || perm == std::vector<int64_t>{1, 0};
  if (source == nullptr || !source->is_constant() || source->initializer.rank() != 2 || !swaps) return 0;
  return source->initializer.shape()[1];
}

// Hidden size an LM head reads (MatMulNBits' K, or the rows of MatMul's weight); 0 when the
// node is not one.
int64_t head_input_width(const Node& node) {
  if (node.op_type == "MatMulNBits" && node.domain == "com.microsoft") return node.attrs.get_int("K", 0);
  if (node.op_type == "MatMul" && node.domain.empty()) return weight_rows(node.input(1));
  return 0;
}

}  // namespace

Node* find_lm_head(Value* logits, std::vector<Value*>& chain) {
  constexpr int kMaxPositionWiseOps = 8;
  Value* v = logits;
  for (int depth = 0; depth <= kMaxPositionWiseOps && v->producer != nullptr; ++depth) {
    chain.push_back(v);
    Node* node = v->producer;
    if (head_input_width(*node) > 0) return node;
    std::vector<Value*> varying_inputs;
    for (Value* in : node->inputs) {
      if (in != nullptr && !in->is_constant()) varying_inputs.push_back(in);
    }
    if (varying_inputs.size() != 1) return nullptr;
    Value* varying = varying_inputs.front();
    if (!is_position_wise(*node, varying) || varying->consumers.size() != 1) return nullptr;
    v = varying;
  }
  return nullptr;
}

Result<bool> select_logit_rows(Graph& graph, const std::string& logits_name) {
  Value* logits = graph.find_value(logits_name);
  if (logits == nullptr || !logits->consumers.empty() || !graph.is_output(logits)) return false;
  std::vector<Value*> chain;
  Node* head = find_lm_head(logits, chain);
  if (head == nullptr) return false;
  // The head keeps its input's rank (a 2-D weight), and position-wise ops keep it too, so a
  // rank-3 logits output means a rank-3 hidden state.
  Value* hidden = head->input(0);
  const int64_t width = head_input_width(*head);
  if (hidden == nullptr || !logits->dims || logits->dims->size() != 3 || width <= 0) return false;
  if (graph.find_value(kLogitRowsInput) != nullptr) {
    return OG_ERROR("the decoder already has a value named '", kLogitRowsInput, "'");
  }

  Value* rows = graph.add_input(kLogitRowsInput, DType::kI64, {(*logits->dims)[0], Dim{-1, "logit_rows"}, Dim{width, ""}});

  Value* selected = graph.add_value(hidden->name + "/" + kLogitRowsInput);
  selected->dtype = hidden->dtype;
  auto gather = std::make_unique<Node>();
  gather->name = std::string(kLogitRowsInput) + "/GatherElements";
  gather->op_type = "GatherElements";
  gather->opset = graph.opset_imports.count("") ? graph.opset_imports.at("") : 13;
  gather->inputs = {hidden, rows};
  gather->outputs = {selected};
  Attribute axis;
  axis.i = 1;
  gather->attrs.set("axis", axis);
  graph.add_node(std::move(gather));
  head->inputs[0] = selected;

  // The chain's declared sequence dims now count selected rows.
  for (Value* v : chain) {
    if (v->dims && v->dims->size() == 3) (*v->dims)[1] = Dim{-1, "logit_rows"};
  }
  OG_RETURN_IF_ERROR(graph.finalize().with_context("selecting logit rows"));
  return true;
}

Result<bool> add_greedy_tokens_output(Graph& graph, const std::string& logits_name) {
  Value* logits = graph.find_value(logits_name);
  if (logits == nullptr || !graph.is_output(logits)) {
    return false;
  }
  if (graph.find_value(kGreedyTokensOutput) != nullptr) {
    return OG_ERROR("the decoder already has a value named '", kGreedyTokensOutput, "'");
  }
  Value* tokens = graph.add_value(kGreedyTokensOutput);
  tokens->dtype = DType::kI64;
  if (logits->dims && !logits->dims->empty()) {
    tokens->dims = std::vector<Dim>(logits->dims->begin(), logits->dims->end() - 1);  // [B, positions]
  }
  graph.outputs.push_back(tokens);

  auto argmax = std::make_unique<Node>();
  argmax->name = std::string(kGreedyTokensOutput) + "/ArgMax";
  argmax->op_type = "ArgMax";
  argmax->opset = graph.opset_imports.count("") ? graph.opset_imports.at("") : 13;
  argmax->inputs = {logits};
  argmax->outputs = {tokens};
  Attribute axis, keepdims;
  axis.i = -1;
  keepdims.i = 0;
  argmax->attrs.set("axis", axis);
  argmax->attrs.set("keepdims", keepdims);
  graph.add_node(std::move(argmax));
  OG_RETURN_IF_ERROR(graph.finalize().with_context("adding the greedy tokens output"));
  return true;
}

Result<bool> add_sampled_tokens_output(Graph& graph, const std::string& logits_name, bool every_position) {
  Value* logits = graph.find_value(logits_name);
  if (logits == nullptr || !graph.is_output(logits) || (logits->dims && logits->dims->size() != 3)) return false;
  for (const char* name : {kSampledTokensOutput, kSamplingParamsInput, kSamplingUniformsInput, kSamplingMaskInput}) {
    if (graph.find_value(name) != nullptr) return OG_ERROR("the decoder already has a value named '", name, "'");
  }
  const Dim batch = !logits->dims ? Dim{-1, every_position ? "logit_rows" : "batch_size"}
                    : every_position ? (*logits->dims)[1] : logits->dims->front();
  Value* params = graph.add_input(kSamplingParamsInput, DType::kF32, {batch, Dim{kSampleParamCount, ""}});
  Value* uniforms = graph.add_input(kSamplingUniformsInput, DType::kF64, {batch});
  const Dim vocab = logits->dims ? logits->dims->back() : Dim{-1, "vocab"};
  const Dim words = vocab.value > 0 ? Dim{(vocab.value + 63) / 64, ""} : Dim{-1, "mask_words"};
  Value* masks = graph.add_input(kSamplingMaskInput, DType::kI64, {Dim{-1, "masks"}, words});
  Value* tokens = graph.add_value(kSampledTokensOutput);
  tokens->dtype = DType::kI64;
  tokens->dims = std::vector<Dim>{batch};
  graph.outputs.push_back(tokens);

  auto sample = std::make_unique<Node>();
  sample->name = std::string(kSampledTokensOutput) + "/" + SampleTokensParams::kOpType;
  sample->domain = SampleTokensParams::kDomain;
  sample->op_type = SampleTokensParams::kOpType;
  sample->opset = 1;
  sample->inputs = {logits, params, uniforms, masks};
  sample->outputs = {tokens};
  if (every_position) sample->attrs.set("every_position", Attribute{.kind = Attribute::Kind::kInt, .i = 1});
  graph.add_node(std::move(sample));
  OG_RETURN_IF_ERROR(graph.finalize().with_context("adding the sampled tokens output"));
  return true;
}

}  // namespace onnx_genai
