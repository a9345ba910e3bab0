// How an operator plugs in. Two registries, both keyed by (domain, op_type):
//
//   OpSchema  - device independent: output dtypes at load, output shapes at plan time, which
//               inputs' *values* decide shapes, and whether output 0 is a view of an input.
//   KernelDef - one implementation for a (device, dtype set, opset range); creates an OpKernel
//               per node per plan.
//
// Recipe for a new op: (1) a schema in src/ops/schema/<family>.cc, (2) a CPU kernel in
// src/ops/cpu/<family>.cc, (3) a test in tests/ops/ (and, once it exists, a CUDA kernel in
// src/ops/cuda/ checked against the CPU one).
//
// Life of a kernel:  create(node) -> prepare(ctx) once per plan (shapes fixed; validate, cache
// parameters, declare workspace) -> run(ctx) many times (no allocation, no shape inference).
#pragma once

#include <climits>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "onnx_genai/status.h"
#include "onnx_genai/tensor.h"

namespace onnx_genai {

class Communicator;
class ThreadPool;

struct TensorInfo {
  DType dtype = DType::kUndefined;
  Shape shape;
};

// Load time: output dtypes from input dtypes and attributes.
struct TypeContext {
  const Node& node;
  std::vector<DType> inputs;   // kUndefined for omitted optional inputs
  std::vector<DType> outputs;  // to fill; sized to node.outputs
  DType input(size_t i) const { return i < inputs.size() ? inputs[i] : DType::kUndefined; }
};

// Plan time: concrete shapes in, concrete shapes out.
struct InferContext {
  const Node& node;
  std::vector<const TensorInfo*> inputs;     // null for omitted optional inputs
  std::vector<const Tensor*> input_values;   // host value when known at plan time, else null
  std::vector<std::optional<TensorInfo>> outputs;  // to fill; sized to node.outputs

  int num_inputs() const { return static_cast<int>(inputs.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs[static_cast<size_t>(i)] != nullptr; }
  const TensorInfo& input(int i) const { return *inputs[static_cast<size_t>(i)]; }
  const Shape& shape(int i) const { return input(i).shape; }
  const Tensor* value(int i) const {
    return i < static_cast<int>(input_values.size()) ? input_values[static_cast<size_t>(i)] : nullptr;
  }
  const Attributes& attrs() const { return node.attrs; }
  int opset() const { return node.opset; }
  void set_output(int i, DType dtype, Shape shape) {
    outputs[static_cast<size_t>(i)] = TensorInfo{dtype, std::move(shape)};
  }
  // "Reshape (node 'r1'): <msg>" as a failed Status.
  template <typename... Args>
  Status fail(const Args&... args) const { return OG_ERROR(node.describe(), ": ", args...); }
};

struct OpSchema {
  std::string domain;
  std::string op_type;
  // Default (when null): every output takes the dtype of input 0.
  std::function<Status(TypeContext&)> infer_types;
  std::function<Status(InferContext&)> infer_shapes;
  // Inputs whose values must be known to plan (Reshape's shape, Range's bounds, If's cond).
  // A graph input feeding one of these becomes part of the plan cache key.
  std::vector<int> value_inputs;
  // >= 0: output 0 shares input `alias_input`'s storage (Reshape, Squeeze, Identity): no copy.
  int alias_input = -1;
  // Outputs depend only on input shapes, never on input values (Shape, Size): always
  // computable while planning.
  bool reads_only_input_shapes = false;
};

// A tensor as a kernel sees it at run time: pointer, dtype and shape fixed by the plan.
struct KernelTensor {
  DType dtype = DType::kUndefined;
  const Shape* shape = nullptr;
  void* data = nullptr;
  int64_t numel() const { return shape->numel(); }
  template <typename T> T* ptr() const { return static_cast<T*>(data); }
};

// What kernels derive from constant inputs alone (packed weights), kept once per session: a
// session compiles one plan per set of input shapes, and each plan's kernels would otherwise
// repack the same weights (a decoder whose KV grows by one position per step compiles a plan per
// step). Entries are keyed by the node and a key naming what was derived and its parameters.
class PreparedConstants {
 public:
  template <typename T, typename Make>
  Result<std::shared_ptr<const T>> get_or_make(const Node& node, const std::string& key, Make&& make) {
    const auto slot = std::make_pair(&node, key);
    if (auto it = entries_.find(slot); it != entries_.end()) return std::static_pointer_cast<const T>(it->second);
    Result<T> made = make();
    if (!made.is_ok()) return made.status();
    auto shared = std::make_shared<const T>(std::move(made).value());
    entries_.emplace(slot, shared);
    return shared;
  }

 private:
  std::map<std::pair<const Node*, std::string>, std::shared_ptr<const void>> entries_;
};

struct PrepareContext {
  const Node& node;
  std::vector<const TensorInfo*> inputs;     // null for omitted optional inputs
  std::vector<const Tensor*> input_values;   // known-at-plan-time values, else null
  std::vector<const TensorInfo*> outputs;    // null for omitted optional outputs
  size_t workspace_bytes = 0;                // kernel sets this to reserve scratch memory
  ThreadPool* pool = nullptr;
  PreparedConstants* constants = nullptr;    // the session's; null: derive afresh
  // The session's end of a tensor-parallel group (SessionOptions::communicator): collectives
  // (onnx_genai AllReduce / AllGather) keep it; null in a session of one rank.
  Communicator* communicator = nullptr;

  // make() (a Result<T>), or what it made for this node and `key` in an earlier plan.
  template <typename T, typename Make>
  Result<std::shared_ptr<const T>> constant(const std::string& key, Make&& make) {
    if (constants != nullptr) return constants->get_or_make<T>(node, key, std::forward<Make>(make));
    Result<T> made = make();
    if (!made.is_ok()) return made.status();
    return std::make_shared<const T>(std::move(made).value());
  }

  bool has_input(int i) const { return i < static_cast<int>(inputs.size()) && inputs[static_cast<size_t>(i)] != nullptr; }
  const TensorInfo& input(int i) const { return *inputs[static_cast<size_t>(i)]; }
  const Tensor* value(int i) const {
    return i < static_cast<int>(input_values.size()) ? input_values[static_cast<size_t>(i)] : nullptr;
  }
  bool has_output(int i) const { return i < static_cast<int>(outputs.size()) && outputs[static_cast<size_t>(i)] != nullptr; }
  const TensorInfo& output(int i) const { return *outputs[static_cast<size_t>(i)]; }
  const Attributes& attrs() const { return node.attrs; }
  template <typename... Args>
  Status fail(const Args&... args) const { return OG_ERROR(node.describe(), ": ", args...); }
};

struct KernelContext {
  std::span<const KernelTensor> inputs;   // omitted optional inputs have data == nullptr
  std::span<const KernelTensor> outputs;  // omitted optional outputs have data == nullptr
  void* workspace = nullptr;
  ThreadPool* pool = nullptr;
  void* stream = nullptr;  // CUDA kernels: the cudaStream_t to launch on (null: the default stream)

  bool has_input(int i) const { return i < static_cast<int>(inputs.size()) && inputs[static_cast<size_t>(i)].data != nullptr; }
  const KernelTensor& input(int i) const { return inputs[static_cast<size_t>(i)]; }
  const KernelTensor& output(int i) const { return outputs[static_cast<size_t>(i)]; }
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual Status prepare(PrepareContext& ctx) { return Status::ok(); }
  virtual Status run(const KernelContext& ctx) const = 0;
};

struct KernelDef {
  std::string domain;
  std::string op_type;
  DeviceType device = DeviceType::kCpu;
  std::vector<DType> dtypes;  // accepted dtypes of input `type_input`; empty accepts any
  int type_input = 0;
  int since_version = 1;
  int end_version = INT_MAX;
  std::function<std::unique_ptr<OpKernel>(const Node&)> create;
};

class OpRegistry {
 public:
  static OpRegistry& instance();  // all built-in schemas and kernels, registered on first use

  void add_schema(OpSchema schema);
  void add_kernel(KernelDef def);
  const OpSchema* find_schema(const std::string& domain, const std::string& op_type) const;
  // The kernel for `node` on `device` given its input dtypes, or an error saying why none fits.
  Result<const KernelDef*> find_kernel(const Node& node, DeviceType device, std::span<const DType> input_dtypes) const;
  bool has_op(const std::string& domain, const std::string& op_type) const;
  std::vector<std::string> op_names() const;  // "domain::Op" for every schema

 private:
  std::map<std::pair<std::string, std::string>, OpSchema> schemas_;
  std::map<std::pair<std::string, std::string>, std::vector<KernelDef>> kernels_;
};

}  // namespace onnx_genai
