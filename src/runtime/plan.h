// An execution plan: a graph compiled for one set of bound input shapes (and the values of
// inputs that decide shapes). Compiling does all host-side work — shape inference, plan-time
// evaluation of shape arithmetic, If-branch selection, kernel selection and preparation, the
// static memory plan. Running only patches data pointers and calls kernels in order.
//
//   slots: every tensor the plan touches     steps: kernels in topological order
//   ┌────────┬──────────────────────────┐    ┌──────┬────────────┬─────────────┬────────┐
//   │ input  │ caller's buffer          │    │ node │ in slots   │ out slots   │ device │
//   │ const  │ initializer / plan value │    └──────┴────────────┴─────────────┴────────┘
//   │ arena  │ base + planned offset    │
//   │ output │ caller's output tensor   │
//   │ view   │ another slot's bytes     │
//   └────────┴──────────────────────────┘
//
// On an accelerator (PlannerGraph::device), a node runs there when a kernel for that device
// accepts it, else on the CPU. A slot lives on one device; where a step reads a slot from the
// other side, the plan copies it once (a transfer step, queued on the device's stream) and later
// readers share the copy. Initializers are uploaded once per session; every slot on the device
// gets its bytes from a second arena in device memory, planned the same way. A CPU step that
// reads bytes copied from the device waits for the stream first; a run ends with the stream
// drained, so host outputs are complete when run() returns.
//
// On a device that records (CUDA graphs), each run of two or more consecutive steps that only
// queue device work — kernels, and copies between the device and the host arena, which is
// page-locked there — is a segment. A segment runs step by step until a run binds the same
// pointers as the run before (the same arenas, inputs and outputs: a decode step with a
// fixed-capacity KV cache does); that run records it, and every later run with those pointers
// replays the recording as one launch. Other pointers drop the recording (an invalidation).
#pragma once

#include <deque>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "onnx_genai/session.h"
#include "ops/op.h"
#include "runtime/execution_device.h"
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
  DeviceType device = DeviceType::kCpu;
  const void* device_constant = nullptr;  // kConstant on the device: its uploaded bytes
};

struct PlanStep {
  const Node* node = nullptr;
  std::unique_ptr<OpKernel> kernel;
  std::vector<int> inputs;   // slot indices, -1 for omitted
  std::vector<int> outputs;  // slot indices, -1 for omitted
  int64_t workspace_offset = -1;  // in the arena of the step's device
  DeviceType device = DeviceType::kCpu;
  bool sync_before = false;  // a CPU step reading bytes a transfer copied from the device
  bool transfer = false;     // a copy between the host and the device
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
  Communicator* communicator = nullptr;        // SessionOptions::communicator, for collectives
  ExecutionDevice* device = nullptr;           // the session's accelerator; null: CPU only
  const OpRegistry* registry = nullptr;        // schemas and kernels; null: the built-in ones
  const OpRegistry& ops() const { return registry != nullptr ? *registry : OpRegistry::instance(); }
};

// Recorded device work, summed over runs (ExecutionPlan::run adds to it).
struct CaptureCounters {
  int64_t captures = 0;       // segments recorded
  int64_t replays = 0;        // segment runs that were one replay
  int64_t invalidations = 0;  // recordings dropped because a run bound other pointers
  int64_t failures = 0;       // segments that could not be recorded (they run step by step)
  std::string last_failure;
};

// Where a run's intermediates live: the host arena and, with an accelerator, the device arena.
struct PlanArenas {
  void* host = nullptr;
  void* device = nullptr;
};

class ExecutionPlan {
 public:
  // `inputs[i]` is graph input i as bound for this run (shapes/dtypes, device and, for value-keyed
  // inputs, the values that are baked into the plan); output i is written on `output_devices[i]`
  // (all on the CPU when empty).
  // `late_inputs` (per graph input, missing ones false) marks those whose bytes a run's
  // LateInputs fill: their uploads stay at their first reader instead of running first.
  static Result<std::unique_ptr<ExecutionPlan>> compile(const PlannerGraph& pg, const std::vector<Tensor>& inputs,
                                                        const std::vector<DeviceType>& output_devices,
                                                        ThreadPool* pool, std::vector<bool> late_inputs = {});

  // Runs with the arenas (at least arena_bytes() and device_arena_bytes(), aligned). `outputs`
  // must already be allocated with output_infos() shapes on the compiled output devices. With
  // `captures`, device segments are recorded and replayed (and counted there); without, every
  // step is launched on its own. With `late` (inputs compiled as late only), its fill runs before
  // the first step (or segment holding the first step) that reads one of its inputs.
  Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, const PlanArenas& arenas,
             ThreadPool* pool, CaptureCounters* captures = nullptr, const LateInputs* late = nullptr);

  int64_t arena_bytes() const { return memory_.arena_bytes; }
  int64_t device_arena_bytes() const { return device_memory_.arena_bytes; }
  const MemoryPlan& memory() const { return memory_; }
  size_t num_device_steps() const { return device_steps_; }
  size_t num_transfers() const { return transfers_; }
  size_t num_device_segments() const { return segments_.size(); }
  const std::vector<TensorInfo>& output_infos() const { return output_infos_; }
  size_t num_steps() const { return steps_.size(); }
  size_t num_plan_time_nodes() const { return plan_time_nodes_; }

 private:
  class Builder;
  // Steps [begin, end) that only queue device work, recorded and replayed as one.
  struct DeviceSegment {
    size_t begin = 0, end = 0;
    std::vector<int> caller_slots;        // inputs and outputs its steps touch (other pointers are fixed)
    std::vector<const void*> last_bound;  // the arenas and those slots' pointers at its last run
    std::unique_ptr<ExecutionDevice::Recording> recording;
    bool unrecordable = false;
  };
  void bind_slots(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, const PlanArenas& arenas);
  void find_device_segments();
  Status run_steps(size_t begin, size_t end, const PlanArenas& arenas, ThreadPool* pool);
  Status run_segment(DeviceSegment& segment, const PlanArenas& arenas, ThreadPool* pool, CaptureCounters& counters);
  int root_slot(int s) const;
  std::deque<PlanSlot> slots_;  // a deque: kernels may keep pointers to slot infos from prepare()
  std::vector<PlanStep> steps_;
  std::vector<int> output_slots_;
  std::vector<TensorInfo> output_infos_;
  // Graph outputs whose producing slot is not the output buffer itself (a view of an input,
  // a constant, a value listed twice): copied after the last step.
  std::vector<std::pair<int, int>> output_copies_;  // (slot, output index)
  std::vector<std::unique_ptr<Tensor>> plan_values_;  // tensors evaluated while planning
  std::deque<Node> output_readers_;  // stand-in nodes naming graph outputs in transfer errors
  std::vector<std::shared_ptr<void>> device_values_;  // plan values uploaded to the device
  std::vector<void*> slot_data_;                      // scratch, sized once
  std::vector<DeviceSegment> segments_;
  std::vector<int> segment_at_;  // per step: the segment it begins, or -1
  std::vector<size_t> first_reader_;  // per graph input: the first step reading it, or steps_.size()
  std::vector<bool> late_inputs_;     // per graph input: compiled to come late
  std::vector<const void*> bound_;  // scratch for a segment's pointers
  ExecutionDevice* device_ = nullptr;
  MemoryPlan memory_, device_memory_;
  size_t device_steps_ = 0, transfers_ = 0;
  size_t plan_time_nodes_ = 0;
};

}  // namespace onnx_genai
