// Beam search with the decoder on the GPU (ModelOptions::device = cuda:0): the KV rows follow the
// beams on the device (KvCache::gather_rows through the CUDA allocator), and the returned beams
// and scores equal the same search on the CPU. Float fixtures (tools/build_model.py, random
// weights) of both KV disciplines: GroupQueryAttention's shared buffer and a concatenated cache.
// Without a usable GPU each test skips with the reason.
#include <gtest/gtest.h>

#include <cmath>

#include "genai_test_util.h"
#include "onnx_genai/genai.h"

#include "gpu_skip.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::ParityFixture;

struct BeamRun {
  std::vector<std::vector<int32_t>> tokens;  // per returned sequence
  std::vector<double> scores;
};

Result<BeamRun> run_beams(const fs::path& dir, Device device) {
  genai::ModelOptions options;
  options.num_threads = 2;
  options.device = device;
  OG_ASSIGN_OR_RETURN(std::unique_ptr<genai::Model> model, genai::Model::load(dir.string(), options));
  if (model->device() != device) return OG_ERROR("the model did not load on ", device.to_string(), ": ", model->device_fallback());
  genai::GeneratorParams params;
  params.sampling.greedy = true;
  params.beam.num_beams = 4;
  params.beam.num_return_sequences = 2;
  params.beam.length_penalty = 1.5f;
  params.max_new_tokens = 12;
  params.prompts = {{5, 17, 300, 42, 7, 99, 3}, {11, 12}};
  OG_ASSIGN_OR_RETURN(auto generator, genai::Generator::create(*model, params));
  OG_RETURN_IF_ERROR(generator->generate(nullptr));
  BeamRun run;
  for (size_t s = 0; s < generator->batch_size(); ++s) {
    const auto tokens = generator->tokens(s);
    run.tokens.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(generator->prompt_length(s)), tokens.end());
    run.scores.push_back(generator->beam_score(s));
  }
  return run;
}

class CudaBeamSearch : public ::testing::TestWithParam<ParityFixture> {};

TEST_P(CudaBeamSearch, MatchesCpu) {
  OG_SKIP_WITHOUT_GPU();
  testing::ScopedTempDir scratch;
  const fs::path dir = testing::build_model_or_fail(GetParam(), scratch.path());
  ASSERT_FALSE(dir.empty());
  auto cpu = run_beams(dir, Device::cpu());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  auto gpu = run_beams(dir, Device{DeviceType::kCuda, 0});
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  ASSERT_EQ(cpu->tokens.size(), 4u);
  EXPECT_EQ(gpu->tokens, cpu->tokens);
  for (size_t s = 0; s < cpu->scores.size(); ++s) {
    EXPECT_NEAR(gpu->scores[s], cpu->scores[s], 1e-3 * std::max(1.0, std::abs(cpu->scores[s]))) << "sequence " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, CudaBeamSearch,
    ::testing::Values(ParityFixture{"genai_llama_fp32", {"--preset", "llama", "--style", "genai"}, {}, 0, ""},
                      ParityFixture{"standard_llama_fp32", {"--preset", "llama", "--style", "standard"}, {}, 0, ""}),
    [](const ::testing::TestParamInfo<ParityFixture>& info) { return info.param.name; });

}  // namespace
}  // namespace onnx_genai
