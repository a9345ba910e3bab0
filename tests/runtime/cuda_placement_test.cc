// On a GPU a node runs there only when a CUDA kernel is registered for its op and input dtypes
// and accepts the node in prepare() (runtime/plan.cc, place()); any other node falls back to the
// CPU, with copies around it. This checks that every node of the test decoders
// (tools/build_model.py in each graph style) that runs as a step has one, so that removing a
// kernel, or a builder change that brings in an op without one, fails here instead of quietly
// slowing the GPU runs.
//
// The model is prepared as a GPU session prepares it (type check, constant folding, dead nodes,
// the device fusions, plan-time values) and planned for a prefill and a decode step on a
// stand-in device (runtime/stand_in_device.h) whose registry gives every op a probe "device"
// kernel: it accepts a node when the built-in registry has a CUDA kernel for the node's input
// dtypes and declines it otherwise, so the planner leaves on the CPU exactly the nodes a GPU
// session would. Nodes evaluated while planning (Shape and the shape arithmetic after it, Range
// over shape values) and views (Reshape, Unsqueeze) are not steps and never ask. Without a GPU
// the CUDA kernels' own prepare() cannot run (cuBLASLt and the attention planner need one), so
// a node a CUDA kernel turns down for its shapes or attributes is caught only where a GPU is
// usable: there the probe runs the CUDA kernel's prepare() too.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "onnx/model.h"
#include "ops/op.h"
#include "ops/register_all.h"
#include "runtime/fusion_passes.h"
#include "runtime/graph_passes.h"
#include "runtime/model_parity.h"
#include "runtime/plan.h"
#include "runtime/stand_in_device.h"

#ifdef OG_HAVE_CUDA
#include "core/cuda/device.h"
#endif

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::ParityFixture;
using testing::StandInDevice;
using testing::StandInMemory;

// What the probe kernels saw: the nodes turned down ("domain::Op" -> why, one entry per node)
// and how many were accepted.
struct ProbeLog {
  bool run_cuda_prepare = false;  // a GPU is usable: the CUDA kernels' prepare() runs too
  std::map<std::string, std::set<std::string>> misses;
  int accepted = 0;
};

std::string op_key(const Node& node) {
  const std::string domain = canonical_domain(node.domain);
  return (domain.empty() ? "" : domain + "::") + node.op_type;
}

// Accepts (in prepare) a node that has a CUDA kernel for its input dtypes, which (with a GPU)
// accepts it too; never runs.
class ProbeKernel final : public OpKernel {
 public:
  explicit ProbeKernel(ProbeLog& log) : log_(log) {}
  Status prepare(PrepareContext& ctx) override {
    std::vector<DType> dtypes;
    for (const TensorInfo* in : ctx.inputs) dtypes.push_back(in != nullptr ? in->dtype : DType::kUndefined);
    const Result<const KernelDef*> cuda = OpRegistry::instance().find_kernel(ctx.node, DeviceType::kCuda, dtypes);
    Status accepted = cuda.status();
    if (accepted.is_ok() && log_.run_cuda_prepare) accepted = (*cuda)->create(ctx.node)->prepare(ctx);
    if (!accepted.is_ok()) {
      log_.misses[op_key(ctx.node)].insert(accepted.message());
      return accepted;
    }
    ++log_.accepted;
    return Status::ok();
  }
  Status run(const KernelContext&) const override { return OG_ERROR("a probe kernel ran"); }

 private:
  ProbeLog& log_;
};

// The built-in schemas and CPU kernels, and a probe kernel for the device for every op.
OpRegistry probe_registry(ProbeLog& log) {
  OpRegistry registry;
  register_all_schemas(registry);
  register_all_cpu_kernels(registry);
  for (const std::string& name : registry.op_names()) {
    const size_t split = name.rfind("::");
    const std::string domain = split == std::string::npos ? "" : name.substr(0, split);
    const std::string op = split == std::string::npos ? name : name.substr(split + 2);
    registry.add_kernel(KernelDef{.domain = domain,
                                  .op_type = op,
                                  .device = DeviceType::kCuda,
                                  .create = [&log](const Node&) { return std::make_unique<ProbeKernel>(log); }});
  }
  return registry;
}

// Decoder inputs for `batch` sequences of `seq` new tokens after `past` cached ones, sized by
// the graph's declared dims (batch_size, sequence_length, past_sequence_length,
// total_sequence_length): token ids 1, a mask of ones, positions past .. past + seq - 1, zero
// caches.
Result<std::vector<Tensor>> decoder_inputs(const Graph& graph, int64_t batch, int64_t seq, int64_t past) {
  const std::map<std::string, int64_t> sizes = {{"batch_size", batch},
                                               {"sequence_length", seq},
                                               {"past_sequence_length", past},
                                               {"total_sequence_length", past + seq}};
  std::vector<Tensor> inputs;
  for (const Value* in : graph.inputs) {
    if (!in->dims) return OG_ERROR("input '", in->name, "' has no declared shape");
    std::vector<int64_t> dims;
    for (const Dim& d : *in->dims) {
      auto size = sizes.find(d.symbol);
      if (!d.known() && size == sizes.end()) return OG_ERROR("input '", in->name, "': unknown dim '", d.symbol, "'");
      dims.push_back(d.known() ? d.value : size->second);
    }
    OG_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(in->dtype, Shape(dims)));  // zero-filled
    if (in->dtype == DType::kI64) {
      for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = in->name == "position_ids" ? past + i % seq : 1;
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

// Loads `dir`/model.onnx as a GPU session would prepare it and plans a prefill (batch 2, 5
// tokens) and a decode step (1 token after 5) on the stand-in device, logging what the probes saw.
Status plan_on_probes(const fs::path& dir, ProbeLog& log) {
  OG_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, load_onnx_model((dir / "model.onnx").string()));
  Graph& graph = *model->graph;
  ThreadPool pool(2);
  OG_RETURN_IF_ERROR(infer_types_and_check_support(graph));
  OG_RETURN_IF_ERROR(fold_constants(graph, &pool).status());
  graph.eliminate_dead_nodes();
  OG_RETURN_IF_ERROR(fuse_for_device(graph, DeviceType::kCuda).status());

  const OpRegistry registry = probe_registry(log);
  StandInMemory memory;
  StandInDevice device(memory, DeviceType::kCuda);
  PreparedConstants constants;
  const PlanTimeValues plan_time = find_plan_time_values(graph);
  PlannerGraph pg;
  pg.graph = &graph;
  for (const Value* in : graph.inputs) pg.value_keyed_inputs.push_back(plan_time.graph_inputs.count(in) != 0);
  pg.needed_at_plan_time = plan_time.values;
  pg.constants = &constants;
  pg.device = &device;
  pg.registry = &registry;
  for (const auto& [seq, past] : {std::pair<int64_t, int64_t>{5, 0}, {1, 5}}) {
    OG_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, decoder_inputs(graph, 2, seq, past));
    OG_ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan, ExecutionPlan::compile(pg, inputs, {}, &pool));
    std::printf("[ placement ] %s: %zu steps, %zu on the device, %zu transfers, %zu nodes evaluated while planning\n",
                past == 0 ? "prefill" : "decode ", plan->num_steps(), plan->num_device_steps(), plan->num_transfers(),
                plan->num_plan_time_nodes());
  }
  return Status::ok();
}

bool gpu_usable() {
#ifdef OG_HAVE_CUDA
  return cuda::usable_device(0).is_ok();
#else
  return false;
#endif
}

struct PlacementCase {
  ParityFixture fixture;          // only the name and builder arguments are used
  std::set<std::string> on_cpu;  // ops known to have no CUDA kernel yet (remove one when it gets one)
};

void PrintTo(const PlacementCase& c, std::ostream* os) { *os << c.fixture.name; }

class CudaPlacement : public ::testing::TestWithParam<PlacementCase> {};

TEST_P(CudaPlacement, EveryComputeNodeHasACudaKernel) {
#ifndef OG_HAVE_CUDA
  GTEST_SKIP() << "this build has no CUDA kernels (nvcc was not found when it was configured)";
#endif
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  auto dir = testing::build_fixture_model(GetParam().fixture, scratch.path());
  ASSERT_TRUE(dir.is_ok()) << dir.status().message();
  ProbeLog log;
  log.run_cuda_prepare = gpu_usable();
  std::printf("[ placement ] CUDA kernels' prepare() %s\n",
              log.run_cuda_prepare ? "run (a GPU is usable)" : "not run (no GPU)");
  const Status planned = plan_on_probes(*dir, log);
  ASSERT_TRUE(planned.is_ok()) << planned.message();
  EXPECT_GT(log.accepted, 0) << "no node asked for a device kernel";
  std::set<std::string> ops;
  std::string detail;
  for (const auto& [op, why] : log.misses) {
    ops.insert(op);
    for (const std::string& w : why) detail += "\n  " + w;
  }
  EXPECT_EQ(ops, GetParam().on_cpu) << "nodes without a CUDA kernel:" << detail;
}

PlacementCase placement_case(std::string name, std::vector<std::string> args, std::set<std::string> on_cpu = {}) {
  return {ParityFixture{std::move(name), std::move(args), {}, 0, ""}, std::move(on_cpu)};
}

std::vector<PlacementCase> cases() {
  std::vector<PlacementCase> all;
  for (const std::string preset : {"llama", "qwen2"}) {
    const auto named = [&](const std::string& style) { return style + "_" + preset; };
    const std::vector<std::string> base = {"--preset", preset, "--style"};
    const auto args = [&](std::vector<std::string> more) {
      std::vector<std::string> a = base;
      a.insert(a.end(), more.begin(), more.end());
      return a;
    };
    all.push_back(placement_case(named("genai"), args({"genai"})));
    all.push_back(placement_case(named("genai_position_ids"), args({"genai", "--position-ids"})));
    all.push_back(placement_case(named("genai_position_ids_int4_f16"),
                                 args({"genai", "--position-ids", "--weights", "int4", "--io-dtype", "f16",
                                       "--quantize-embeddings"})));
    all.push_back(placement_case(named("standard"), args({"standard"})));
    all.push_back(placement_case(named("standard_f16"), args({"standard", "--io-dtype", "f16"})));
    all.push_back(placement_case(named("opset23"), args({"opset23"})));
    all.push_back(placement_case(named("opset23_f16"), args({"opset23", "--io-dtype", "f16"})));
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaPlacement, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<PlacementCase>& info) { return info.param.fixture.name; });

}  // namespace
}  // namespace onnx_genai
