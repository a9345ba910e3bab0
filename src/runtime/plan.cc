#include "runtime/plan.h"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "runtime/node_runner.h"

namespace onnx_genai {

namespace {
// Nodes whose inputs are all known while planning are evaluated then, if their outputs are
// this small (shape arithmetic, masks of constant shape); larger ones run as steps.
constexpr int64_t kPlanTimeEvalMaxElements = 1 << 16;

// Copies one slot's bytes between the host and the device, queued on the device's stream.
class TransferKernel final : public OpKernel {
 public:
  TransferKernel(ExecutionDevice& device, bool to_device, size_t bytes)
      : device_(device), to_device_(to_device), bytes_(bytes) {}
  Status run(const KernelContext& ctx) const override {
    if (bytes_ == 0) return Status::ok();
    return to_device_ ? device_.copy_to_device(ctx.output(0).data, ctx.input(0).data, bytes_)
                      : device_.copy_to_host(ctx.output(0).data, ctx.input(0).data, bytes_);
  }

 private:
  ExecutionDevice& device_;
  bool to_device_;
  size_t bytes_;
};
}  // namespace

class ExecutionPlan::Builder {
 public:
  Builder(ExecutionPlan& plan, const PlannerGraph& pg, ThreadPool* pool) : plan_(plan), pg_(pg), pool_(pool) {}

  Status build(const std::vector<Tensor>& inputs, const std::vector<DeviceType>& output_devices) {
    const Graph& g = *pg_.graph;
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const int s = new_slot(PlanSlot::Kind::kInput, {inputs[i].dtype(), inputs[i].shape()}, g.inputs[i],
                             inputs[i].device().type);
      plan_.slots_[static_cast<size_t>(s)].index = static_cast<int>(i);
      if (pg_.value_keyed_inputs[i]) {
        OG_ASSIGN_OR_RETURN(Tensor copy, inputs[i].clone());
        slot_values_[static_cast<size_t>(s)] = keep(std::move(copy));
      }
    }
    OG_RETURN_IF_ERROR(add_graph(g));
    OG_RETURN_IF_ERROR(bind_outputs(g, output_devices));
    if (pg_.device != nullptr) hoist_host_prologue();
    plan_memory_layout();
    plan_.slot_data_.assign(plan_.slots_.size(), nullptr);
    return Status::ok();
  }

 private:
  int new_slot(PlanSlot::Kind kind, TensorInfo info, const Value* v, DeviceType device = DeviceType::kCpu) {
    PlanSlot slot;
    slot.kind = kind;
    slot.info = std::move(info);
    slot.device = device;
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
    if (v->is_constant()) {
      const int s = constant_slot(v, &v->initializer);
      initializer_slots_.insert(s);
      return s;
    }
    return OG_ERROR(reader.describe(), ": input '", v->name, "' has no value at this point of the plan");
  }

  int root(int slot) const { return plan_.root_slot(slot); }

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
    const OpSchema* schema = pg_.ops().find_schema(node.domain, node.op_type);
    if (schema == nullptr) return OG_ERROR(node.describe(), ": unsupported op");
    OG_ASSIGN_OR_RETURN(NodeInputs in, resolve_inputs(node, *schema));
    InferContext infer{node, in.infos, in.values, {}};
    infer.outputs.resize(node.outputs.size());
    OG_RETURN_IF_ERROR(schema->infer_shapes(infer));
    if (in.all_known && should_evaluate_now(node, infer)) return evaluate_now(node, in.slots);
    return add_step(node, *schema, std::move(in), infer);
  }

  // A node's kernel, prepared, and the device it runs on.
  struct Placed {
    DeviceType device = DeviceType::kCpu;
    std::unique_ptr<OpKernel> kernel;
    size_t workspace_bytes = 0;
  };

  // With an accelerator, a node runs there when a kernel is registered for it there and accepts
  // the node in prepare() (a CUDA kernel may lack a head size or an option the CPU one has); else
  // on the CPU. A view stays where the viewed bytes are (its kernel does nothing).
  Result<Placed> place(const Node& node, const OpSchema& schema, const NodeInputs& in,
                       const std::vector<const TensorInfo*>& outputs) {
    const OpRegistry& registry = pg_.ops();
    if (pg_.device != nullptr && schema.alias_input < 0) {
      const DeviceType device = pg_.device->device().type;
      auto def = registry.find_kernel(node, pg_.device->kernel_device(), in.dtypes);
      if (def.is_ok()) {
        auto placed = prepare_kernel(**def, node, in, outputs);
        if (placed.is_ok()) {
          placed->device = device;
          return placed;
        }
      }
    }
    OG_ASSIGN_OR_RETURN(const KernelDef* def, registry.find_kernel(node, DeviceType::kCpu, in.dtypes));
    OG_ASSIGN_OR_RETURN(Placed placed, prepare_kernel(*def, node, in, outputs));
    const auto alias = static_cast<size_t>(schema.alias_input);
    if (schema.alias_input >= 0 && alias < in.slots.size() && in.slots[alias] >= 0) {
      placed.device = plan_.slots_[static_cast<size_t>(in.slots[alias])].device;
    }
    return placed;
  }

  Result<Placed> prepare_kernel(const KernelDef& def, const Node& node, const NodeInputs& in,
                                const std::vector<const TensorInfo*>& outputs) {
    Placed placed;
    placed.kernel = def.create(node);
    PrepareContext prepare{node, in.infos, in.values, outputs, 0, pool_, pg_.constants, pg_.communicator};
    OG_RETURN_IF_ERROR(placed.kernel->prepare(prepare));
    placed.workspace_bytes = prepare.workspace_bytes;
    return placed;
  }

  Status add_step(const Node& node, const OpSchema& schema, NodeInputs in, const InferContext& infer) {
    std::vector<int> outputs;
    std::vector<const TensorInfo*> out_infos;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      int s = -1;
      if (node.outputs[i] != nullptr) {
        if (!infer.outputs[i]) return OG_ERROR(node.describe(), ": shape inference left output ", i, " unset");
        const bool view = schema.alias_input >= 0 && i == 0;
        s = new_slot(view ? PlanSlot::Kind::kView : PlanSlot::Kind::kArena, *infer.outputs[i], node.outputs[i]);
        if (view) plan_.slots_[static_cast<size_t>(s)].index = in.slots[static_cast<size_t>(schema.alias_input)];
      }
      outputs.push_back(s);
      out_infos.push_back(s >= 0 ? &plan_.slots_[static_cast<size_t>(s)].info : nullptr);
    }
    OG_ASSIGN_OR_RETURN(Placed placed, place(node, schema, in, out_infos));
    if (schema.alias_input < 0) OG_RETURN_IF_ERROR(move_inputs(node, placed.device, in));
    const int step_index = static_cast<int>(plan_.steps_.size());  // after the transfers move_inputs added
    for (int s : outputs) {
      if (s < 0) continue;
      plan_.slots_[static_cast<size_t>(s)].device = placed.device;
      first_step_[static_cast<size_t>(s)] = last_step_[static_cast<size_t>(s)] = step_index;
    }
    PlanStep step;
    step.node = &node;
    step.kernel = std::move(placed.kernel);
    step.inputs = in.slots;
    step.outputs = std::move(outputs);
    step.device = placed.device;
    if (placed.device != DeviceType::kCpu) ++plan_.device_steps_;
    step.sync_before = placed.device == DeviceType::kCpu && reads_unsynced(in.slots);
    if (placed.workspace_bytes > 0) {
      workspace_requests_.push_back({static_cast<int64_t>(placed.workspace_bytes), step_index, step_index});
      workspace_steps_.push_back(step_index);
    }
    for (int s : in.slots) {
      if (s >= 0) mark_read(s, step_index);
    }
    plan_.steps_.push_back(std::move(step));
    return Status::ok();
  }

  // Points the node's inputs at copies on `device` where they live on the other side.
  Status move_inputs(const Node& node, DeviceType device, NodeInputs& in) {
    for (size_t i = 0; i < in.slots.size(); ++i) {
      if (in.slots[i] < 0) continue;
      OG_ASSIGN_OR_RETURN(in.slots[i], on_device(in.slots[i], device, node));
      in.infos[i] = &plan_.slots_[static_cast<size_t>(in.slots[i])].info;
    }
    return Status::ok();
  }

  // `slot`'s bytes on `device`: the slot itself, its copy made for an earlier reader, an uploaded
  // constant, or a new copy made by a transfer step before the step being added.
  Result<int> on_device(int slot, DeviceType device, const Node& reader) {
    const PlanSlot& source = plan_.slots_[static_cast<size_t>(slot)];
    if (source.device == device) return slot;
    if (auto it = moved_.find({slot, device}); it != moved_.end()) return it->second;
    const TensorInfo info = source.info;
    int copy = -1;
    if (source.kind == PlanSlot::Kind::kConstant && device != DeviceType::kCpu) {
      copy = new_slot(PlanSlot::Kind::kConstant, info, nullptr, device);
      PlanSlot& uploaded = plan_.slots_[static_cast<size_t>(copy)];
      uploaded.constant = source.constant;
      if (initializer_slots_.count(slot)) {
        OG_ASSIGN_OR_RETURN(uploaded.device_constant, pg_.device->constant(*source.constant));
      } else {
        OG_ASSIGN_OR_RETURN(std::shared_ptr<void> bytes, pg_.device->upload(*source.constant));
        uploaded.device_constant = bytes.get();
        plan_.device_values_.push_back(std::move(bytes));
      }
    } else {
      copy = add_transfer(slot, device, reader);
    }
    moved_[{slot, device}] = copy;
    return copy;
  }

  int add_transfer(int slot, DeviceType device, const Node& reader) {
    const TensorInfo info = plan_.slots_[static_cast<size_t>(slot)].info;
    const int copy = new_slot(PlanSlot::Kind::kArena, info, nullptr, device);
    const bool to_device = device != DeviceType::kCpu;
    PlanStep step;
    step.node = &reader;
    step.kernel = std::make_unique<TransferKernel>(*pg_.device, to_device,
                                                   static_cast<size_t>(dtype_storage_bytes(info.dtype, info.shape.numel())));
    step.inputs = {slot};
    step.outputs = {copy};
    step.device = pg_.device->device().type;
    step.transfer = true;
    mark_read(slot, static_cast<int>(plan_.steps_.size()));
    plan_.steps_.push_back(std::move(step));
    ++plan_.transfers_;
    if (!to_device) unsynced_.insert(copy);
    return copy;
  }

  // True (and forgets them) when a CPU step reads a copy from the device not yet waited for.
  bool reads_unsynced(const std::vector<int>& slots) {
    const bool reads = std::any_of(slots.begin(), slots.end(), [&](int s) { return s >= 0 && unsynced_.count(root(s)); });
    if (reads) unsynced_.clear();  // one wait covers every copy queued so far
    return reads;
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

  Status bind_outputs(const Graph& g, const std::vector<DeviceType>& output_devices) {
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      Node& reader = plan_.output_readers_.emplace_back();
      reader.op_type = "graph output";
      reader.name = g.outputs[i]->name;
      OG_ASSIGN_OR_RETURN(int s, slot_for(g.outputs[i], reader));
      const DeviceType device = i < output_devices.size() ? output_devices[i] : DeviceType::kCpu;
      if (plan_.slots_[static_cast<size_t>(s)].device != device) {
        if (device != DeviceType::kCpu && (pg_.device == nullptr || pg_.device->device().type != device)) {
          return OG_ERROR("output '", g.outputs[i]->name, "' was asked for on a device this session does not use");
        }
        OG_ASSIGN_OR_RETURN(s, on_device(s, device, reader));
      }
      PlanSlot& slot = plan_.slots_[static_cast<size_t>(s)];
      plan_.output_infos_.push_back(slot.info);
      plan_.output_slots_.push_back(s);
      if (slot.kind == PlanSlot::Kind::kArena && !is_output_slot(s)) {
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

  // Moves the steps that need only the caller's host inputs and constants (CPU steps on them, and
  // their uploads) ahead of all others: otherwise each upload sits where its value is first read,
  // cutting the device work into several segments (plan.h) where one would do. Late inputs
  // (LateInputs) stay where they are read: their bytes come once the work before is queued.
  void hoist_host_prologue() {
    const size_t n = plan_.steps_.size();
    std::vector<bool> known(plan_.slots_.size());  // bytes that exist before any device step runs
    for (size_t s = 0; s < known.size(); ++s) {
      const PlanSlot& slot = plan_.slots_[static_cast<size_t>(root(static_cast<int>(s)))];
      const bool late = slot.kind == PlanSlot::Kind::kInput && plan_.late_inputs_[static_cast<size_t>(slot.index)];
      known[s] = (slot.kind == PlanSlot::Kind::kInput && !late) || slot.kind == PlanSlot::Kind::kConstant;
    }
    const auto all_known = [&](const std::vector<int>& slots) {
      return std::all_of(slots.begin(), slots.end(), [&](int s) { return s < 0 || known[static_cast<size_t>(root(s))]; });
    };
    std::vector<int> order, rest;
    for (size_t i = 0; i < n; ++i) {
      const PlanStep& step = plan_.steps_[i];
      const bool host_side = step.device == DeviceType::kCpu ||
                             (step.transfer && plan_.slots_[static_cast<size_t>(step.inputs[0])].device == DeviceType::kCpu);
      if (host_side && !step.sync_before && all_known(step.inputs)) {
        order.push_back(static_cast<int>(i));
        for (int s : step.outputs) {
          if (s >= 0) known[static_cast<size_t>(s)] = true;
        }
      } else {
        rest.push_back(static_cast<int>(i));
      }
    }
    order.insert(order.end(), rest.begin(), rest.end());
    std::vector<int> moved_to(n);
    for (size_t i = 0; i < n; ++i) moved_to[static_cast<size_t>(order[i])] = static_cast<int>(i);
    if (std::is_sorted(order.begin(), order.end())) return;
    std::vector<PlanStep> steps;
    for (int i : order) steps.push_back(std::move(plan_.steps_[static_cast<size_t>(i)]));
    plan_.steps_ = std::move(steps);
    // Lifetimes in the new order: from the producing step to the last step that touches it (or
    // the end of the run for what the outputs read).
    const int end = static_cast<int>(n);
    for (size_t s = 0; s < first_step_.size(); ++s) {
      if (first_step_[s] < end) first_step_[s] = moved_to[static_cast<size_t>(first_step_[s])];
      if (last_step_[s] < end) last_step_[s] = first_step_[s];
    }
    for (size_t i = 0; i < n; ++i) {
      for (const std::vector<int>* slots : {&plan_.steps_[i].inputs, &plan_.steps_[i].outputs}) {
        for (int s : *slots) {
          if (s < 0) continue;
          int& last = last_step_[static_cast<size_t>(root(s))];
          if (last < end) last = std::max(last, static_cast<int>(i));
        }
      }
    }
    for (size_t w = 0; w < workspace_steps_.size(); ++w) {
      workspace_steps_[w] = moved_to[static_cast<size_t>(workspace_steps_[w])];
      workspace_requests_[w].first_step = workspace_requests_[w].last_step = workspace_steps_[w];
    }
  }

  bool is_output_slot(int s) const { return plan_.slots_[static_cast<size_t>(s)].kind == PlanSlot::Kind::kOutput; }

  // One memory plan per side: host slots and workspaces in the host arena, device ones in the
  // device arena.
  void plan_memory_layout() {
    plan_.memory_ = plan_side(DeviceType::kCpu);
    if (pg_.device != nullptr) plan_.device_memory_ = plan_side(pg_.device->device().type);
  }

  MemoryPlan plan_side(DeviceType device) {
    std::vector<BufferRequest> requests;
    std::vector<int64_t*> offsets;  // where each request's offset goes
    for (size_t s = 0; s < plan_.slots_.size(); ++s) {
      PlanSlot& slot = plan_.slots_[s];
      if (slot.kind != PlanSlot::Kind::kArena || slot.device != device) continue;
      requests.push_back({dtype_storage_bytes(slot.info.dtype, slot.info.shape.numel()), first_step_[s], last_step_[s]});
      offsets.push_back(&slot.offset);
    }
    for (size_t w = 0; w < workspace_steps_.size(); ++w) {
      PlanStep& step = plan_.steps_[static_cast<size_t>(workspace_steps_[w])];
      if (step.device != device) continue;
      requests.push_back(workspace_requests_[w]);
      offsets.push_back(&step.workspace_offset);
    }
    MemoryPlan memory = plan_memory(requests);
    for (size_t r = 0; r < requests.size(); ++r) *offsets[r] = memory.offsets[r];
    return memory;
  }

  ExecutionPlan& plan_;
  const PlannerGraph& pg_;
  ThreadPool* pool_;
  std::map<const Value*, int> slot_of_;
  std::vector<const Tensor*> slot_values_;  // value known while planning, per slot
  std::vector<int> first_step_, last_step_;
  std::vector<BufferRequest> workspace_requests_;
  std::vector<int> workspace_steps_;
  std::set<int> initializer_slots_;               // constant slots holding an initializer
  std::map<std::pair<int, DeviceType>, int> moved_;  // (slot, device) -> its copy there
  std::set<int> unsynced_;                        // copies from the device no CPU step has waited for
};

Result<std::unique_ptr<ExecutionPlan>> ExecutionPlan::compile(const PlannerGraph& pg, const std::vector<Tensor>& inputs,
                                                              const std::vector<DeviceType>& output_devices,
                                                              ThreadPool* pool, std::vector<bool> late_inputs) {
  auto plan = std::unique_ptr<ExecutionPlan>(new ExecutionPlan());
  plan->device_ = pg.device;
  late_inputs.resize(pg.graph->inputs.size());
  plan->late_inputs_ = std::move(late_inputs);
  Builder builder(*plan, pg, pool);
  OG_RETURN_IF_ERROR(builder.build(inputs, output_devices));
  const auto view_of = [&](int s) {
    return s >= 0 ? KernelTensor{plan->slots_[static_cast<size_t>(s)].info.dtype,
                                 &plan->slots_[static_cast<size_t>(s)].info.shape, nullptr}
                  : KernelTensor{};
  };
  plan->first_reader_.assign(pg.graph->inputs.size(), plan->steps_.size());
  for (size_t i = 0; i < plan->steps_.size(); ++i) {
    PlanStep& step = plan->steps_[i];
    for (int s : step.inputs) step.input_views.push_back(view_of(s));
    for (int s : step.outputs) step.output_views.push_back(view_of(s));
    for (int s : step.inputs) {
      if (s < 0) continue;
      const PlanSlot& read = plan->slots_[static_cast<size_t>(plan->root_slot(s))];
      if (read.kind != PlanSlot::Kind::kInput) continue;
      size_t& first = plan->first_reader_[static_cast<size_t>(read.index)];
      first = std::min(first, i);
    }
  }
  if (pg.device != nullptr && pg.device->can_record()) plan->find_device_segments();
  return plan;
}

int ExecutionPlan::root_slot(int s) const {
  while (slots_[static_cast<size_t>(s)].kind == PlanSlot::Kind::kView) s = slots_[static_cast<size_t>(s)].index;
  return s;
}

void ExecutionPlan::find_device_segments() {
  // A copy can be recorded when its host side is the (page-locked) host arena; the caller's
  // input and output tensors are ordinary memory.
  const auto recordable = [&](const PlanStep& step) {
    if (step.device == DeviceType::kCpu) return false;
    if (!step.transfer) return true;
    const int host_side = step.device == slots_[static_cast<size_t>(step.outputs[0])].device ? step.inputs[0] : step.outputs[0];
    return slots_[static_cast<size_t>(root_slot(host_side))].kind == PlanSlot::Kind::kArena;
  };
  segment_at_.assign(steps_.size(), -1);
  for (size_t begin = 0; begin < steps_.size();) {
    size_t end = begin;
    while (end < steps_.size() && recordable(steps_[end])) ++end;
    if (end - begin >= 2) {  // one launch replayed as one launch gains nothing
      DeviceSegment& segment = segments_.emplace_back();
      segment.begin = begin;
      segment.end = end;
      std::set<int> caller;
      for (size_t i = begin; i < end; ++i) {
        for (const std::vector<int>* list : {&steps_[i].inputs, &steps_[i].outputs}) {
          for (int s : *list) {
            if (s < 0) continue;
            const PlanSlot::Kind kind = slots_[static_cast<size_t>(root_slot(s))].kind;
            if (kind == PlanSlot::Kind::kInput || kind == PlanSlot::Kind::kOutput) caller.insert(root_slot(s));
          }
        }
      }
      segment.caller_slots.assign(caller.begin(), caller.end());
      segment_at_[begin] = static_cast<int>(segments_.size() - 1);
    }
    begin = std::max(end, begin + 1);
  }
}

void ExecutionPlan::bind_slots(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                               const PlanArenas& arenas) {
  for (size_t s = 0; s < slots_.size(); ++s) {
    const PlanSlot& slot = slots_[s];
    auto* base = static_cast<uint8_t*>(slot.device == DeviceType::kCpu ? arenas.host : arenas.device);
    switch (slot.kind) {
      case PlanSlot::Kind::kInput: slot_data_[s] = const_cast<void*>(inputs[static_cast<size_t>(slot.index)].raw()); break;
      case PlanSlot::Kind::kConstant:
        slot_data_[s] = const_cast<void*>(slot.device_constant != nullptr ? slot.device_constant : slot.constant->raw());
        break;
      case PlanSlot::Kind::kArena: slot_data_[s] = base + slot.offset; break;
      case PlanSlot::Kind::kOutput: slot_data_[s] = outputs[static_cast<size_t>(slot.index)].raw(); break;
      case PlanSlot::Kind::kView: slot_data_[s] = slot_data_[static_cast<size_t>(slot.index)]; break;
    }
  }
}

Status ExecutionPlan::run_steps(size_t begin, size_t end, const PlanArenas& arenas, ThreadPool* pool) {
  void* stream = device_ != nullptr ? device_->stream() : nullptr;
  for (size_t i = begin; i < end; ++i) {
    PlanStep& step = steps_[i];
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      if (step.inputs[k] >= 0) step.input_views[k].data = slot_data_[static_cast<size_t>(step.inputs[k])];
    }
    for (size_t k = 0; k < step.outputs.size(); ++k) {
      if (step.outputs[k] >= 0) step.output_views[k].data = slot_data_[static_cast<size_t>(step.outputs[k])];
    }
    if (step.sync_before) OG_RETURN_IF_ERROR(device_->synchronize().with_context(step.node->describe()));
    auto* base = static_cast<uint8_t*>(step.device == DeviceType::kCpu ? arenas.host : arenas.device);
    KernelContext ctx{step.input_views, step.output_views,
                      step.workspace_offset >= 0 ? base + step.workspace_offset : nullptr, pool, stream};
    Status status = step.kernel->run(ctx);
    if (!status.is_ok()) return status.with_context(step.node->describe());
  }
  return Status::ok();
}

Status ExecutionPlan::run_segment(DeviceSegment& segment, const PlanArenas& arenas, ThreadPool* pool,
                                  CaptureCounters& counters) {
  bound_.assign({arenas.host, arenas.device});
  for (int s : segment.caller_slots) bound_.push_back(slot_data_[static_cast<size_t>(s)]);
  // Once per token: the context is only spelled out on a failure.
  const auto replay = [&]() -> Status {
    ++counters.replays;
    Status replayed = segment.recording->replay();
    if (replayed.is_ok()) return replayed;
    return replayed.with_context("replaying steps " + steps_[segment.begin].node->describe() + " to " +
                                 steps_[segment.end - 1].node->describe());
  };
  const bool repeated = bound_ == segment.last_bound;
  if (segment.recording != nullptr) {
    if (repeated) return replay();
    segment.recording.reset();
    ++counters.invalidations;
  }
  segment.last_bound.swap(bound_);
  const size_t begin = segment.begin, end = segment.end;
  if (!repeated || segment.unrecordable) return run_steps(begin, end, arenas, pool);
  // The recording may be replayed by re-running the steps (a stand-in device): it keeps copies
  // of what it needs, not references to this call's locals.
  auto recorded = device_->record([this, begin, end, arenas, pool] { return run_steps(begin, end, arenas, pool); });
  if (!recorded.is_ok()) {
    segment.unrecordable = true;
    ++counters.failures;
    counters.last_failure = recorded.status().message();
    return run_steps(begin, end, arenas, pool);
  }
  segment.recording = std::move(*recorded);
  ++counters.captures;
  return replay();
}

Status ExecutionPlan::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, const PlanArenas& arenas,
                          ThreadPool* pool, CaptureCounters* captures, const LateInputs* late) {
  if (device_ != nullptr) OG_RETURN_IF_ERROR(device_->activate());
  size_t fill_at = steps_.size();
  for (size_t i = 0; late != nullptr && i < late->inputs.size(); ++i) {
    const size_t input = late->inputs[i];
    if (input >= late_inputs_.size() || !late_inputs_[input]) {
      return OG_ERROR("internal error: input ", input, " comes late, but the plan was compiled for its bytes up front");
    }
    fill_at = std::min(fill_at, first_reader_[input]);
  }
  bind_slots(inputs, outputs, arenas);
  for (size_t i = 0; i < steps_.size();) {
    const int segment = captures != nullptr && !segment_at_.empty() ? segment_at_[i] : -1;
    const size_t end = segment < 0 ? i + 1 : segments_[static_cast<size_t>(segment)].end;
    if (fill_at < end) {
      OG_RETURN_IF_ERROR(late->fill().with_context("filling the run's late inputs"));
      fill_at = steps_.size();
    }
    if (segment < 0) {
      OG_RETURN_IF_ERROR(run_steps(i, i + 1, arenas, pool));
      ++i;
      continue;
    }
    DeviceSegment& run = segments_[static_cast<size_t>(segment)];
    OG_RETURN_IF_ERROR(run_segment(run, arenas, pool, *captures));
    i = run.end;
  }
  // Host outputs are complete, and a device fault is this run's error, when run() returns.
  const bool on_device = device_ != nullptr && device_steps_ + transfers_ > 0;
  if (on_device) OG_RETURN_IF_ERROR(device_->synchronize().with_context("running the plan"));
  bool queued = false;
  for (const auto& [slot, index] : output_copies_) {
    Tensor& out = outputs[static_cast<size_t>(index)];
    const auto bytes = static_cast<size_t>(out.nbytes());
    if (bytes == 0) continue;
    if (out.device().type == DeviceType::kCpu) {
      std::memcpy(out.raw(), slot_data_[static_cast<size_t>(slot)], bytes);
    } else {
      OG_RETURN_IF_ERROR(device_->copy_on_device(out.raw(), slot_data_[static_cast<size_t>(slot)], bytes));
      queued = true;
    }
  }
  if (queued) OG_RETURN_IF_ERROR(device_->synchronize().with_context("copying the outputs"));
  return Status::ok();
}

}  // namespace onnx_genai
