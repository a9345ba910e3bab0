// Whole-model decode parity with ONNX Runtime on models tools/build_model.py writes at test time
// in each graph style (onnxruntime-genai builder ops, opset-17 standard ops, opset-23 Attention /
// RMSNormalization / RotaryEmbedding). Each fixture is decoded greedily by ONNX Runtime
// (tests/oracle/ort_decode.mjs: prefill + 8 steps, batch rows of different lengths padded as the
// style requires); our Session replays the same feeds with its own KV cache, and every real
// position's logits are compared. A second suite checks the builder itself: ONNX Runtime's logits
// against the PyTorch float64 reference forward (tools/model_builder/reference.py), which
// recomputes each whole sequence without a cache.
//
// Fixtures cover the onnxruntime-genai builder generations (seqlens_k [B] or [B, 1], packed or
// separate q/k/v, shared or separate past/present buffers); GQA group sizes 1, 4, 7 and 8; head_dim 32, 64 and 128; an odd vocabulary
// (1001); tied embeddings (float, and int4 GatherBlockQuantized sharing the LM head's codes);
// MatMulNBits int4 blocks 32 and 128 (symmetric and with zero points), int8; plain fp32 and fp16
// MatMul; q/k norms (Qwen3), qkv bias (Qwen2), fused weights (Phi-3), sliding window 6 reached
// inside the decode (Mistral), Gemma's scaled embeddings, (1 + w) norms, GELU-tanh and softcaps;
// batch 1 and batch 3 with prompts of 7, 2 and 5 tokens, left-padded (Hugging Face) or
// right-padded (GroupQueryAttention needs each row to start at cache slot 0; one standard-op
// fixture is right-padded too, so its decode masks have holes); external data (64-byte aligned,
// mapped by our loader); mixture-of-experts presets where ONNX Runtime's CPU kernels run them
// (MoE fp32 and QMoE int4 / int8 experts, router_weights when the k weights are not
// renormalised, gpt-oss's clamped SwiGLU with attention sinks and alternating windows; MXFP4
// experts have no ORT CPU kernel: tests/genai/moe_generation_test.cc checks those against PyTorch).
//
// Tolerance, ours vs ORT: fp32 models |ours - ort| <= 1e-4 + 1e-4 * |ort| per logit. Both sides
// compute in fp32 (MatMulNBits at accuracy_level 0 dequantizes to fp32 on both), so only
// summation order and exp/tanh implementations differ: measured <= 1.2e-5 on every ISA path,
// and ORT itself is within 6e-6 of the float64 reference (logits are O(1)), while a wrong mask,
// position, rotary half or cache slot moves logits by 0.1 or more. fp16 models: 2e-2 + 1e-2 *
// |ort|: activations are rounded to fp16 after every op (ulp 4e-3 at 4..8), measured 7.6e-3
// (two ulps), and ORT's fp16 logits are 6e-3 from the reference. Greedy picks must agree
// wherever ORT's top two logits are further apart than twice the absolute tolerance. The
// reference suite allows 1e-4 + 1e-4 * |ref| (measured <= 4.8e-6).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "model_parity.h"
#include "onnx_genai/session.h"

namespace onnx_genai {
namespace {

using testing::ParityFixture;

constexpr float kF32Tolerance = 1e-4f;
constexpr float kF16AbsTolerance = 2e-2f;
constexpr float kF16RelTolerance = 1e-2f;

const std::vector<std::vector<int64_t>> kBatch3 = {{5, 17, 300, 42, 7, 99, 3}, {11, 12}, {800, 1, 2, 3, 4}};
const std::vector<std::vector<int64_t>> kBatch1 = {{9, 250, 31, 400, 2, 77}};

struct ParityCase {
  ParityFixture fixture;
  bool f16 = false;
};

void PrintTo(const ParityCase& c, std::ostream* os) { *os << c.fixture.name; }

std::string case_name(const ::testing::TestParamInfo<ParityCase>& info) { return info.param.fixture.name; }

// Builder arguments shared by the fixtures of one shape.
std::vector<std::string> args(std::initializer_list<std::vector<std::string>> groups) {
  std::vector<std::string> out;
  for (const auto& group : groups) out.insert(out.end(), group.begin(), group.end());
  return out;
}

const std::vector<std::string> kGqa4Head64 = {"--set", "hidden_size=256", "--set", "num_attention_heads=4",
                                              "--set", "num_key_value_heads=1", "--set", "head_dim=64",
                                              "--set", "intermediate_size=512"};
const std::vector<std::string> kGqa8Head128OddVocab = {"--set", "hidden_size=256", "--set", "num_attention_heads=8",
                                                       "--set", "num_key_value_heads=1", "--set", "head_dim=128",
                                                       "--set", "vocab_size=1001"};
const std::vector<std::string> kMha256 = {"--set", "hidden_size=256", "--set", "num_attention_heads=4", "--set",
                                          "num_key_value_heads=4"};
const std::vector<std::string> kGqa7 = {"--set", "hidden_size=224", "--set", "num_attention_heads=7",
                                        "--set", "num_key_value_heads=1", "--set", "head_dim=32"};
const std::vector<std::string> kSoftcaps = {"--set", "attn_logit_softcapping=1.0", "--set",
                                            "final_logit_softcapping=0.1"};

ParityCase make_case(std::string name, std::string preset, std::string style, std::vector<std::string> extra,
                     const std::vector<std::vector<int64_t>>& prompts, bool f16 = false, std::string padding = "") {
  std::vector<std::string> builder = {"--preset", std::move(preset), "--style", style};
  builder.insert(builder.end(), extra.begin(), extra.end());
  return {ParityFixture{style + "_" + name, std::move(builder), prompts, 8, std::move(padding)}, f16};
}

std::vector<ParityCase> genai_cases() {
  return {
      make_case("llama_gqa4_head64_int4_block32", "llama", "genai",
                args({kGqa4Head64, {"--weights", "int4", "--block-size", "32"}}), kBatch3),
      make_case("qwen3_gqa8_head128_oddvocab_int4_block128", "qwen3", "genai",
                args({kGqa8Head128OddVocab, {"--weights", "int4", "--block-size", "128"}}), kBatch1),
      make_case("qwen2_mha_tied_fp32", "qwen2", "genai", kMha256, kBatch3),
      make_case("gemma_tied_int4_asym_quantized_embeddings_softcap", "gemma", "genai",
                args({kSoftcaps, {"--weights", "int4", "--block-size", "32", "--asymmetric", "--quantize-embeddings"}}),
                kBatch3),
      make_case("mistral_gqa7_window_int8_position_ids", "mistral", "genai",
                args({kGqa7, {"--weights", "int8", "--block-size", "32", "--position-ids"}}), kBatch3),
      make_case("phi3_f16", "phi3", "genai", {"--io-dtype", "f16"}, kBatch3, true),
      // Older onnxruntime-genai builders: seqlens_k [B, 1] (ReduceSum keeping dims), q/k/v (with
      // bias) as three MatMulNBits into GroupQueryAttention, an untied GatherBlockQuantized table,
      // past and present in separate buffers.
      make_case("llama_seqlens_keepdims_int4_block32", "llama", "genai",
                args({kGqa4Head64, {"--seqlens-keepdims", "--weights", "int4", "--block-size", "32"}}), kBatch3),
      make_case("qwen2_untied_separate_qkv_int4_asym_quantized_embeddings", "qwen2", "genai",
                args({kMha256, {"--set", "tie_word_embeddings=false", "--separate-qkv", "--weights", "int4",
                                "--block-size", "32", "--asymmetric", "--quantize-embeddings"}}),
                kBatch3),
      make_case("llama_separate_kv_buffers_seqlens_keepdims", "llama", "genai",
                args({kGqa4Head64, {"--seqlens-keepdims", "--separate-kv-buffers"}}), kBatch3, false, "right"),
  };
}

std::vector<ParityCase> moe_cases() {
  return {
      make_case("mixtral_moe_fp32", "mixtral", "genai", {}, kBatch3),
      make_case("mixtral_qmoe_int4_block32", "mixtral", "genai", {"--weights", "int4", "--block-size", "32"}, kBatch3),
      make_case("qwen3_moe_qmoe_int8_router_weights", "qwen3_moe", "genai",
                {"--set", "norm_topk_prob=false", "--weights", "int8", "--block-size", "32"}, kBatch3),
      make_case("gpt_oss_sinks_windows_qmoe_int4", "gpt_oss", "genai", {"--weights", "int4", "--block-size", "32"},
                kBatch3),
  };
}

std::vector<ParityCase> standard_cases() {
  return {
      make_case("llama_gqa4_head64", "llama", "standard", kGqa4Head64, kBatch3),
      make_case("qwen3_gqa8_head128_oddvocab", "qwen3", "standard", kGqa8Head128OddVocab, kBatch1),
      // Right padding: decode steps see masks with holes (pads between prompt and new tokens).
      make_case("qwen2_mha_tied_right_padded", "qwen2", "standard", kMha256, kBatch3, false, "right"),
      make_case("phi3_fused", "phi3", "standard", {}, kBatch3),
      make_case("mistral_gqa7_window", "mistral", "standard", kGqa7, kBatch3),
      make_case("gemma_softcap", "gemma", "standard", kSoftcaps, kBatch3),
      make_case("llama_f16", "llama", "standard", {"--io-dtype", "f16"}, kBatch3, true),
      make_case("llama_external_data", "llama", "standard", {"--external-data"}, kBatch1),
  };
}

std::vector<ParityCase> opset23_cases() {
  return {
      make_case("llama_gqa4_head64", "llama", "opset23", kGqa4Head64, kBatch3),
      make_case("qwen3_gqa8_head128_oddvocab", "qwen3", "opset23", kGqa8Head128OddVocab, kBatch1),
      make_case("gemma_tied_softcap", "gemma", "opset23", kSoftcaps, kBatch3),
      make_case("mistral_gqa7_window", "mistral", "opset23", kGqa7, kBatch3),
  };
}

class ModelParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(ModelParity, DecodeMatchesOnnxRuntime) {
  const ParityCase& param = GetParam();
  const ParityFixture& fixture = param.fixture;
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  std::printf("[ builder  ] %s\n", testing::builder_command(fixture, "OUT").c_str());
  auto model_dir = testing::build_fixture_model(fixture, scratch.path());
  ASSERT_TRUE(model_dir.is_ok()) << model_dir.status().message();
  auto ort = testing::run_ort_decode(*model_dir, fixture, scratch.path());
  ASSERT_TRUE(ort.is_ok()) << ort.status().message();

  SessionOptions options;
  options.num_threads = 2;
  auto session = Session::load((*model_dir / "model.onnx").string(), options);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto ours = testing::decode_with_session(**session, *ort);
  ASSERT_TRUE(ours.is_ok()) << ours.status().message();

  const float abs_tol = param.f16 ? kF16AbsTolerance : kF32Tolerance;
  const float rel_tol = param.f16 ? kF16RelTolerance : kF32Tolerance;
  auto comparison = testing::compare_steps(*ours, *ort, abs_tol, rel_tol);
  ASSERT_TRUE(comparison.is_ok()) << comparison.status().message();
  EXPECT_GT(comparison->rows_compared, 0);
  EXPECT_EQ(comparison->out_of_tolerance, 0) << comparison->out_of_tolerance << " logits out of tolerance, first at "
                                             << comparison->first_failure << "; max abs diff "
                                             << comparison->max_abs_diff;
  EXPECT_EQ(comparison->argmax_mismatches, 0);
  RecordProperty("max_abs_diff", std::to_string(comparison->max_abs_diff));
  std::printf("[ parity   ] %s: %lld positions, max |ours - ort| = %.3g\n", fixture.name.c_str(),
              static_cast<long long>(comparison->rows_compared), comparison->max_abs_diff);
}

INSTANTIATE_TEST_SUITE_P(Genai, ModelParity, ::testing::ValuesIn(genai_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Moe, ModelParity, ::testing::ValuesIn(moe_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Standard, ModelParity, ::testing::ValuesIn(standard_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Opset23, ModelParity, ::testing::ValuesIn(opset23_cases()), case_name);

// The builder checked against the model's definition: ONNX Runtime decodes each fixture, then the
// PyTorch reference recomputes every row's whole sequence (prompt + ORT's picks) at once.
class ModelParityReference : public ::testing::TestWithParam<ParityCase> {};

TEST_P(ModelParityReference, OnnxRuntimeMatchesPytorchReference) {
  const ParityFixture& fixture = GetParam().fixture;
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  auto model_dir = testing::build_fixture_model(fixture, scratch.path());
  ASSERT_TRUE(model_dir.is_ok()) << model_dir.status().message();
  auto ort = testing::run_ort_decode(*model_dir, fixture, scratch.path());
  ASSERT_TRUE(ort.is_ok()) << ort.status().message();

  const std::vector<std::vector<int64_t>> sequences = testing::trace_sequences(*ort, fixture.prompts);
  auto reference = testing::run_reference(fixture, sequences, scratch.path());
  ASSERT_TRUE(reference.is_ok()) << reference.status().message();
  ASSERT_EQ(reference->size(), sequences.size());

  const testing::LogitComparison c =
      testing::compare_with_reference(*ort, fixture.prompts, *reference, kF32Tolerance, kF32Tolerance);
  int64_t positions = 0;
  for (const auto& sequence : sequences) positions += static_cast<int64_t>(sequence.size());
  EXPECT_EQ(c.rows_compared, positions);
  EXPECT_EQ(c.out_of_tolerance, 0) << "first at " << c.first_failure << "; max abs diff " << c.max_abs_diff;
  EXPECT_EQ(c.argmax_mismatches, 0);
  std::printf("[ reference] %s: %lld positions, max |ort - pytorch| = %.3g\n", fixture.name.c_str(),
              static_cast<long long>(c.rows_compared), c.max_abs_diff);
}

std::vector<ParityCase> reference_cases() {
  return {genai_cases()[3], standard_cases()[4], opset23_cases()[1], moe_cases()[2], moe_cases()[3]};
}

INSTANTIATE_TEST_SUITE_P(Builder, ModelParityReference, ::testing::ValuesIn(reference_cases()), case_name);

// --external-data puts every tensor of 1 KiB or more into model.onnx.data at an offset that is a
// multiple of 64, so our loader maps them from the file instead of copying them.
TEST(ModelParityExternalData, TensorsAreAlignedTo64BytesAndMapped) {
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const ParityFixture fixture{
      "external", {"--preset", "llama", "--style", "standard", "--external-data"}, kBatch1, 0, ""};
  auto model_dir = testing::build_fixture_model(fixture, scratch.path());
  ASSERT_TRUE(model_dir.is_ok()) << model_dir.status().message();

  onnx::ModelProto model;
  std::ifstream file(*model_dir / "model.onnx", std::ios::binary);
  ASSERT_TRUE(model.ParseFromIstream(&file));
  int64_t external_bytes = 0;
  int external_tensors = 0;
  for (const onnx::TensorProto& tensor : model.graph().initializer()) {
    if (tensor.data_location() != onnx::TensorProto::EXTERNAL) continue;
    ++external_tensors;
    for (const auto& entry : tensor.external_data()) {
      int64_t value = -1;
      std::from_chars(entry.value().data(), entry.value().data() + entry.value().size(), value);
      if (entry.key() == "offset") {
        EXPECT_EQ(value % 64, 0) << tensor.name() << " at offset " << entry.value();
      } else if (entry.key() == "length") {
        external_bytes += value;
      }
    }
  }
  EXPECT_GT(external_tensors, 10);

  auto session = Session::load((*model_dir / "model.onnx").string());
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  EXPECT_GE((*session)->stats().initializer_bytes_mapped, external_bytes);
}

// Weights written as a safetensors checkpoint (Phi-3's fused layout) and read back build the very
// same model file: the checkpoint reader, name mapping and fused-tensor split lose nothing.
TEST(ModelParityBuilder, SafetensorsCheckpointRebuildsTheSameModel) {
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const std::vector<std::string> common = {"--preset", "phi3", "--weights", "int4", "--block-size", "32"};
  const std::string checkpoint = (scratch.path() / "weights.safetensors").string();
  ParityFixture seeded{"seeded", args({common, {"--seed", "7", "--save-checkpoint", checkpoint}}), kBatch1, 0, ""};
  ParityFixture loaded{"loaded", args({common, {"--checkpoint", checkpoint}}), kBatch1, 0, ""};
  auto seeded_dir = testing::build_fixture_model(seeded, scratch.path());
  ASSERT_TRUE(seeded_dir.is_ok()) << seeded_dir.status().message();
  auto loaded_dir = testing::build_fixture_model(loaded, scratch.path());
  ASSERT_TRUE(loaded_dir.is_ok()) << loaded_dir.status().message();
  auto seeded_bytes = testing::read_text_file(*seeded_dir / "model.onnx");
  auto loaded_bytes = testing::read_text_file(*loaded_dir / "model.onnx");
  ASSERT_TRUE(seeded_bytes.is_ok() && loaded_bytes.is_ok());
  EXPECT_GT(seeded_bytes->size(), 100000u);
  EXPECT_TRUE(*seeded_bytes == *loaded_bytes);
}

// Inconsistent configs and options are refused before anything is written, with the reason.
TEST(ModelParityBuilder, RejectsInconsistentConfigsWithTheReason) {
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--preset", "llama", "--set", "num_key_value_heads=3"},
       "num_attention_heads 4 is not a multiple of num_key_value_heads 3"},
      {{"--preset", "llama", "--set", "head_dim=33"}, "head_dim must be even"},
      {{"--preset", "llama", "--set", "no_such_key=1"}, "unknown config key 'no_such_key'"},
      {{"--preset", "llama", "--quantize-embeddings"}, "quantized embeddings need int4 or int8 weights"},
      {{"--preset", "llama", "--style", "standard", "--weights", "int4"}, "genai-style options"},
      {{"--preset", "llama", "--weights", "int4", "--block-size", "24"}, "block size must be a power of two >= 16"},
      {{"--preset", "mixtral", "--style", "standard"}, "mixture-of-experts models are written in the genai style only"},
      {{"--preset", "llama", "--moe-weights", "mxfp4"}, "--moe-weights needs a mixture-of-experts config"},
  };
  for (const auto& [arguments, reason] : cases) {
    const ParityFixture fixture{"rejected", arguments, kBatch1, 0, ""};
    auto run = testing::run_command(testing::builder_command(fixture, scratch.path() / "out"), scratch.path());
    ASSERT_TRUE(run.is_ok()) << run.status().message();
    EXPECT_EQ(run->exit_code, 2) << reason;
    EXPECT_NE(run->err.find(reason), std::string::npos) << "stderr: " << run->err;
    EXPECT_FALSE(std::filesystem::exists(scratch.path() / "out" / "model.onnx")) << reason;
  }
}

}  // namespace
}  // namespace onnx_genai
