// Structured output in the serving engine on a device: a constrained request whose chain after
// its mask is what SampleTokens computes (greedy, or temperature / top-k / top-p / min-p) takes
// its token in the graph, given its constraint's mask (genai/device_sampling.h), so its logits
// never come to the host. Checked without a GPU on a stand-in device (tests/runtime/
// stand_in_device.h: the CPU kernels over host memory, counting what crosses): greedy and
// seeded requests under a regex, batched beside an unconstrained one, give the CPU engine's
// tokens (the host Sampler behind the constraint processor), their texts match the regex, and
// the bytes brought to the host stay far below one row of logits per token.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "engine_test_util.h"
#include "runtime/stand_in_device.h"

namespace onnx_genai {
namespace {

const std::filesystem::path kPackage = std::filesystem::path(OG_SOURCE_DIR) / "models/debian-prose-11m";
const std::string kPattern = "(red|green|blue) (cat|dog)s?, [1-9][0-9]{0,2} (kg|g)";

Result<std::unique_ptr<genai::Engine>> load(Device device) {
  genai::EngineOptions options;
  options.model.device = device;
  options.model.num_threads = 1;
  options.max_num_batched_tokens = 64;
  options.max_num_seqs = 8;
  options.kv_cache_memory = int64_t{16} << 20;
  return genai::Engine::load(kPackage.string(), options);
}

std::vector<genai::RequestParams> request_params() {
  std::vector<genai::RequestParams> all;
  for (int k = 0; k < 5; ++k) {
    genai::RequestParams p;
    p.max_new_tokens = 40;
    if (k < 4) p.constraint = ConstraintSpec{ConstraintKind::kRegex, kPattern};
    if (k == 1) p.sampling.greedy = true;
    if (k == 2 || k == 4) {
      p.sampling.temperature = 0.9f;
      p.sampling.top_k = 50;
      p.sampling.seed = 17 + k;
    }
    if (k == 3) {
      p.sampling.temperature = 1.2f;
      p.sampling.top_p = 0.9f;
      p.sampling.seed = 99;
    }
    if (k == 0) p.sampling.greedy = true;
    all.push_back(p);
  }
  return all;
}

std::vector<testing::Finished> serve(genai::Engine& engine, const std::vector<genai::RequestParams>& params) {
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"The animal:", "And God said unto the", "Weight", "A colour and a beast:", "In the beginning"}) {
    prompts.push_back(engine.model().encode(text).value());
  }
  return testing::run_all(engine, prompts, params[0], {0, 0, 1, 3, 1}, &params);
}

TEST(EngineDeviceMasks, ConstrainedDrawsOnTheDeviceAreTheHostSamplersTokens) {
  const std::vector<genai::RequestParams> params = request_params();
  auto cpu = load(Device::cpu());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  const std::vector<testing::Finished> want = serve(**cpu, params);

  testing::StandInMemory memory;
  testing::StandInScope scope(memory);
  auto device = load(Device{DeviceType::kCuda, 0});
  ASSERT_TRUE(device.is_ok()) << device.status().message();
  ASSERT_TRUE((*device)->stats().paged);
  const int64_t downloaded = scope.device->downloaded_bytes;
  const std::vector<testing::Finished> got = serve(**device, params);
  const int64_t crossed = scope.device->downloaded_bytes - downloaded;

  int64_t tokens = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    tokens += static_cast<int64_t>(got[i].tokens.size());
    if (!params[i].constraint) continue;
    EXPECT_EQ(got[i].reason, genai::FinishReason::kEos) << "request " << i;
    std::vector<int32_t> text_tokens = got[i].tokens;
    if (!text_tokens.empty()) text_tokens.pop_back();  // the eos
    const std::string text = (*device)->model().tokenizer()->decode(text_tokens, {}).value();
    EXPECT_TRUE(std::regex_match(text, std::regex(kPattern))) << "request " << i << ": " << text;
  }
  // Greedy constrained rows take no uniform, so only the three seeded requests count as draws.
  EXPECT_GT((*device)->stats().device_sampled_tokens, 0) << "no constrained token was drawn on the device";
  const int64_t row_bytes = (*device)->model().info().vocab_size * static_cast<int64_t>(sizeof(float));
  EXPECT_LT(crossed, row_bytes * tokens / 8) << crossed << " bytes came to the host for " << tokens << " tokens";
  EXPECT_EQ((*device)->stats().kv_blocks_used, 0);
}

// warm_up() also compiles (and on a GPU records) each step shape's masked plan: constrained
// requests served afterwards compile none, and keep the tokens of an engine that was not warmed.
TEST(EngineDeviceMasks, WarmUpCompilesTheMaskedStepsToo) {
  const std::vector<genai::RequestParams> params = request_params();
  testing::StandInMemory memory;
  testing::StandInScope scope(memory);
  auto cold = load(Device{DeviceType::kCuda, 0});
  ASSERT_TRUE(cold.is_ok()) << cold.status().message();
  const std::vector<testing::Finished> want = serve(**cold, params);

  auto warm = load(Device{DeviceType::kCuda, 0});
  ASSERT_TRUE(warm.is_ok()) << warm.status().message();
  auto shapes = (*warm)->warm_up();
  ASSERT_TRUE(shapes.is_ok()) << shapes.status().message();
  EXPECT_EQ(*shapes, 21);  // 7 buckets of packed tokens (1 ... 64), each 3 ways
  const int64_t plans = (*warm)->stats().plans_compiled;
  const std::vector<testing::Finished> got = serve(**warm, params);
  EXPECT_EQ((*warm)->stats().plans_compiled, plans) << "a masked step shape the warm-up missed";
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
}

}  // namespace
}  // namespace onnx_genai
