#include "runtime/graph_passes.h"

#include "ops/op.h"
#include "runtime/node_runner.h"

namespace onnx_genai {

namespace {

// Outputs above this size that are also larger than the node's inputs (an Expand, a
// ConstantOfShape) are left to run time: folding them would only move a large allocation from the
// plan arena into the model's constants. A large output no larger than its inputs (a Transpose of
// a weight: tied embeddings' table is Transpose(lm_head weight)) is folded: otherwise every run
// would recompute it, on the CPU.
constexpr int64_t kFoldMaxElements = 1 << 22;

void check_node(const Node& node, std::vector<std::string>& problems) {
  const OpRegistry& registry = OpRegistry::instance();
  const OpSchema* schema = registry.find_schema(node.domain, node.op_type);
  if (schema == nullptr) {
    problems.push_back((node.domain.empty() ? "" : node.domain + "::") + node.describe() + ": unsupported op");
    return;
  }
  TypeContext ctx{node, {}, {}};
  for (const Value* in : node.inputs) ctx.inputs.push_back(in ? in->dtype : DType::kUndefined);
  ctx.outputs.assign(node.outputs.size(), DType::kUndefined);
  if (schema->infer_types) {
    Status s = schema->infer_types(ctx);
    if (!s.is_ok()) {
      problems.push_back(s.message());
      return;
    }
  } else {
    std::fill(ctx.outputs.begin(), ctx.outputs.end(), ctx.input(0));
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] != nullptr && ctx.outputs[i] != DType::kUndefined) node.outputs[i]->dtype = ctx.outputs[i];
  }
  // If has no kernel: the planner inlines the taken branch.
  if (node.domain.empty() && node.op_type == "If") return;
  auto kernel = registry.find_kernel(node, DeviceType::kCpu, ctx.inputs);
  if (!kernel.is_ok()) problems.push_back(kernel.status().message());
}

void check_graph(const Graph& graph, std::vector<std::string>& problems) {
  for (const auto& node : graph.nodes()) {
    for (const auto& [name, attr] : node->attrs.all()) {
      if (attr.kind == Attribute::Kind::kGraph && attr.g) check_graph(*attr.g, problems);
    }
    check_node(*node, problems);
  }
}

}  // namespace

Status infer_types_and_check_support(Graph& graph) {
  std::vector<std::string> problems;
  check_graph(graph, problems);
  if (problems.empty()) return Status::ok();
  std::string message = std::to_string(problems.size()) + " unsupported node(s): ";
  for (size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : "") + problems[i];
  return Status::error(message);
}

Result<int> fold_constants(Graph& graph, ThreadPool* pool) {
  int folded = 0;
  std::vector<Node*> candidates;
  for (const auto& node : graph.nodes()) candidates.push_back(node.get());
  for (Node* node : candidates) {
    if (node->domain.empty() && node->op_type == "If") continue;
    bool all_constant = node->implicit_inputs.empty();
    std::vector<Tensor> inputs;
    int64_t input_elements = 0;
    for (const Value* in : node->inputs) {
      if (in != nullptr && !in->is_constant()) all_constant = false;
      inputs.push_back(in ? in->initializer : Tensor());
      input_elements += inputs.back().defined() ? inputs.back().numel() : 0;
    }
    if (!all_constant) continue;
    auto results = run_node_on_cpu(*node, inputs, pool);
    // A node that fails here (a bad Reshape, say) is left in place and reports at plan time.
    if (!results.is_ok()) continue;
    int64_t elements = 0;
    for (const Tensor& t : *results) elements += t.defined() ? t.numel() : 0;
    if (elements > kFoldMaxElements && elements > input_elements) continue;
    graph.replace_with_constants(node, std::move(results).value());
    ++folded;
  }
  return folded;
}

PlanTimeValues find_plan_time_values(const Graph& graph) {
  PlanTimeValues result;
  std::vector<const Value*> work;
  // Seed with every value_input of every node, in this graph and in subgraphs.
  std::vector<const Graph*> graphs{&graph};
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    for (const auto& node : graphs[gi]->nodes()) {
      for (const auto& [name, attr] : node->attrs.all()) {
        if (attr.kind == Attribute::Kind::kGraph && attr.g) graphs.push_back(attr.g.get());
      }
      const OpSchema* schema = OpRegistry::instance().find_schema(node->domain, node->op_type);
      if (schema == nullptr) continue;
      for (int vi : schema->value_inputs) {
        if (const Value* v = node->input(static_cast<size_t>(vi))) work.push_back(v);
      }
    }
  }
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    if (!result.values.insert(v).second) continue;
    if (v->is_graph_input) result.graph_inputs.insert(v);
    const Node* p = v->producer;
    if (p == nullptr) continue;
    // Shape and Size read only the shape of their input, which is always known when planning.
    const OpSchema* producer_schema = OpRegistry::instance().find_schema(p->domain, p->op_type);
    if (producer_schema != nullptr && producer_schema->reads_only_input_shapes) continue;
    for (const Value* in : p->all_inputs()) {
      if (in != nullptr) work.push_back(in);
    }
  }
  return result;
}

}  // namespace onnx_genai
