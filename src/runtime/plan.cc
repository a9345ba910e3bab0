#include "runtime/plan.h"

#include <cstring>

#include "core/thread_pool.h"
#include "runtime/node_runner.h"

namespace onnx_genai {

namespace {
// Nodes whose inputs are all known while planning are evaluated then, if their outputs are
// this small (shape arithmetic, masks of constant shape); larger ones run as steps.
constexpr int64_t kPlanTimeEvalMaxElements = 1 << 16;
}  // namespace

class ExecutionPlan::Builder {
 public:
  Builder(ExecutionPlan& plan, const PlannerGraph& pg, ThreadPool* pool) : plan_(plan), pg_(pg), pool_(pool) {}

  Status build(const std::vector<Tensor>& inputs) {
    const Graph& g = *pg_.graph;
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const int s = new_slot(PlanSlot::Kind::kInput, {inputs[i].dtype(), inputs[i].shape()}, g.inputs[i]);
      plan_.slots_[static_cast<size_t>(s)].index = static_cast<int>(i);
      if (pg_.value_keyed_inputs[i]) {
        OG_ASSIGN_OR_RETURN(Tensor copy, inputs[i].clone());
        slot_values_[static_cast<size_t>(s)] = keep(std::move(copy));
      }
    }
    OG_RETURN_IF_ERROR(add_graph(g));
    OG_RETURN_IF_ERROR(bind_outputs(g));
    plan_memory_layout();
    plan_.slot_data_.assign(plan_.slots_.size(), nullptr);
    return Status::ok();
  }

 private:
  int new_slot(PlanSlot::Kind kind, TensorInfo info, const Value* v) {
    PlanSlot slot;
    slot.kind = kind;
    slot.info = std::move(info);
    plan_.slots_.push_back(std::move(slot));
    slot_values_.push_back(nullptr);
    first_step_.push_back(static_cast<int>(plan_.steps_.size()));
    last_step_.push_back(static_cast<int>(plan_.steps_.size()));
    const int index = static_cast<int>(plan_.slots_.size()) - 1;
    if (v != nullptr) slot_of_[v] = index;
    return index;
  }

  const Tensor* keep(Tensor t) {
    plan_.plan_values_.push_back(std::make_unique<Tensor>(std::move(t)));
    return plan_.plan_values_.back().get();
  }

  int constant_slot(const Value* v, const Tensor* value) {
    const int s = new_slot(PlanSlot::Kind::kConstant, {value->dtype(), value->shape()}, v);
    plan_.slots_[static_cast<size_t>(s)].constant = value;
    slot_values_[static_cast<size_t>(s)] = value;
    return s;
  }

  Result<int> slot_for(const Value* v, const Node& reader) {
    auto it = slot_of_.find(v);
    if (it != slot_of_.end()) return it->second;
    if (v->is_constant()) return constant_slot(v, &v->initializer);
    return OG_ERROR(reader.describe(), ": input '", v->name, "' has no value at this point of the plan");
  }

  int root(int slot) const {
    while (plan_.slots_[static_cast<size_t>(slot)].kind == PlanSlot::Kind::kView) slot = plan_.slots_[static_cast<size_t>(slot)].index;
    return slot;
  }

  void mark_read(int slot, int step) {
    const int r = root(slot);
    last_step_[static_cast<size_t>(r)] = std::max(last_step_[static_cast<size_t>(r)], step);
  }

  Status add_graph(const Graph& g) {
    for (const auto& node : g.nodes()) {
      if (node->domain.empty() && node->op_type == "If") {
        OG_RETURN_IF_ERROR(inline_if(*node));
      } else {
        OG_RETURN_IF_ERROR(add_node(*node));
      }
    }
    return Status::ok();
  }

  // An If whose condition is known while planning is replaced by the nodes of the taken branch.
  Status inline_if(const Node& node) {
    OG_ASSIGN_OR_RETURN(int cond_slot, slot_for(node.input(0), node));
    const Tensor* cond = slot_values_[static_cast<size_t>(cond_slot)];
    if (cond == nullptr) {
      return OG_ERROR(node.describe(), ": the condition must be known when planning (a graph input or constant)");
    }
    if (cond->numel() != 1) return OG_ERROR(node.describe(), ": condition must hold one element");
    const bool taken = cond->to_i64_vector()[0] != 0;
    const Attribute* branch = node.attrs.find(taken ? "then_branch" : "else_branch");
    if (branch == nullptr || branch->g == nullptr) return OG_ERROR(node.describe(), ": missing branch subgraph");
    const Graph& g = *branch->g;
    if (g.outputs.size() != node.outputs.size()) {
      return OG_ERROR(node.describe(), ": branch has ", g.outputs.size(), " outputs, node has ", node.outputs.size());
    }
    OG_RETURN_IF_ERROR(add_graph(g));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] == nullptr) continue;
      OG_ASSIGN_OR_RETURN(int s, slot_for(g.outputs[i], node));
      slot_of_[node.outputs[i]] = s;
    }
    return Status::ok();
  }

  // A node's inputs as the planner sees them.
  struct NodeInputs {
    std::vector<int> slots;  // -1 for omitted
    std::vector<const TensorInfo*> infos;
    std::vector<const Tensor*> values;  // known while planning, else null
    std::vector<DType> dtypes;
    bool all_known = true;  // every value the node reads is known while planning
  };

  Result<NodeInputs> resolve_inputs(const Node& node, const OpSchema& schema) {
    NodeInputs in;
    for (const Value* v : node.inputs) {
      int s = -1;
      if (v != nullptr) {
        OG_ASSIGN_OR_RETURN(s, slot_for(v, node));
      }
      const auto i = static_cast<size_t>(s);
      in.slots.push_back(s);
      in.infos.push_back(s >= 0 ? &plan_.slots_[i].info : nullptr);
      in.values.push_back(s >= 0 ? slot_values_[i] : nullptr);
      in.dtypes.push_back(s >= 0 ? plan_.slots_[i].info.dtype : DType::kUndefined);
      in.all_known = in.all_known && (s < 0 || in.values.back() != nullptr || schema.reads_only_input_shapes);
    }
    for (int vi : schema.value_inputs) {
      const auto i = static_cast<size_t>(vi);
      if (i < in.slots.size() && in.slots[i] >= 0 && in.values[i] == nullptr) {
        return OG_ERROR(node.describe(), ": input ", vi, " ('", node.inputs[i]->name,
                        "') decides the output shape but is computed from data at run time");
      }
    }
    return in;
  }

  Status add_node(const Node& node) {
    const OpSchema* schema = OpRegistry::instance().find_schema(node.domain, node.op_type);
    if (schema == nullptr) return OG_ERROR(node.describe(), ": unsupported op");
    OG_ASSIGN_OR_RETURN(NodeInputs in, resolve_inputs(node, *schema));
    InferContext infer{node, in.infos, in.values, {}};
    infer.outputs.resize(node.outputs.size());
    OG_RETURN_IF_ERROR(schema->infer_shapes(infer));
    if (in.all_known && should_evaluate_now(node, infer)) return evaluate_now(node, in.slots);
    return add_step(node, *schema, in, infer);
  }

  Status add_step(const Node& node, const OpSchema& schema, const NodeInputs& in, const InferContext& infer) {
    OG_ASSIGN_OR_RETURN(const KernelDef* def, OpRegistry::instance().find_kernel(node, DeviceType::kCpu, in.dtypes));
    PlanStep step;
    step.node = &node;
    step.kernel = def->create(node);
    step.inputs = in.slots;
    const int step_index = static_cast<int>(plan_.steps_.size());
    std::vector<const TensorInfo*> out_infos;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      int s = -1;
      if (node.outputs[i] != nullptr) {
        if (!infer.outputs[i]) return OG_ERROR(node.describe(), ": shape inference left output ", i, " unset");
        const bool view = schema.alias_input >= 0 && i == 0;
        s = new_slot(view ? PlanSlot::Kind::kView : PlanSlot::Kind::kArena, *infer.outputs[i], node.outputs[i]);
        if (view) plan_.slots_[static_cast<size_t>(s)].index = in.slots[static_cast<size_t>(schema.alias_input)];
      }
      step.outputs.push_back(s);
      out_infos.push_back(s >= 0 ? &plan_.slots_[static_cast<size_t>(s)].info : nullptr);
    }
    PrepareContext prepare{node, in.infos, in.values, out_infos, 0, pool_, pg_.constants};
    OG_RETURN_IF_ERROR(step.kernel->prepare(prepare));
    if (prepare.workspace_bytes > 0) {
      workspace_requests_.push_back({static_cast<int64_t>(prepare.workspace_bytes), step_index, step_index});
      workspace_steps_.push_back(step_index);
    }
    for (int s : in.slots) {
      if (s >= 0) mark_read(s, step_index);
    }
    plan_.steps_.push_back(std::move(step));
    return Status::ok();
  }

  bool should_evaluate_now(const Node& node, const InferContext& infer) const {
    for (const Value* out : node.outputs) {
      if (out != nullptr && pg_.needed_at_plan_time.count(out)) return true;
    }
    int64_t elements = 0;
    for (const auto& out : infer.outputs) {
      if (out) elements += out->shape.numel();
    }
    return elements <= kPlanTimeEvalMaxElements;
  }

  Status evaluate_now(const Node& node, const std::vector<int>& in_slots) {
    std::vector<Tensor> args;
    for (int s : in_slots) {
      if (s < 0) {
        args.emplace_back();
      } else if (const Tensor* value = slot_values_[static_cast<size_t>(s)]) {
        args.push_back(*value);
      } else {  // a shape-only op: a tensor with the right shape and no bytes is all it reads
        const TensorInfo& info = plan_.slots_[static_cast<size_t>(s)].info;
        args.push_back(Tensor::view(info.dtype, info.shape, nullptr));
      }
    }
    OG_ASSIGN_OR_RETURN(std::vector<Tensor> results, run_node_on_cpu(node, args, pool_));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] != nullptr) constant_slot(node.outputs[i], keep(std::move(results[i])));
    }
    ++plan_.plan_time_nodes_;
    return Status::ok();
  }

  Status bind_outputs(const Graph& g) {
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      Node reader;
      reader.op_type = "graph output";
      reader.name = g.outputs[i]->name;
      OG_ASSIGN_OR_RETURN(int s, slot_for(g.outputs[i], reader));
      PlanSlot& slot = plan_.slots_[static_cast<size_t>(s)];
      plan_.output_infos_.push_back(slot.info);
      plan_.output_slots_.push_back(s);
      if (slot.kind == PlanSlot::Kind::kArena) {
        // The producing kernel writes straight into the caller's output tensor.
        slot.kind = PlanSlot::Kind::kOutput;
        slot.index = static_cast<int>(i);
      } else {
        plan_.output_copies_.emplace_back(s, static_cast<int>(i));
        mark_read(s, static_cast<int>(plan_.steps_.size()));
      }
    }
    return Status::ok();
  }

  void plan_memory_layout() {
    std::vector<BufferRequest> requests;
    std::vector<int> request_slot;
    for (size_t s = 0; s < plan_.slots_.size(); ++s) {
      if (plan_.slots_[s].kind != PlanSlot::Kind::kArena) continue;
      const TensorInfo& info = plan_.slots_[s].info;
      requests.push_back({dtype_storage_bytes(info.dtype, info.shape.numel()), first_step_[s], last_step_[s]});
      request_slot.push_back(static_cast<int>(s));
    }
    const size_t num_slot_requests = requests.size();
    requests.insert(requests.end(), workspace_requests_.begin(), workspace_requests_.end());
    plan_.memory_ = plan_memory(requests);
    for (size_t r = 0; r < num_slot_requests; ++r) {
      plan_.slots_[static_cast<size_t>(request_slot[r])].offset = plan_.memory_.offsets[r];
    }
    for (size_t w = 0; w < workspace_steps_.size(); ++w) {
      plan_.steps_[static_cast<size_t>(workspace_steps_[w])].workspace_offset = plan_.memory_.offsets[num_slot_requests + w];
    }
  }

  ExecutionPlan& plan_;
  const PlannerGraph& pg_;
  ThreadPool* pool_;
  std::map<const Value*, int> slot_of_;
  std::vector<const Tensor*> slot_values_;  // value known while planning, per slot
  std::vector<int> first_step_, last_step_;
  std::vector<BufferRequest> workspace_requests_;
  std::vector<int> workspace_steps_;
};

Result<std::unique_ptr<ExecutionPlan>> ExecutionPlan::compile(const PlannerGraph& pg, const std::vector<Tensor>& inputs,
                                                              ThreadPool* pool) {
  auto plan = std::unique_ptr<ExecutionPlan>(new ExecutionPlan());
  Builder builder(*plan, pg, pool);
  OG_RETURN_IF_ERROR(builder.build(inputs));
  for (PlanStep& step : plan->steps_) {
    for (int s : step.inputs) {
      step.input_views.push_back(s >= 0 ? KernelTensor{plan->slots_[static_cast<size_t>(s)].info.dtype,
                                                       &plan->slots_[static_cast<size_t>(s)].info.shape, nullptr}
                                        : KernelTensor{});
    }
    for (int s : step.outputs) {
      step.output_views.push_back(s >= 0 ? KernelTensor{plan->slots_[static_cast<size_t>(s)].info.dtype,
                                                        &plan->slots_[static_cast<size_t>(s)].info.shape, nullptr}
                                         : KernelTensor{});
    }
  }
  return plan;
}

Status ExecutionPlan::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, void* arena,
                          ThreadPool* pool) {
  auto* base = static_cast<uint8_t*>(arena);
  for (size_t s = 0; s < slots_.size(); ++s) {
    const PlanSlot& slot = slots_[s];
    switch (slot.kind) {
      case PlanSlot::Kind::kInput: slot_data_[s] = const_cast<void*>(inputs[static_cast<size_t>(slot.index)].raw()); break;
      case PlanSlot::Kind::kConstant: slot_data_[s] = const_cast<void*>(slot.constant->raw()); break;
      case PlanSlot::Kind::kArena: slot_data_[s] = base + slot.offset; break;
      case PlanSlot::Kind::kOutput: slot_data_[s] = outputs[static_cast<size_t>(slot.index)].raw(); break;
      case PlanSlot::Kind::kView: slot_data_[s] = slot_data_[static_cast<size_t>(slot.index)]; break;
    }
  }
  for (PlanStep& step : steps_) {
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (step.inputs[i] >= 0) step.input_views[i].data = slot_data_[static_cast<size_t>(step.inputs[i])];
    }
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      if (step.outputs[i] >= 0) step.output_views[i].data = slot_data_[static_cast<size_t>(step.outputs[i])];
    }
    KernelContext ctx{step.input_views, step.output_views, step.workspace_offset >= 0 ? base + step.workspace_offset : nullptr,
                      pool};
    Status status = step.kernel->run(ctx);
    if (!status.is_ok()) return status.with_context(step.node->describe());
  }
  for (const auto& [slot, index] : output_copies_) {
    Tensor& out = outputs[static_cast<size_t>(index)];
    if (out.nbytes() > 0) std::memcpy(out.raw(), slot_data_[static_cast<size_t>(slot)], static_cast<size_t>(out.nbytes()));
  }
  return Status::ok();
}

}  // namespace onnx_genai
