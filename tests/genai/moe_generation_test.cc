// Mixture-of-experts presets of tools/build_model.py end to end on our CPU kernels, against the
// PyTorch float64 reference forward (tools/model_builder/reference.py, written from Hugging Face's
// definitions of each model's routing and expert activation), with no ONNX Runtime in the loop:
// it has no CPU kernel for MXFP4 experts (tests/runtime/model_parity_test.cc holds the presets
// it can run against it).
//
//   mixtral     MoE, float experts: softmax router, top 2 renormalised, SiLU-gated experts
//   mixtral     QMoE int4 blocks of 32
//   qwen3_moe   QMoE int4: q/k norms, 8 experts of width 64, top 4
//   gpt_oss     QMoE MXFP4 experts (router and expert biases, clamped SwiGLU with alpha 1.702),
//               attention sinks, sliding window 6 on even layers and full attention on odd ones
//
//   gpt_oss     QMoE MXFP4 experts read from a checkpoint in the published gpt-oss layout
//               (tests/genai/gpt_oss_mxfp4_checkpoint.py writes a tiny random one), against the
//               reference on that script's own dequantisation of those codes
//
// Our Session decodes each greedily (prefill of a right-padded batch of 3, then 8 steps; the
// window is reached inside the decode); the reference recomputes every row's whole sequence, and
// every real position's logits must agree within 1e-4 + 1e-4 * |ref| (the dense presets'
// tolerance: both sides compute with the very weights the graph holds, dequantised, and only
// summation order differs), greedy picks wherever the reference's top two are apart. Then the
// Generator (genai::Model, with its graph rewrites and KV cache) must pick the same tokens.
#include <gtest/gtest.h>

#include "genai_test_util.h"
#include "onnx_genai/session.h"

namespace onnx_genai {
namespace {

using testing::ParityFixture;

constexpr float kTolerance = 1e-4f;
constexpr int kSteps = 8;
const std::vector<std::vector<int64_t>> kBatch3 = {{5, 17, 300, 42, 7, 99, 3}, {11, 12}, {800, 1, 2, 3, 4}};

ParityFixture moe_fixture(std::string name, std::vector<std::string> builder) {
  return ParityFixture{std::move(name), std::move(builder), kBatch3, kSteps, ""};
}

std::vector<ParityFixture> moe_fixtures() {
  return {
      moe_fixture("mixtral_fp32", {"--preset", "mixtral"}),
      moe_fixture("mixtral_int4", {"--preset", "mixtral", "--weights", "int4", "--block-size", "32"}),
      moe_fixture("qwen3_moe_int4", {"--preset", "qwen3_moe", "--weights", "int4", "--block-size", "32"}),
      moe_fixture("gpt_oss_mxfp4", {"--preset", "gpt_oss", "--moe-weights", "mxfp4"}),
  };
}

// Builds `fixture`, decodes it, and compares with the reference forward of `reference` (the same
// model, possibly from other files of the same weights).
void expect_decode_matches_reference(const ParityFixture& fixture, const ParityFixture& reference_fixture,
                                     const std::filesystem::path& scratch) {
  const auto dir = testing::build_model_or_fail(fixture, scratch);
  ASSERT_FALSE(dir.empty());

  SessionOptions options;
  options.num_threads = 2;
  auto session = Session::load((dir / "model.onnx").string(), options);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto trace = testing::session_greedy_decode(**session, fixture.prompts, kSteps, /*pad_id=*/0);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  auto reference = testing::run_reference(reference_fixture, testing::trace_sequences(*trace, fixture.prompts), scratch);
  ASSERT_TRUE(reference.is_ok()) << reference.status().message();
  ASSERT_EQ(reference->size(), fixture.prompts.size());

  const testing::LogitComparison c =
      testing::compare_with_reference(*trace, fixture.prompts, *reference, kTolerance, kTolerance);
  int64_t positions = 0;
  for (const auto& prompt : fixture.prompts) positions += static_cast<int64_t>(prompt.size()) + kSteps;
  EXPECT_EQ(c.rows_compared, positions);
  EXPECT_EQ(c.out_of_tolerance, 0) << "first at " << c.first_failure << "; max abs diff " << c.max_abs_diff;
  EXPECT_EQ(c.argmax_mismatches, 0);
  std::printf("[ reference] %s: %lld positions, max |ours - pytorch| = %.3g\n", fixture.name.c_str(),
              static_cast<long long>(c.rows_compared), c.max_abs_diff);

  auto model = genai::Model::load(dir.string(), genai::ModelOptions{.num_threads = 2});
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  auto generated = testing::generate_greedy(**model, testing::to_int32(fixture.prompts), kSteps + 1);
  ASSERT_TRUE(generated.is_ok()) << generated.status().message();
  for (size_t b = 0; b < fixture.prompts.size(); ++b) {
    std::vector<int32_t> picks;
    for (int k = 0; k <= kSteps; ++k) {
      picks.push_back(static_cast<int32_t>(trace->generated.data<int64_t>()[static_cast<int64_t>(b) * (kSteps + 1) + k]));
    }
    EXPECT_EQ((*generated)[b], picks) << "sequence " << b;
  }
}

class MoeGeneration : public ::testing::TestWithParam<ParityFixture> {};

TEST_P(MoeGeneration, DecodeMatchesPytorchReference) {
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  expect_decode_matches_reference(GetParam(), GetParam(), scratch.path());
}

// The checkpoint's MXFP4 codes go into QMoE as they are; the reference computes with the dense
// weights the checkpoint script dequantised itself, so a wrong nibble order, row interleaving or
// scale bias in the builder shows here.
TEST(MoeCheckpoint, GptOssMxfp4CheckpointMatchesDequantisedReference) {
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const std::filesystem::path checkpoint = scratch.path() / "gpt_oss_checkpoint";
  const std::string writer = testing::source_dir() + "/tests/genai/gpt_oss_mxfp4_checkpoint.py";
  const Status written = testing::run_checked(
      "gpt_oss_mxfp4_checkpoint.py",
      testing::python() + " " + testing::shell_quote(writer) + " " + testing::shell_quote(checkpoint.string()), scratch.path());
  ASSERT_TRUE(written.is_ok()) << written.message();
  const ParityFixture model = moe_fixture(
      "gpt_oss_mxfp4_checkpoint", {"--preset", "gpt_oss", "--moe-weights", "mxfp4", "--checkpoint", (checkpoint / "mxfp4").string()});
  const ParityFixture reference =
      moe_fixture("gpt_oss_dense_checkpoint", {"--preset", "gpt_oss", "--checkpoint", (checkpoint / "dense.safetensors").string()});
  expect_decode_matches_reference(model, reference, scratch.path());
}

INSTANTIATE_TEST_SUITE_P(Presets, MoeGeneration, ::testing::ValuesIn(moe_fixtures()),
                         [](const ::testing::TestParamInfo<ParityFixture>& info) { return info.param.name; });

}  // namespace
}  // namespace onnx_genai
