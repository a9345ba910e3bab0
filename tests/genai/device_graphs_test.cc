// Decode steps recorded once and replayed (CUDA graphs; src/runtime/plan.h). With the KV cache
// allocated for the whole context and the mask as wide as the cache, every decode step binds the
// same buffers: the first decode step runs kernel by kernel, the second records, every later one
// is one replay per segment, and the decode plan is a single segment (host inputs go up first,
// outputs come down last). So at M=1 (batch 1), batch 8, and M=8 (steps feeding 8 tokens, a
// speculative verify's shape: 7 appended, one sampled).
//   - On a stand-in device (host memory running the CPU kernels: tests/runtime/stand_in_device.h)
//     everywhere: tokens equal a CPU session's exactly.
//   - On a GPU where there is one: tokens equal the same GPU's with graphs off, and the replayed
//     steps allocate no device memory.
#include <gtest/gtest.h>

#include "gpu_skip.h"
#include "genai_test_util.h"
#include "onnx_genai/genai.h"
#include "runtime/stand_in_device.h"

#ifdef OG_HAVE_CUDA
#include "core/cuda/device.h"
#include "core/cuda/memory.h"
#endif

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::StandInMemory;
using testing::StandInScope;

constexpr int kDecodeSteps = 24;
const fs::path kPackage = fs::path(testing::source_dir()) / "models" / "debian-prose-11m";

struct GraphRun {
  std::vector<std::vector<int32_t>> tokens;
  SessionStats stats;
  int64_t allocations_while_replaying = -1;  // device allocations after the recording (GPU only)
};

int64_t device_allocations() {
#ifdef OG_HAVE_CUDA
  return cuda::device_allocation_count();
#else
  return 0;
#endif
}

struct StepShape {
  size_t batch = 1;
  size_t step_tokens = 1;  // tokens fed per decode step (step_tokens - 1 appended)
};

// `shape.batch` prompts of different lengths (a ragged batch), greedy, kDecodeSteps decode steps.
Result<GraphRun> run(Device device, bool graphs, StepShape shape) {
  const size_t batch = shape.batch;
  genai::ModelOptions options;
  options.num_threads = 2;
  options.device = device;
  options.capture_device_graphs = graphs;
  options.preallocate_kv = true;  // no growth: every decode step binds the same cache
  OG_ASSIGN_OR_RETURN(std::unique_ptr<genai::Model> model, genai::Model::load(kPackage.string(), options));
  const char* texts[] = {"And God said", "The quick brown fox jumps over", "In the beginning", "It was"};
  genai::GeneratorParams params;
  params.sampling.greedy = true;
  params.ignore_eos = true;
  for (size_t b = 0; b < batch; ++b) {
    OG_ASSIGN_OR_RETURN(std::vector<int32_t> ids, model->encode(texts[b % 4]));
    for (size_t extra = 0; extra < b / 4; ++extra) ids.push_back(ids.back());
    params.prompts.push_back(std::move(ids));
  }
  OG_ASSIGN_OR_RETURN(auto generator, genai::Generator::create(*model, params));
  GraphRun result;
  const std::vector<int32_t> drafted(shape.step_tokens - 1, 42);
  const auto step = [&](int index) -> Status {
    if (index > 0 && !drafted.empty()) OG_RETURN_IF_ERROR(generator->append_tokens(drafted));
    return generator->generate_next();
  };
  // Prefill, then two decode steps: the second records.
  for (int i = 0; i < 3; ++i) OG_RETURN_IF_ERROR(step(i));
  const int64_t allocations = device_allocations();
  for (int i = 3; i <= kDecodeSteps; ++i) OG_RETURN_IF_ERROR(step(i));
  if (device.type == DeviceType::kCuda) result.allocations_while_replaying = device_allocations() - allocations;
  for (size_t b = 0; b < batch; ++b) {
    const auto tokens = generator->tokens(b);
    result.tokens.emplace_back(tokens.begin(), tokens.end());
  }
  result.stats = model->session_stats();
  return result;
}

// Counters of a run with graphs on: one segment per decode step, recorded on the second decode
// step and replayed on each later one.
void expect_replayed_decode(const SessionStats& stats) {
  EXPECT_EQ(stats.last_plan_graph_segments, 1) << "the decode step is one recorded segment";
  EXPECT_EQ(stats.graph_capture_failures, 0) << stats.last_graph_capture_failure;
  EXPECT_EQ(stats.graph_invalidations, 0);
  EXPECT_EQ(stats.graph_captures, stats.last_plan_graph_segments);
  EXPECT_EQ(stats.graph_replays, stats.last_plan_graph_segments * (kDecodeSteps - 1));
}

class DeviceGraphs : public ::testing::TestWithParam<StepShape> {};

TEST_P(DeviceGraphs, StandInDecodeStepsReplayAndGiveTheCpuTokens) {
  auto cpu = run(Device::cpu(), true, GetParam());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  EXPECT_EQ(cpu->stats.graph_captures, 0) << "a CPU session records nothing";
  StandInMemory memory;
  StandInScope scope(memory);
  auto recorded = run(Device{DeviceType::kCuda, 0}, true, GetParam());
  ASSERT_TRUE(recorded.is_ok()) << recorded.status().message();
  EXPECT_EQ(recorded->tokens, cpu->tokens);
  expect_replayed_decode(recorded->stats);
}

TEST_P(DeviceGraphs, GpuDecodeStepsReplayWithoutAllocatingAndGiveTheUnrecordedTokens) {
  OG_SKIP_WITHOUT_GPU();
  const Device gpu{DeviceType::kCuda, 0};
  auto eager = run(gpu, false, GetParam());
  ASSERT_TRUE(eager.is_ok()) << eager.status().message();
  EXPECT_EQ(eager->stats.graph_captures, 0);
  auto recorded = run(gpu, true, GetParam());
  ASSERT_TRUE(recorded.is_ok()) << recorded.status().message();
  EXPECT_EQ(recorded->tokens, eager->tokens);
  EXPECT_EQ(recorded->allocations_while_replaying, 0);
  std::printf("[ graphs   ] batch %zu, %zu tokens per step: %lld segments per decode step, %lld captures, %lld replays, "
              "%lld of %lld steps on the GPU\n",
              GetParam().batch, GetParam().step_tokens, static_cast<long long>(recorded->stats.last_plan_graph_segments),
              static_cast<long long>(recorded->stats.graph_captures), static_cast<long long>(recorded->stats.graph_replays),
              static_cast<long long>(recorded->stats.last_plan_device_steps),
              static_cast<long long>(recorded->stats.last_plan_steps));
  expect_replayed_decode(recorded->stats);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeviceGraphs, ::testing::Values(StepShape{1, 1}, StepShape{8, 1}, StepShape{1, 8}),
                         [](const ::testing::TestParamInfo<StepShape>& info) {
                           return "batch" + std::to_string(info.param.batch) + "_step" + std::to_string(info.param.step_tokens);
                         });

}  // namespace
}  // namespace onnx_genai
