// An execution plan: a graph compiled for one set of bound input shapes (and the values of
// inputs that decide shapes). Compiling does all host-side work — shape inference, plan-time
// evaluation of shape arithmetic, If-branch selection, kernel selection and preparation, the
// static memory plan. Running only patches data pointers and calls kernels in order.
//
//   slots: every tensor the plan touches     steps: kernels in topological order
//   ┌────────┬──────────────────────────┐    ┌──────┬────────────┬─────────────┐
//   │ input  │ caller's buffer          │    │ node │ in slots   │ out slots   │
//   │ const  │ initializer / plan value │    └──────┴────────────┴─────────────┘
//   │ arena  │ base + planned offset    │
//   │ output │ caller's output tensor   │
//   │ view   │ another slot's bytes     │
//   └────────┴──────────────────────────┘
#pragma once

#include <deque>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/op.h"
#include "runtime/memory_planner.h"

namespace onnx_genai {

class ThreadPool;

struct PlanSlot {
  enum class Kind { kInput, kConstant, kArena, kOutput, kView };
  Kind kind = Kind::kArena;
  TensorInfo info;
  int index = -1;        // kInput: graph input index; kOutput: graph output index; kView: viewed slot
  int64_t offset = 0;    // kArena
  const Tensor* constant = nullptr;  // kConstant
};

struct PlanStep {
  const Node* node = nullptr;
  std::unique_ptr<OpKernel> kernel;
  std::vector<int> inputs;   // slot indices, -1 for omitted
  std::vector<int> outputs;  // slot indices, -1 for omitted
  int64_t workspace_offset = -1;
  // Views handed to the kernel; data pointers are patched before each run.
  std::vector<KernelTensor> input_views;
  std::vector<KernelTensor> output_views;
};

// What a graph looks like to the planner: its structure plus facts computed once at load.
struct PlannerGraph {
  const Graph* graph = nullptr;
  std::vector<bool> value_keyed_inputs;  // per graph input: its value is part of the plan key
  std::set<const Value*> needed_at_plan_time;  // values some node reads to decide a shape
  PreparedConstants* constants = nullptr;      // the session's, shared by its plans
};

class ExecutionPlan {
 public:
  // `inputs[i]` is graph input i as bound for this run (shapes/dtypes and, for value-keyed
  // inputs, the values that are baked into the plan).
  static Result<std::unique_ptr<ExecutionPlan>> compile(const PlannerGraph& pg, const std::vector<Tensor>& inputs,
                                                        ThreadPool* pool);

  // Runs with the arena at `arena` (at least arena_bytes(), 64-byte aligned). `outputs` must
  // already be allocated with output_infos() shapes.
  Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, void* arena, ThreadPool* pool);

  int64_t arena_bytes() const { return memory_.arena_bytes; }
  const MemoryPlan& memory() const { return memory_; }
  const std::vector<TensorInfo>& output_infos() const { return output_infos_; }
  size_t num_steps() const { return steps_.size(); }
  size_t num_plan_time_nodes() const { return plan_time_nodes_; }

 private:
  class Builder;
  std::deque<PlanSlot> slots_;  // a deque: kernels may keep pointers to slot infos from prepare()
  std::vector<PlanStep> steps_;
  std::vector<int> output_slots_;
  std::vector<TensorInfo> output_infos_;
  // Graph outputs whose producing slot is not the output buffer itself (a view of an input,
  // a constant, a value listed twice): copied after the last step.
  std::vector<std::pair<int, int>> output_copies_;  // (slot, output index)
  std::vector<std::unique_ptr<Tensor>> plan_values_;  // tensors evaluated while planning
  std::vector<void*> slot_data_;                      // scratch, sized once
  MemoryPlan memory_;
  size_t plan_time_nodes_ = 0;
};

}  // namespace onnx_genai
