// The decoder on the GPU (ModelOptions::device = cuda:0) against the same package on the CPU:
//   - greedy tokens of a ragged batch, 64 per sequence: equal, or where the two runs part, the
//     CPU's own top two logprobs at that step are a near tie (the GPU computes MatMulNBits in f32,
//     the CPU at accuracy_level 4 quantizes activations to int8, so a pick within that noise may
//     flip; anything else fails);
//   - the default model's perplexity on its validation text, within 0.5%.
// Nodes without a CUDA kernel run on the CPU with copies between them, so every fixture runs
// whatever the backend covers so far. Without a usable GPU (a build without CUDA, no device,
// another architecture) each test skips with the reason.
#include <gtest/gtest.h>

#include <cmath>

#include "genai_test_util.h"
#include "onnx_genai/genai.h"

#include "gpu_skip.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::ParityFixture;

constexpr int kTokens = 64;
// Largest logprob gap between the CPU's pick and the GPU's pick at the step where they part.
constexpr float kNearTie = 0.02f;
const fs::path kPackage = fs::path(testing::source_dir()) / "models" / "debian-prose-11m";


struct GreedyRun {
  std::vector<std::vector<int32_t>> tokens;        // generated, per sequence
  std::vector<std::vector<SampledToken>> picks;    // with the top two logprobs, per step
};

Result<GreedyRun> greedy_with_logprobs(const fs::path& dir, Device device,
                                       const std::vector<std::vector<int32_t>>& prompts) {
  genai::ModelOptions options;
  options.num_threads = 2;
  options.device = device;
  OG_ASSIGN_OR_RETURN(std::unique_ptr<genai::Model> model, genai::Model::load(dir.string(), options));
  genai::GeneratorParams params;
  params.sampling.greedy = true;
  params.sampling.logprobs = true;
  params.sampling.top_logprobs = 2;
  params.ignore_eos = true;
  params.max_new_tokens = kTokens;
  params.prompts = prompts;
  OG_ASSIGN_OR_RETURN(auto generator, genai::Generator::create(*model, params));
  OG_RETURN_IF_ERROR(generator->generate(nullptr));
  GreedyRun run;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const auto tokens = generator->tokens(b);
    run.tokens.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(generator->prompt_length(b)), tokens.end());
    const auto picks = generator->logprobs(b);
    run.picks.emplace_back(picks.begin(), picks.end());
  }
  if (device.type != DeviceType::kCpu) {
    const SessionStats stats = model->session_stats();
    std::printf("[ device   ] %s: %lld of %lld steps on the GPU, %lld transfers in the last plan\n",
                dir.filename().c_str(), static_cast<long long>(stats.last_plan_device_steps),
                static_cast<long long>(stats.last_plan_steps), static_cast<long long>(stats.last_plan_transfers));
    if (stats.last_plan_device_steps == 0) return OG_ERROR("no step of the last plan ran on the GPU");
  }
  return run;
}

// Equal tokens, or a parting at a near tie of the CPU's top two.
void expect_same_greedy_tokens(const GreedyRun& cpu, const GreedyRun& gpu) {
  ASSERT_EQ(cpu.tokens.size(), gpu.tokens.size());
  for (size_t b = 0; b < cpu.tokens.size(); ++b) {
    const auto& want = cpu.tokens[b];
    const auto& got = gpu.tokens[b];
    ASSERT_EQ(want.size(), static_cast<size_t>(kTokens)) << "sequence " << b;
    ASSERT_EQ(got.size(), want.size()) << "sequence " << b;
    const auto parted = std::mismatch(want.begin(), want.end(), got.begin());
    if (parted.first == want.end()) continue;
    const auto step = static_cast<size_t>(parted.first - want.begin());
    const std::vector<TokenLogprob>& top = cpu.picks[b][step].top_logprobs;
    ASSERT_EQ(top.size(), 2u);
    ASSERT_EQ(top[1].token, got[step]) << "sequence " << b << " step " << step
                                       << ": the GPU picked a token outside the CPU's top two";
    EXPECT_LT(top[0].logprob - top[1].logprob, kNearTie)
        << "sequence " << b << " parts at step " << step << " where the CPU's top two are "
        << top[0].logprob << " and " << top[1].logprob;
    std::printf("[ parted   ] sequence %zu at step %zu, a near tie (%.4f vs %.4f)\n", b, step, top[0].logprob,
                top[1].logprob);
  }
}

TEST(CudaGeneration, DefaultModelGreedyMatchesCpu) {
  OG_SKIP_WITHOUT_GPU();
  auto model = genai::Model::load(kPackage.string());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"And God said", "The quick brown fox jumps over", "In the beginning"}) {
    auto ids = (*model)->encode(text);
    ASSERT_TRUE(ids.is_ok()) << ids.status().message();
    prompts.push_back(*ids);
  }
  auto cpu = greedy_with_logprobs(kPackage, Device::cpu(), prompts);
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  auto gpu = greedy_with_logprobs(kPackage, Device{DeviceType::kCuda, 0}, prompts);
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  expect_same_greedy_tokens(*cpu, *gpu);
}

TEST(CudaGeneration, DefaultModelPerplexityMatchesCpu) {
  OG_SKIP_WITHOUT_GPU();
  auto text = testing::read_text_file(kPackage / "valid.txt");
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  double ppl[2] = {0, 0};
  for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
    genai::ModelOptions options;
    options.num_threads = 2;
    if (on_gpu) options.device = Device{DeviceType::kCuda, 0};
    auto model = genai::Model::load(kPackage.string(), options);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    auto ids = (*model)->encode(*text);
    ASSERT_TRUE(ids.is_ok()) << ids.status().message();
    auto result = genai::evaluate_perplexity(**model, *ids, {});
    ASSERT_TRUE(result.is_ok()) << result.status().message();
    ppl[on_gpu] = result->ppl;
  }
  std::printf("[ ppl      ] cpu %.4f, cuda %.4f\n", ppl[0], ppl[1]);
  EXPECT_NEAR(ppl[1] / ppl[0], 1.0, 0.005);
}

// Fixtures from tools/build_model.py (random weights): both graph styles, int4 and float, f32 and
// f16 activations, a sliding window with rotary from position_ids, mixtures of experts.
class CudaGreedyLock : public ::testing::TestWithParam<ParityFixture> {};

TEST_P(CudaGreedyLock, GreedyTokensMatchCpu) {
  OG_SKIP_WITHOUT_GPU();
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const fs::path dir = testing::build_model_or_fail(GetParam(), scratch.path());
  ASSERT_FALSE(dir.empty());
  const auto prompts = testing::to_int32(GetParam().prompts);
  auto cpu = greedy_with_logprobs(dir, Device::cpu(), prompts);
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  auto gpu = greedy_with_logprobs(dir, Device{DeviceType::kCuda, 0}, prompts);
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  expect_same_greedy_tokens(*cpu, *gpu);
}

ParityFixture fixture(std::string name, std::vector<std::string> builder) {
  return ParityFixture{std::move(name), std::move(builder),
                       {{5, 17, 300, 42, 7, 99, 3}, {11, 12}, {800, 1, 2, 3, 4}}, kTokens - 1, ""};
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, CudaGreedyLock,
    ::testing::Values(
        fixture("genai_llama_int4", {"--preset", "llama", "--style", "genai", "--weights", "int4", "--block-size", "32"}),
        fixture("genai_qwen2_int4_f16", {"--preset", "qwen2", "--style", "genai", "--weights", "int4", "--io-dtype", "f16",
                                         "--quantize-embeddings"}),
        fixture("genai_mistral_window_position_ids_fp32", {"--preset", "mistral", "--style", "genai", "--position-ids"}),
        fixture("standard_llama_fp32", {"--preset", "llama", "--style", "standard"}),
        // Mixtures of experts: float experts, int4 (QMoE), MXFP4 with gpt-oss's sinks and windows.
        fixture("mixtral_fp32", {"--preset", "mixtral"}),
        fixture("qwen3_moe_int4", {"--preset", "qwen3_moe", "--weights", "int4", "--block-size", "32"}),
        fixture("gpt_oss_mxfp4", {"--preset", "gpt_oss", "--moe-weights", "mxfp4"})),
    [](const ::testing::TestParamInfo<ParityFixture>& info) { return info.param.name; });

}  // namespace
}  // namespace onnx_genai
