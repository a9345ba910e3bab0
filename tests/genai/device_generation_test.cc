// The generator with its decoder on a device, checked without a GPU: a stand-in device in tracked
// host memory that runs the CPU kernels (tests/runtime/stand_in_device.h). Every node runs "on
// the device": token ids, masks and positions go up, logits come down, initializers are uploaded
// once, and the KV cache lives in the stand-in's memory, where it grows and rewinds. The kernels
// are the CPU's, run in the same order, so tokens and perplexity must equal a CPU session's
// exactly; what this checks is the device plumbing around them.
#include <gtest/gtest.h>

#include "genai_test_util.h"
#include "onnx_genai/genai.h"
#include "runtime/stand_in_device.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::StandInDevice;
using testing::StandInMemory;

const Device kStandIn{DeviceType::kCuda, 0};

// While alive, a session asked for cuda:0 gets a stand-in device over `memory` running the CPU
// kernels; `opened` counts the devices made.
class StandInScope {
 public:
  explicit StandInScope(StandInMemory& memory) {
    set_execution_device_opener_for_tests([&memory, this](Device) -> Result<std::unique_ptr<ExecutionDevice>> {
      ++opened;
      return std::unique_ptr<ExecutionDevice>(new StandInDevice(memory, DeviceType::kCpu));
    });
  }
  ~StandInScope() { set_execution_device_opener_for_tests(nullptr); }
  StandInScope(const StandInScope&) = delete;
  StandInScope& operator=(const StandInScope&) = delete;
  int opened = 0;
};

Result<std::unique_ptr<genai::Model>> load(const fs::path& dir, Device device) {
  genai::ModelOptions options;
  options.num_threads = 2;
  options.device = device;
  options.initial_kv_capacity = 8;  // several growths within a test
  return genai::Model::load(dir.string(), options);
}

// Greedy tokens of each prompt: `first` of them, then (when `rewind_to` > 0) a rewind of every
// sequence to `rewind_to` tokens and `second` more.
Result<std::vector<std::vector<int32_t>>> greedy(const genai::Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                                 int first, size_t rewind_to = 0, int second = 0) {
  genai::GeneratorParams params;
  params.sampling.greedy = true;
  params.ignore_eos = true;
  params.prompts = prompts;
  OG_ASSIGN_OR_RETURN(auto generator, genai::Generator::create(model, params));
  for (int i = 0; i < first; ++i) OG_RETURN_IF_ERROR(generator->generate_next());
  if (rewind_to > 0) {
    OG_RETURN_IF_ERROR(generator->rewind(rewind_to));
    for (int i = 0; i < second; ++i) OG_RETURN_IF_ERROR(generator->generate_next());
  }
  std::vector<std::vector<int32_t>> out;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const auto tokens = generator->tokens(b);
    out.emplace_back(tokens.begin(), tokens.end());
  }
  return out;
}

TEST(DeviceGeneration, DefaultModelOnAStandInDeviceGivesTheCpuTokensAndPerplexity) {
  const fs::path package = fs::path(testing::source_dir()) / "models" / "debian-prose-11m";
  auto cpu = load(package, Device::cpu());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"And God said", "The quick brown fox jumps over", "In the beginning"}) {
    auto ids = (*cpu)->encode(text);
    ASSERT_TRUE(ids.is_ok()) << ids.status().message();
    prompts.push_back(*ids);
  }
  auto text = testing::read_text_file(package / "valid.txt");
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  auto ids = (*cpu)->encode(text->substr(0, 3000));
  ASSERT_TRUE(ids.is_ok()) << ids.status().message();
  genai::PerplexityOptions windows;
  windows.window = 256;
  windows.stride = 128;
  auto want_tokens = greedy(**cpu, prompts, 40);
  ASSERT_TRUE(want_tokens.is_ok()) << want_tokens.status().message();
  auto want_ppl = genai::evaluate_perplexity(**cpu, *ids, windows);
  ASSERT_TRUE(want_ppl.is_ok()) << want_ppl.status().message();

  StandInMemory memory;
  StandInScope scope(memory);
  auto device = load(package, kStandIn);
  ASSERT_TRUE(device.is_ok()) << device.status().message();
  EXPECT_EQ(scope.opened, 1);
  auto got_tokens = greedy(**device, prompts, 40);
  ASSERT_TRUE(got_tokens.is_ok()) << got_tokens.status().message();
  EXPECT_EQ(*got_tokens, *want_tokens);
  const SessionStats stats = (*device)->session_stats();
  EXPECT_EQ(stats.last_plan_device_steps, stats.last_plan_steps - stats.last_plan_transfers)
      << "every kernel runs on the device";
  EXPECT_GT(stats.last_plan_transfers, 0);
  EXPECT_GT(stats.device_arena_bytes, 0);
  auto got_ppl = genai::evaluate_perplexity(**device, *ids, windows);
  ASSERT_TRUE(got_ppl.is_ok()) << got_ppl.status().message();
  EXPECT_EQ(got_ppl->nll, want_ppl->nll);
}

// A concatenated cache (standard-style graph) re-lays its rows out when rewound: through the
// device allocator's copy_rows here.
TEST(DeviceGeneration, ConcatenatedCacheRewindsOnTheDevice) {
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const testing::ParityFixture fixture{"standard_llama_fp32", {"--preset", "llama", "--style", "standard"}, {}, 0, ""};
  const fs::path dir = testing::build_model_or_fail(fixture, scratch.path());
  ASSERT_FALSE(dir.empty());
  const std::vector<std::vector<int32_t>> prompts = {{5, 17, 300, 42, 7, 99, 3}, {11, 12}, {800, 1, 2, 3, 4}};
  auto cpu = load(dir, Device::cpu());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  auto want = greedy(**cpu, prompts, 20, 10, 12);
  ASSERT_TRUE(want.is_ok()) << want.status().message();

  StandInMemory memory;
  StandInScope scope(memory);
  auto device = load(dir, kStandIn);
  ASSERT_TRUE(device.is_ok()) << device.status().message();
  auto got = greedy(**device, prompts, 20, 10, 12);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ(*got, *want);
}

}  // namespace
}  // namespace onnx_genai
