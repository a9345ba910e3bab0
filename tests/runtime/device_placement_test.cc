// Plans on an accelerator, checked without one: a stand-in device whose memory is host memory
// that the test tracks, and a registry where some ops have kernels for that device. Every kernel
// checks that each tensor it touches lives on its own side (device steps read and write only
// device memory, CPU steps only host memory), so a missing or misplaced copy fails; the results
// are checked against values computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "onnx/model.h"
#include "onnx_model_builder.h"
#include "ops/op.h"
#include "runtime/graph_passes.h"
#include "runtime/plan.h"
#include "runtime/stand_in_device.h"

namespace onnx_genai {
namespace {

using testing::ModelBuilder;
using testing::StandInDevice;
using testing::StandInMemory;
constexpr int kF32 = onnx::TensorProto::FLOAT;

// Runs the wrapped CPU kernel after checking that every tensor is on `device`'s side.
class SideCheckingKernel final : public OpKernel {
 public:
  SideCheckingKernel(std::unique_ptr<OpKernel> inner, const StandInDevice& device, bool on_device, std::string op)
      : inner_(std::move(inner)), device_(device), on_device_(on_device), op_(std::move(op)) {}
  Status prepare(PrepareContext& ctx) override { return inner_->prepare(ctx); }
  Status run(const KernelContext& ctx) const override {
    for (const auto& tensors : {ctx.inputs, ctx.outputs}) {
      for (const KernelTensor& t : tensors) {
        if (t.data != nullptr && t.numel() > 0) {
          EXPECT_EQ(device_.memory().owns(t.data), on_device_) << op_ << " on the " << (on_device_ ? "device" : "CPU");
        }
      }
    }
    if (on_device_) {
      EXPECT_EQ(ctx.stream, device_.stream()) << op_ << " launches on the device's stream";
    }
    return inner_->run(ctx);
  }

 private:
  std::unique_ptr<OpKernel> inner_;
  const StandInDevice& device_;
  bool on_device_;
  std::string op_;
};

// A device kernel that turns the node down in prepare(), as a CUDA kernel does for a shape or an
// option it lacks: the node must then run on the CPU.
class DecliningKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override { return ctx.fail("the stand-in device declines this node"); }
  Status run(const KernelContext&) const override { return OG_ERROR("a declined kernel ran"); }
};

// The built-in schemas of `ops`, their CPU kernels side-checked, and side-checked copies of the
// CPU kernels registered for the device for `device_ops`, declining ones for `declined_ops`.
// Views (Reshape) touch no bytes and run where the viewed tensor is: they are not checked.
OpRegistry registry_for(const StandInDevice& device, const std::vector<std::string>& ops,
                        const std::vector<std::string>& device_ops, const std::vector<std::string>& declined_ops) {
  OpRegistry registry;
  const OpRegistry& builtin = OpRegistry::instance();
  for (const std::string& op : ops) {
    const OpSchema* schema = builtin.find_schema("", op);
    registry.add_schema(*schema);
    const bool view = schema->alias_input >= 0;
    if (std::find(declined_ops.begin(), declined_ops.end(), op) != declined_ops.end()) {
      registry.add_kernel(KernelDef{.domain = "", .op_type = op, .device = DeviceType::kCuda, .create = [](const Node&) {
                                      return std::unique_ptr<OpKernel>(new DecliningKernel());
                                    }});
    }
    for (const bool on_device : {false, true}) {
      if (on_device && std::find(device_ops.begin(), device_ops.end(), op) == device_ops.end()) continue;
      registry.add_kernel(KernelDef{.domain = "",
                                    .op_type = op,
                                    .device = on_device ? DeviceType::kCuda : DeviceType::kCpu,
                                    .create = [&builtin, &device, op, on_device, view](const Node& node) {
                                      const std::vector<DType> f32(node.inputs.size(), DType::kF32);
                                      const KernelDef* cpu = builtin.find_kernel(node, DeviceType::kCpu, f32).value();
                                      if (view) return cpu->create(node);
                                      return std::unique_ptr<OpKernel>(
                                          new SideCheckingKernel(cpu->create(node), device, on_device, op));
                                    }});
    }
  }
  return registry;
}

std::shared_ptr<Model> load(const ModelBuilder& b) {
  auto owner = std::make_shared<std::string>(b.bytes());
  auto model = load_onnx_model_from_memory(reinterpret_cast<const uint8_t*>(owner->data()), owner->size(), owner, ".",
                                           "test.onnx");
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  return model.is_ok() ? *model : nullptr;
}

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// A planner graph with one (non-value-keyed) input, on `device` with `registry`'s kernels.
PlannerGraph planner_graph(Graph& graph, PreparedConstants& constants, StandInDevice& device,
                           const OpRegistry& registry) {
  PlannerGraph pg;
  pg.graph = &graph;
  pg.value_keyed_inputs = {false};
  pg.needed_at_plan_time = find_plan_time_values(graph).values;
  pg.constants = &constants;
  pg.device = &device;
  pg.registry = &registry;
  return pg;
}

// a = x * w (device), b = Sigmoid(a) (CPU: the device declines it), c = b + a (device),
// r = Reshape(c) (a view); outputs r on the host and a on the device.
TEST(DevicePlacement, CopiesOnceAcrossEachBoundaryAndKeepsEachSideOnItsMemory) {
  ModelBuilder b;
  b.input("x", kF32, {2, 3});
  b.initializer_f32("w", {3}, {0.5f, -1.0f, 2.0f});
  b.initializer_i64("shape", {2}, {3, 2});
  b.node("Mul", {"x", "w"}, {"a"});
  b.node("Sigmoid", {"a"}, {"b"});
  b.node("Add", {"b", "a"}, {"c"});
  b.node("Reshape", {"c", "shape"}, {"r"});
  b.output("r", kF32);
  b.output("a", kF32);
  std::shared_ptr<Model> model = load(b);
  ASSERT_NE(model, nullptr);
  Graph& graph = *model->graph;
  ASSERT_TRUE(infer_types_and_check_support(graph).is_ok());

  StandInMemory memory;
  StandInDevice device(memory);
  const OpRegistry registry = registry_for(device, {"Mul", "Sigmoid", "Add", "Reshape"}, {"Mul", "Add"}, {"Sigmoid"});
  PreparedConstants constants;
  const PlannerGraph pg = planner_graph(graph, constants, device, registry);

  const std::vector<float> x = {1, 2, 3, -4, 5, -6};
  const std::vector<Tensor> inputs = {Tensor::from_vector<float>(Shape{2, 3}, x)};
  auto plan = ExecutionPlan::compile(pg, inputs, {DeviceType::kCpu, DeviceType::kCuda}, nullptr);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  // Mul, Add and the view on the device; the copies: x up for Mul, a down for Sigmoid, b up for
  // Add, r down to the host output. w was uploaded once while planning.
  EXPECT_EQ((*plan)->num_transfers(), 4u);
  EXPECT_EQ((*plan)->num_device_steps(), 3u);  // Mul, Add and Reshape (a view of c, where c is)
  EXPECT_EQ(device.uploads, 1);

  void* host_arena = std::aligned_alloc(64, static_cast<size_t>(std::max<int64_t>((*plan)->arena_bytes(), 64)));
  void* device_arena = device.allocator().allocate(static_cast<size_t>((*plan)->device_arena_bytes()));
  for (int run = 0; run < 2; ++run) {
    auto host_out = Tensor::allocate(DType::kF32, Shape{3, 2});
    auto device_out = Tensor::allocate(DType::kF32, Shape{2, 3}, device.allocator());
    ASSERT_TRUE(host_out.is_ok() && device_out.is_ok());
    std::vector<Tensor> outputs = {*host_out, *device_out};
    const int syncs = device.syncs;
    ASSERT_TRUE((*plan)->run(inputs, outputs, {host_arena, device_arena}, nullptr).is_ok());
    EXPECT_GE(device.syncs - syncs, 2) << "Sigmoid waits for a's copy; the run ends drained";
    const float w[3] = {0.5f, -1.0f, 2.0f};
    for (size_t i = 0; i < x.size(); ++i) {
      const float a = x[i] * w[i % 3];
      EXPECT_FLOAT_EQ(outputs[0].data<float>()[i], sigmoid(a) + a) << i;
      EXPECT_FLOAT_EQ(outputs[1].data<float>()[i], a) << i;
    }
  }
  EXPECT_EQ(device.uploads, 1 + 2 * 2) << "w once; per run x and b";
  EXPECT_EQ(device.downloads, 2 * 2) << "per run a and r come down";
  device.allocator().deallocate(device_arena);
  std::free(host_arena);
}

// Host and device arenas for a plan, freed with the test.
struct Arenas {
  Arenas(const ExecutionPlan& plan, StandInDevice& device) : device_(device) {
    host = std::aligned_alloc(64, static_cast<size_t>(std::max<int64_t>(plan.arena_bytes(), 64)));
    on_device = device.allocator().allocate(static_cast<size_t>(plan.device_arena_bytes()));
  }
  ~Arenas() {
    device_.allocator().deallocate(on_device);
    std::free(host);
  }
  PlanArenas plan_arenas() const { return {host, on_device}; }
  void* host = nullptr;
  void* on_device = nullptr;

 private:
  StandInDevice& device_;
};

// a = x * w, c = a + w, d = c * w on the device, s = Sigmoid(d) on the CPU; outputs s (host) and
// d (device). The device steps and d's copy down form one recorded segment; x's upload reads
// the caller's tensor and stays outside it.
class RecordedSegments : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelBuilder b;
    b.input("x", kF32, {2, 3});
    b.initializer_f32("w", {3}, {0.5f, -1.0f, 2.0f});
    b.node("Mul", {"x", "w"}, {"a"});
    b.node("Add", {"a", "w"}, {"c"});
    b.node("Mul", {"c", "w"}, {"d"});
    b.node("Sigmoid", {"d"}, {"s"});
    b.output("s", kF32);
    b.output("d", kF32);
    model_ = load(b);
    ASSERT_NE(model_, nullptr);
    ASSERT_TRUE(infer_types_and_check_support(*model_->graph).is_ok());
    registry_ = registry_for(device_, {"Mul", "Add", "Sigmoid"}, {"Mul", "Add"}, {"Sigmoid"});
    pg_ = planner_graph(*model_->graph, constants_, device_, registry_);
    inputs_ = {Tensor::from_vector<float>(Shape{2, 3}, x_)};
    auto plan = ExecutionPlan::compile(pg_, inputs_, {DeviceType::kCpu, DeviceType::kCuda}, nullptr);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    plan_ = std::move(*plan);
    arenas_ = std::make_unique<Arenas>(*plan_, device_);
  }

  std::vector<Tensor> new_outputs() {
    return {Tensor::allocate(DType::kF32, Shape{2, 3}).value(),
            Tensor::allocate(DType::kF32, Shape{2, 3}, device_.allocator()).value()};
  }

  // Runs the plan with x scaled by `scale` and checks both outputs.
  void run_and_check(std::vector<Tensor>& outputs, float scale) {
    for (size_t i = 0; i < x_.size(); ++i) inputs_[0].data<float>()[i] = x_[i] * scale;
    ASSERT_TRUE(plan_->run(inputs_, outputs, arenas_->plan_arenas(), nullptr, &counters_).is_ok());
    const float w[3] = {0.5f, -1.0f, 2.0f};
    for (size_t i = 0; i < x_.size(); ++i) {
      const float d = (x_[i] * scale * w[i % 3] + w[i % 3]) * w[i % 3];
      EXPECT_FLOAT_EQ(outputs[0].data<float>()[i], sigmoid(d)) << i;
      EXPECT_FLOAT_EQ(outputs[1].data<float>()[i], d) << i;
    }
  }

  StandInMemory memory_;
  StandInDevice device_{memory_};
  std::shared_ptr<Model> model_;
  OpRegistry registry_;
  PreparedConstants constants_;
  PlannerGraph pg_;
  const std::vector<float> x_ = {1, 2, 3, -4, 5, -6};
  std::vector<Tensor> inputs_;
  std::unique_ptr<ExecutionPlan> plan_;
  std::unique_ptr<Arenas> arenas_;
  CaptureCounters counters_;
};

TEST_F(RecordedSegments, RecordOnTheSecondRunWithTheSameBuffersAndReplayAfter) {
  ASSERT_EQ(plan_->num_device_segments(), 1u);
  std::vector<Tensor> outputs = new_outputs();
  run_and_check(outputs, 1.0f);
  EXPECT_EQ(counters_.captures, 0) << "a plan's first run launches step by step";
  run_and_check(outputs, 2.0f);
  EXPECT_EQ(counters_.captures, 1);
  EXPECT_EQ(counters_.replays, 1);
  const int uploads = device_.uploads;
  for (int run = 0; run < 3; ++run) run_and_check(outputs, -1.0f - static_cast<float>(run));
  EXPECT_EQ(counters_.captures, 1) << "new input values through the same buffers replay";
  EXPECT_EQ(counters_.replays, 4);
  EXPECT_EQ(device_.uploads - uploads, 3) << "x's upload (the caller's memory) runs outside the recording";
  EXPECT_EQ(device_.recordings, 1);
  EXPECT_EQ(counters_.invalidations, 0);
  EXPECT_EQ(counters_.failures, 0);
}

TEST_F(RecordedSegments, OtherBuffersDropTheRecording) {
  std::vector<Tensor> outputs = new_outputs();
  run_and_check(outputs, 1.0f);
  run_and_check(outputs, 1.0f);
  ASSERT_EQ(counters_.captures, 1);
  std::vector<Tensor> moved = new_outputs();  // the device output elsewhere: the recording would write the old one
  run_and_check(moved, 3.0f);
  EXPECT_EQ(counters_.invalidations, 1);
  EXPECT_EQ(counters_.replays, 1) << "the run with other buffers went step by step";
  run_and_check(moved, 4.0f);
  EXPECT_EQ(counters_.captures, 2) << "the new buffers, seen twice, are recorded";
  run_and_check(outputs, 5.0f);
  EXPECT_EQ(counters_.invalidations, 2);
}

TEST_F(RecordedSegments, WhatCannotBeRecordedRunsStepByStep) {
  std::vector<Tensor> outputs = new_outputs();
  run_and_check(outputs, 1.0f);
  device_.refuse_recording = true;
  for (int run = 0; run < 3; ++run) run_and_check(outputs, 2.0f + static_cast<float>(run));
  EXPECT_EQ(counters_.failures, 1) << "one failed recording marks the segment";
  EXPECT_EQ(counters_.captures, 0);
  EXPECT_EQ(counters_.replays, 0);
  EXPECT_NE(counters_.last_failure.find("refused"), std::string::npos) << counters_.last_failure;
}

TEST_F(RecordedSegments, WithoutCountersEveryStepLaunches) {
  std::vector<Tensor> outputs = new_outputs();
  for (int run = 0; run < 3; ++run) {
    for (size_t i = 0; i < x_.size(); ++i) inputs_[0].data<float>()[i] = x_[i];
    ASSERT_TRUE(plan_->run(inputs_, outputs, arenas_->plan_arenas(), nullptr).is_ok());
  }
  EXPECT_EQ(device_.recordings, 0);
}

// d = ((x * w) + w) * w on the device (one recorded segment), e = d + y with y compiled as a
// late input: its upload is not hoisted to the front with x's, and its fill runs once per run,
// after x's upload and the device work before y's first reader (replayed, once recorded), and
// before y's own upload; e has the values the fill wrote.
TEST(LateInputs, FillRunsAfterTheWorkBeforeTheFirstReaderAndBeforeIt) {
  ModelBuilder b;
  b.input("x", kF32, {2, 3});
  b.input("y", kF32, {2, 3});
  b.initializer_f32("w", {3}, {0.5f, -1.0f, 2.0f});
  b.node("Mul", {"x", "w"}, {"a"});
  b.node("Add", {"a", "w"}, {"c"});
  b.node("Mul", {"c", "w"}, {"d"});
  b.node("Add", {"d", "y"}, {"e"});
  b.output("e", kF32);
  std::shared_ptr<Model> model = load(b);
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(infer_types_and_check_support(*model->graph).is_ok());
  StandInMemory memory;
  StandInDevice device(memory);
  const OpRegistry registry = registry_for(device, {"Mul", "Add"}, {"Mul", "Add"}, {});
  PreparedConstants constants;
  PlannerGraph pg = planner_graph(*model->graph, constants, device, registry);
  pg.value_keyed_inputs = {false, false};
  const std::vector<float> x = {1, 2, 3, -4, 5, -6};
  std::vector<Tensor> inputs = {Tensor::from_vector<float>(Shape{2, 3}, x), Tensor::allocate(DType::kF32, Shape{2, 3}).value()};
  auto plan = ExecutionPlan::compile(pg, inputs, {DeviceType::kCpu}, nullptr, {false, true});
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  ASSERT_EQ((*plan)->num_device_segments(), 1u);
  Arenas arenas(**plan, device);
  LateInputs undeclared;
  undeclared.inputs = {0};
  undeclared.fill = [] { return Status::ok(); };
  std::vector<Tensor> unused = {Tensor::allocate(DType::kF32, Shape{2, 3}).value()};
  EXPECT_FALSE((*plan)->run(inputs, unused, arenas.plan_arenas(), nullptr, nullptr, &undeclared).is_ok())
      << "x was compiled to be uploaded first";
  CaptureCounters counters;
  std::vector<Tensor> outputs = {Tensor::allocate(DType::kF32, Shape{2, 3}).value()};
  const float w[3] = {0.5f, -1.0f, 2.0f};
  for (int run = 0; run < 4; ++run) {
    std::fill_n(inputs[1].data<float>(), 6, std::nanf(""));  // what the fill must overwrite
    const int uploads = device.uploads, replays = device.replays;
    int fills = 0;
    LateInputs late;
    late.inputs = {1};
    late.fill = [&]() -> Status {
      ++fills;
      EXPECT_EQ(device.uploads - uploads, 1) << "x is up, y not yet";
      if (run >= 2) {
        EXPECT_EQ(device.replays - replays, 1) << "the recorded work before y's reader was launched first";
      }
      for (int i = 0; i < 6; ++i) inputs[1].data<float>()[i] = static_cast<float>(10 * run + i);
      return Status::ok();
    };
    ASSERT_TRUE((*plan)->run(inputs, outputs, arenas.plan_arenas(), nullptr, &counters, &late).is_ok());
    EXPECT_EQ(fills, 1);
    for (size_t i = 0; i < x.size(); ++i) {
      const float d = (x[i] * w[i % 3] + w[i % 3]) * w[i % 3];
      EXPECT_FLOAT_EQ(outputs[0].data<float>()[i], d + static_cast<float>(10 * run + static_cast<int>(i))) << run << " " << i;
    }
  }
  // A failing fill is the run's error, named.
  LateInputs failing;
  failing.inputs = {1};
  failing.fill = [] { return OG_ERROR("no mask"); };
  const Status failed = (*plan)->run(inputs, outputs, arenas.plan_arenas(), nullptr, &counters, &failing);
  ASSERT_FALSE(failed.is_ok());
  EXPECT_NE(failed.message().find("no mask"), std::string::npos) << failed.message();
}

}  // namespace
}  // namespace onnx_genai
