// Session: an ONNX model loaded, checked and ready to run on the CPU.
//
//   auto session = Session::load("model.onnx").value();
//   auto outputs = session->run_named({{"input_ids", ids}, {"attention_mask", mask}});
//
// The first run with a new set of input shapes compiles an execution plan (shape inference,
// kernel selection, static memory plan); later runs with the same shapes replay it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "onnx_genai/status.h"
#include "onnx_genai/tensor.h"

namespace onnx_genai {

class Communicator;
struct Model;

struct SessionOptions {
  int num_threads = 0;           // intra-op threads including the caller; 0 = all cores
  size_t max_cached_plans = 16;  // least recently used plans beyond this are dropped
  // cuda:N runs every node with a CUDA kernel on that GPU (the rest on the CPU, with copies
  // between them); inputs and outputs may then be tensors on that device.
  Device device = Device::cpu();
  // On a GPU, record runs of device work as CUDA graphs once a plan repeats with the same
  // buffers, and replay them (one launch instead of one per kernel).
  bool capture_device_graphs = true;
  // A plan whose activations need a larger arena (on the host or the device) is refused before
  // anything is allocated: a huge symbolic dim becomes an error, not a machine out of memory.
  // 0 = the machine's physical memory.
  int64_t max_arena_bytes = 0;
  // One rank's end of a tensor-parallel group (src/parallel/communicator.h), for the collectives
  // a sharded graph holds (runtime/tensor_parallel_pass.h); null for an unsharded graph.
  std::shared_ptr<Communicator> communicator;
};

// The arena limit `options` sets: max_arena_bytes, or the physical memory when that is 0.
int64_t arena_limit_bytes(const SessionOptions& options);

struct IoInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  // Declared dims: >= 0 fixed, -1 symbolic or unknown (see `symbols`).
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;  // per dim, the symbol name or ""
  bool rank_known = false;
};

struct SessionStats {
  int64_t plans_compiled = 0;
  int64_t plan_cache_hits = 0;
  int64_t runs = 0;
  int64_t arena_bytes = 0;            // current arena size (max over cached plans)
  int64_t last_plan_arena_bytes = 0;  // memory plan of the plan used last
  int64_t last_plan_requested_bytes = 0;  // what that plan would use without buffer reuse
  int64_t last_plan_steps = 0;
  int64_t nodes_folded = 0;
  int64_t initializer_bytes_mapped = 0;
  int64_t initializer_bytes_copied = 0;
  int64_t device_arena_bytes = 0;       // the device's activation arena (max over cached plans)
  int64_t last_plan_device_steps = 0;   // steps of the last plan that ran on the device
  int64_t last_plan_transfers = 0;      // copies between host and device in that plan
  int64_t last_plan_graph_segments = 0;  // runs of device steps that plan records as graphs
  int64_t graph_captures = 0;           // segments recorded (CUDA graphs instantiated)
  int64_t graph_replays = 0;            // segment runs that were one graph launch
  int64_t graph_invalidations = 0;      // recordings dropped: a run bound other buffers
  int64_t graph_capture_failures = 0;   // segments that could not be recorded (run step by step)
  std::string last_graph_capture_failure;
};

// Inputs a run may be given before their bytes are ready (their shapes, as passed, choose the
// plan as usual): `fill` is called once, just before the first step that reads any of `inputs`,
// and writes what is not written yet. On a device the work queued before that step runs while
// `fill` does, so the host computes something the graph needs late (structured output's token
// masks) during the model's forward pass. Not called when no step reads them. A plan is
// compiled per set of late inputs (their uploads wait at their readers instead of running
// first). Inputs whose values decide shapes cannot come late.
struct LateInputs {
  std::vector<size_t> inputs;  // positions in Session::inputs()
  std::function<Status()> fill;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> load(const std::string& path, const SessionOptions& options = {});
  static Result<std::unique_ptr<Session>> create(std::shared_ptr<Model> model, const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::vector<IoInfo>& inputs() const;
  const std::vector<IoInfo>& outputs() const;

  // Inputs by position, in inputs() order.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs);
  // Inputs by name; every graph input must be given.
  Result<std::vector<Tensor>> run_named(const std::map<std::string, Tensor>& inputs);
  // Writes into `outputs`, reusing tensors whose dtype and shape already match (others are
  // (re)allocated). Repeating a run with the same shapes and outputs allocates nothing. An
  // output given on the session's device is written there; every other output is a CPU tensor.
  Status run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);
  Status run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, const LateInputs& late);

  SessionStats stats() const;
  int num_threads() const;
  Device device() const;
  // Memory for tensors on device() (the CPU allocator on the CPU).
  Allocator& allocator() const;
  // Host memory that inputs are copied to device() from fastest (page-locked on a GPU: the copy
  // neither stages nor waits; the CPU allocator otherwise).
  Allocator& host_allocator() const;

 private:
  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace onnx_genai
