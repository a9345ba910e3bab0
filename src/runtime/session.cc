#include "onnx_genai/session.h"

#include <unistd.h>

#include <cstring>
#include <list>
#include <mutex>
#include <unordered_map>

#include "core/thread_pool.h"
#include "onnx/model.h"
#include "runtime/execution_device.h"
#include "runtime/fusion_passes.h"
#include "runtime/graph_passes.h"
#include "runtime/plan.h"

namespace onnx_genai {

namespace {

// Inputs whose values are part of the plan key must be small: the key holds their bytes.
constexpr int64_t kMaxValueKeyedElements = 4096;

IoInfo io_info(const Value& v) {
  IoInfo info;
  info.name = v.name;
  info.dtype = v.dtype;
  if (v.dims) {
    info.rank_known = true;
    for (const Dim& d : *v.dims) {
      info.dims.push_back(d.known() ? d.value : -1);
      info.symbols.push_back(d.symbol);
    }
  }
  return info;
}

// An arena that grows to the largest plan's need, from one allocator.
class Arena {
 public:
  void* data() const { return data_.get(); }
  int64_t bytes() const { return bytes_; }
  Status reserve(Allocator& allocator, int64_t bytes) {
    if (bytes <= bytes_) return Status::ok();
    const int64_t rounded = (bytes + 255) / 256 * 256;
    data_.reset();  // the old arena goes first: both need not fit at once
    void* p = allocator.allocate(static_cast<size_t>(rounded));
    if (p == nullptr) {
      bytes_ = 0;
      return OG_ERROR("out of memory reserving a ", bytes, "-byte activation arena on ", allocator.device().to_string());
    }
    data_ = std::shared_ptr<void>(p, [&allocator](void* q) { allocator.deallocate(q); });
    bytes_ = rounded;
    return Status::ok();
  }

 private:
  std::shared_ptr<void> data_;
  int64_t bytes_ = 0;
};

}  // namespace

struct Session::Impl {
  std::shared_ptr<Model> model;
  SessionOptions options;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<ExecutionDevice> device;  // before the plans, which use it
  PreparedConstants constants;  // before planner_graph, which points at it
  PlannerGraph planner_graph;
  std::vector<IoInfo> inputs, outputs;
  SessionStats stats;
  CaptureCounters captures;

  std::mutex mutex;  // one run at a time: plans and the arena are shared state
  struct CacheEntry {
    std::unique_ptr<ExecutionPlan> plan;
    std::list<std::string>::iterator lru;
  };
  std::unordered_map<std::string, CacheEntry> plans;
  std::list<std::string> lru;  // front = most recently used
  Arena arena, device_arena;
  std::vector<DeviceType> output_devices;  // reused: where this run's outputs go
  std::string key;  // reused buffer for the plan key
  std::vector<bool> late_inputs;  // reused: the run's late inputs by position
  std::vector<std::pair<std::string_view, int64_t>> symbol_values;  // reused while binding

  Status validate_inputs(const std::vector<Tensor>& given);
  void build_key(const std::vector<Tensor>& given, const std::vector<bool>& late);
  Result<ExecutionPlan*> plan_for(const std::vector<Tensor>& given, const std::vector<bool>& late);
  Status ensure_arenas(const ExecutionPlan& plan);
  Allocator& allocator_for(DeviceType device) const {
    return device == DeviceType::kCpu || !this->device ? cpu_allocator() : this->device->allocator();
  }
};

Status Session::Impl::validate_inputs(const std::vector<Tensor>& given) {
  if (given.size() != inputs.size()) {
    return OG_ERROR("model expects ", inputs.size(), " inputs, got ", given.size());
  }
  symbol_values.clear();
  for (size_t i = 0; i < given.size(); ++i) {
    const IoInfo& want = inputs[i];
    const Tensor& t = given[i];
    if (!t.defined()) return OG_ERROR("input '", want.name, "' is missing");
    if (t.device().type != DeviceType::kCpu && (!device || t.device() != device->device())) {
      return OG_ERROR("input '", want.name, "' is on ", t.device().to_string(), "; this session runs on ",
                      device ? device->device().to_string() : "cpu", " and takes CPU tensors or tensors there");
    }
    if (want.dtype != DType::kUndefined && t.dtype() != want.dtype) {
      return OG_ERROR("input '", want.name, "' has dtype ", dtype_name(t.dtype()), ", the model expects ",
                      dtype_name(want.dtype));
    }
    if (!want.rank_known) continue;
    if (t.rank() != static_cast<int>(want.dims.size())) {
      return OG_ERROR("input '", want.name, "' has rank ", t.rank(), " (shape ", t.shape().to_string(),
                      "), the model expects rank ", want.dims.size());
    }
    for (int d = 0; d < t.rank(); ++d) {
      const int64_t declared = want.dims[static_cast<size_t>(d)];
      const std::string& symbol = want.symbols[static_cast<size_t>(d)];
      if (declared >= 0 && t.shape()[d] != declared) {
        return OG_ERROR("input '", want.name, "' dim ", d, " is ", t.shape()[d], ", the model expects ", declared);
      }
      if (symbol.empty()) continue;
      auto it = std::find_if(symbol_values.begin(), symbol_values.end(), [&](const auto& p) { return p.first == symbol; });
      if (it == symbol_values.end()) {
        symbol_values.emplace_back(symbol, t.shape()[d]);
      } else if (it->second != t.shape()[d]) {
        return OG_ERROR("input '", want.name, "' dim ", d, " ('", symbol, "') is ", t.shape()[d],
                        " but another input bound '", symbol, "' to ", it->second);
      }
    }
  }
  return Status::ok();
}

void Session::Impl::build_key(const std::vector<Tensor>& given, const std::vector<bool>& late) {
  key.clear();
  auto put = [&](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  for (size_t i = 0; i < given.size(); ++i) {
    put(static_cast<int64_t>(given[i].dtype()));
    put(static_cast<int64_t>(given[i].device().type));
    put(given[i].rank());
    for (int64_t d : given[i].shape().dims()) put(d);
    if (planner_graph.value_keyed_inputs[i]) {
      key.append(static_cast<const char*>(given[i].raw()), static_cast<size_t>(given[i].nbytes()));
    }
    put(late[i] ? 1 : 0);  // a late input's upload sits elsewhere in the plan
  }
  for (DeviceType d : output_devices) put(static_cast<int64_t>(d));
}

int64_t arena_limit_bytes(const SessionOptions& options) {
  if (options.max_arena_bytes > 0) return options.max_arena_bytes;
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

Status Session::Impl::ensure_arenas(const ExecutionPlan& plan) {
  const int64_t limit = arena_limit_bytes(options);
  for (const auto& [bytes, where] : {std::pair{plan.arena_bytes(), "host"}, std::pair{plan.device_arena_bytes(), "device"}}) {
    if (bytes > limit) {
      return OG_ERROR("the plan for these input shapes needs a ", bytes, "-byte ", where,
                      " activation arena, more than the limit of ", limit, " bytes (SessionOptions::max_arena_bytes)");
    }
  }
  // On a GPU the host arena is page-locked: its copies to and from the device can be recorded.
  OG_RETURN_IF_ERROR(arena.reserve(device ? device->host_allocator() : cpu_allocator(), plan.arena_bytes()));
  stats.arena_bytes = arena.bytes();
  if (device) {
    Status reserved = device_arena.reserve(device->allocator(), plan.device_arena_bytes());
    if (!reserved.is_ok()) return OG_ERROR(reserved.message(), " (", device->allocator().free_bytes(), " bytes free)");
    stats.device_arena_bytes = device_arena.bytes();
  }
  return Status::ok();
}

Result<ExecutionPlan*> Session::Impl::plan_for(const std::vector<Tensor>& given, const std::vector<bool>& late) {
  for (size_t i = 0; i < given.size(); ++i) {
    if (planner_graph.value_keyed_inputs[i] && given[i].numel() > kMaxValueKeyedElements) {
      return OG_ERROR("input '", inputs[i].name, "' decides output shapes by its values and is too large (",
                      given[i].numel(), " elements) to plan for");
    }
  }
  build_key(given, late);
  auto it = plans.find(key);
  if (it != plans.end()) {
    lru.splice(lru.begin(), lru, it->second.lru);
    ++stats.plan_cache_hits;
    return it->second.plan.get();
  }
  OG_ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan,
                      ExecutionPlan::compile(planner_graph, given, output_devices, pool.get(), late));
  OG_RETURN_IF_ERROR(ensure_arenas(*plan));
  ++stats.plans_compiled;
  if (plans.size() >= std::max<size_t>(1, options.max_cached_plans)) {
    plans.erase(lru.back());
    lru.pop_back();
  }
  lru.push_front(key);
  ExecutionPlan* raw = plan.get();
  plans.emplace(key, CacheEntry{std::move(plan), lru.begin()});
  return raw;
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::load(const std::string& path, const SessionOptions& options) {
  OG_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, load_onnx_model(path));
  return create(std::move(model), options);
}

Result<std::unique_ptr<Session>> Session::create(std::shared_ptr<Model> model, const SessionOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->pool = std::make_unique<ThreadPool>(options.num_threads);
  if (options.device.type != DeviceType::kCpu) {
    OG_ASSIGN_OR_RETURN(impl->device, open_execution_device(options.device));
  }
  Graph& graph = *model->graph;
  const std::string where = "preparing '" + model->path + "'";
  Status supported = infer_types_and_check_support(graph);
  if (!supported.is_ok()) return supported.with_context(where);
  auto folded = fold_constants(graph, impl->pool.get());
  if (!folded.is_ok()) return folded.status().with_context(where);
  graph.eliminate_dead_nodes();
  // Only where a device runs its own kernels: CPU sessions keep the model's graph (fusion_passes.h).
  if (impl->device && impl->device->kernel_device() != DeviceType::kCpu) {
    auto fused = fuse_for_device(graph, impl->device->kernel_device());
    if (!fused.is_ok()) return fused.status().with_context(where);
  }
  impl->stats.nodes_folded = *folded;
  impl->stats.initializer_bytes_mapped = model->stats.initializer_bytes_mapped;
  impl->stats.initializer_bytes_copied = model->stats.initializer_bytes_copied;

  PlanTimeValues plan_time = find_plan_time_values(graph);
  impl->planner_graph.graph = &graph;
  impl->planner_graph.constants = &impl->constants;
  impl->planner_graph.communicator = impl->options.communicator.get();
  impl->planner_graph.device = impl->device.get();
  impl->planner_graph.needed_at_plan_time = std::move(plan_time.values);
  for (const Value* in : graph.inputs) {
    impl->planner_graph.value_keyed_inputs.push_back(plan_time.graph_inputs.count(in) != 0);
    impl->inputs.push_back(io_info(*in));
  }
  for (const Value* out : graph.outputs) impl->outputs.push_back(io_info(*out));
  impl->model = std::move(model);
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

const std::vector<IoInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<IoInfo>& Session::outputs() const { return impl_->outputs; }
SessionStats Session::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}
int Session::num_threads() const { return impl_->pool->num_threads(); }
Device Session::device() const { return impl_->device ? impl_->device->device() : Device::cpu(); }
Allocator& Session::allocator() const { return impl_->allocator_for(device().type); }
Allocator& Session::host_allocator() const { return impl_->device ? impl_->device->host_allocator() : cpu_allocator(); }

Status Session::run_into(const std::vector<Tensor>& given, std::vector<Tensor>& outputs) {
  return run_into(given, outputs, LateInputs{});
}

Status Session::run_into(const std::vector<Tensor>& given, std::vector<Tensor>& outputs, const LateInputs& late) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  OG_RETURN_IF_ERROR(s.validate_inputs(given));
  std::vector<bool>& late_inputs = s.late_inputs;
  late_inputs.assign(s.inputs.size(), false);  // kept: a replayed run allocates nothing
  for (const size_t i : late.inputs) {
    if (i >= s.inputs.size()) return OG_ERROR("late input ", i, " of ", s.inputs.size(), " inputs");
    if (s.planner_graph.value_keyed_inputs[i]) {
      return OG_ERROR("input '", s.inputs[i].name, "' decides shapes, so its bytes cannot come late");
    }
    late_inputs[i] = true;
  }
  s.output_devices.assign(s.outputs.size(), DeviceType::kCpu);
  for (size_t i = 0; i < std::min(outputs.size(), s.outputs.size()); ++i) {
    if (outputs[i].defined() && s.device && outputs[i].device() == s.device->device()) {
      s.output_devices[i] = outputs[i].device().type;
    }
  }
  OG_ASSIGN_OR_RETURN(ExecutionPlan* plan, s.plan_for(given, late_inputs));
  const std::vector<TensorInfo>& infos = plan->output_infos();
  outputs.resize(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    Tensor& out = outputs[i];
    if (out.defined() && out.dtype() == infos[i].dtype && out.shape() == infos[i].shape &&
        out.device().type == s.output_devices[i]) {
      continue;
    }
    OG_ASSIGN_OR_RETURN(out, Tensor::allocate(infos[i].dtype, infos[i].shape, s.allocator_for(s.output_devices[i])));
  }
  CaptureCounters* captures = s.options.capture_device_graphs ? &s.captures : nullptr;
  OG_RETURN_IF_ERROR(
      plan->run(given, outputs, {s.arena.data(), s.device_arena.data()}, s.pool.get(), captures, late.inputs.empty() ? nullptr : &late));
  ++s.stats.runs;
  s.stats.last_plan_arena_bytes = plan->memory().arena_bytes;
  s.stats.last_plan_requested_bytes = plan->memory().requested_bytes;
  s.stats.last_plan_steps = static_cast<int64_t>(plan->num_steps());
  s.stats.last_plan_device_steps = static_cast<int64_t>(plan->num_device_steps());
  s.stats.last_plan_transfers = static_cast<int64_t>(plan->num_transfers());
  s.stats.last_plan_graph_segments = captures != nullptr ? static_cast<int64_t>(plan->num_device_segments()) : 0;
  s.stats.graph_captures = s.captures.captures;
  s.stats.graph_replays = s.captures.replays;
  s.stats.graph_invalidations = s.captures.invalidations;
  s.stats.graph_capture_failures = s.captures.failures;
  s.stats.last_graph_capture_failure = s.captures.last_failure;
  return Status::ok();
}

Result<std::vector<Tensor>> Session::run(const std::vector<Tensor>& given) {
  std::vector<Tensor> outputs;
  OG_RETURN_IF_ERROR(run_into(given, outputs));
  return outputs;
}

Result<std::vector<Tensor>> Session::run_named(const std::map<std::string, Tensor>& named) {
  std::vector<Tensor> ordered;
  for (const IoInfo& in : impl_->inputs) {
    auto it = named.find(in.name);
    if (it == named.end()) return OG_ERROR("input '", in.name, "' is missing");
    ordered.push_back(it->second);
  }
  for (const auto& [name, tensor] : named) {
    if (std::none_of(impl_->inputs.begin(), impl_->inputs.end(), [&](const IoInfo& i) { return i.name == name; })) {
      return OG_ERROR("the model has no input named '", name, "'");
    }
  }
  return run(ordered);
}

}  // namespace onnx_genai
