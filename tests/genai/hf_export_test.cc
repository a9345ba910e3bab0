// Files no one here wrote: Hugging Face modelling code (Llama, Qwen2, Qwen3, Mistral, Phi-3,
// Gemma 2/3, Granite, OLMo 2, GPT-2), randomly initialised from tiny configs and exported by
// torch.onnx (the current dynamo exporter and the TorchScript one), in float32, float16 and
// int4 (ONNX Runtime's own MatMulNBitsQuantizer) — tests/fixtures/hf_exports, made on the GPU
// machine by tools/hf_export/export_fixtures.py, which also stored transformers' own greedy
// decode of each prompt (reference.json, reference_logits.bin).
//
// Each fixture is checked three ways:
//  - logits: ONNX Runtime decodes the prompts as one left-padded batch (tests/oracle/ort_decode.mjs,
//    run here, live); our Session replays its feeds with its own KV cache; every real position's
//    logits must match ORT's (tolerances as in tests/runtime/model_parity_test.cc: float32 and
//    int4 at accuracy level 0 compute in fp32 on both sides, 1e-4 + 1e-4·|ort|; float16
//    2e-2 + 1e-2·|ort|; int4 at accuracy level 4 rounds activations to int8 per block on both
//    sides, and a value the two engines round to neighbouring codes moves a dot product by
//    scale·|w| (docs/differential.md bounds it per op), so the float16 tolerance; measured
//    1.7e-2 at most, on Gemma 3's scaled embeddings);
//  - transformers: our last-position logits at each step against transformers' float32 decode of
//    the prompt alone (so padding and batching must not change a row), while ORT's picks still
//    follow transformers' — float32 exports within 1e-4 + 1e-4·|ref|; float16 and int4 files
//    differ from the float32 model by their rounding, so there only the worst difference is
//    printed;
//  - the package: Model::load on the folder (config.json, generation_config.json as exported),
//    greedy generation of the whole batch through the Generator: its tokens equal ONNX Runtime's
//    on every fixture and transformers' on the float32 ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "genai_test_util.h"
#include "onnx_genai/genai.h"
#include "onnx_genai/session.h"

#include "gpu_skip.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::DecodeTrace;
using testing::ParityFixture;

struct Tolerance {
  float abs = 0, rel = 0;
};

struct HfFixture {
  std::string name;  // folder under tests/fixtures/hf_exports
  fs::path dir;
};

void PrintTo(const HfFixture& f, std::ostream* os) { *os << f.name; }

std::vector<HfFixture> hf_fixtures() {
  std::vector<HfFixture> out;
  const fs::path root = fs::path(testing::source_dir()) / "tests/fixtures/hf_exports";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (fs::is_regular_file(entry.path() / "reference.json")) out.push_back({entry.path().filename().string(), entry.path()});
  }
  std::sort(out.begin(), out.end(), [](const HfFixture& a, const HfFixture& b) { return a.name < b.name; });
  return out;
}

// What export_fixtures.py stored: the prompts and transformers' float32 greedy decode of each.
struct Reference {
  std::string variant;
  std::vector<std::vector<int64_t>> prompts;
  int steps = 0;
  int64_t vocab = 0;
  std::vector<std::vector<int32_t>> tokens;  // [prompt][steps + 1]
  std::vector<float> logits;                 // [prompt][steps + 1][vocab]

  const float* row(size_t prompt, size_t step) const {
    return logits.data() + (prompt * static_cast<size_t>(steps + 1) + step) * static_cast<size_t>(vocab);
  }
  bool f16() const { return variant.find("f16") != std::string::npos; }
  bool int4() const { return variant.rfind("int4", 0) == 0; }
  bool float32() const { return !f16() && !int4(); }
};

Result<Reference> read_reference(const fs::path& dir) {
  std::ifstream in(dir / "reference.json");
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded()) return OG_ERROR((dir / "reference.json").string(), ": not JSON");
  Reference r;
  r.variant = json.at("variant").get<std::string>();
  r.prompts = json.at("prompts").get<std::vector<std::vector<int64_t>>>();
  r.steps = json.at("steps").get<int>();
  r.vocab = json.at("vocab").get<int64_t>();
  r.tokens = json.at("transformers_tokens").get<std::vector<std::vector<int32_t>>>();
  r.logits.resize(r.prompts.size() * static_cast<size_t>(r.steps + 1) * static_cast<size_t>(r.vocab));
  std::ifstream logits(dir / json.at("logits_file").get<std::string>(), std::ios::binary);
  logits.read(reinterpret_cast<char*>(r.logits.data()), static_cast<std::streamsize>(r.logits.size() * sizeof(float)));
  if (!logits || logits.peek() != EOF) return OG_ERROR((dir / "reference_logits.bin").string(), ": wrong size");
  return r;
}

Tolerance ort_tolerance(const Reference& r) {
  if (r.f16() || (r.int4() && r.variant.find("acc4") != std::string::npos)) return {2e-2f, 1e-2f};
  return {1e-4f, 1e-4f};
}

class HfExport : public ::testing::TestWithParam<HfFixture> {
 protected:
  void SetUp() override {
    auto reference = read_reference(GetParam().dir);
    ASSERT_TRUE(reference.is_ok()) << reference.status().message();
    reference_ = std::move(*reference);
    ASSERT_TRUE(scratch_.valid());
    const ParityFixture fixture{GetParam().name, {}, reference_.prompts, reference_.steps, ""};
    auto ort = testing::run_ort_decode(GetParam().dir, fixture, scratch_.path());
    ASSERT_TRUE(ort.is_ok()) << ort.status().message();
    ort_ = std::move(*ort);
  }

  // ORT's greedy picks of prompt `b`, in order.
  std::vector<int32_t> ort_tokens(size_t b) const {
    const Tensor& g = ort_.generated;
    std::vector<int32_t> row;
    for (int64_t k = 0; k < g.shape()[1]; ++k) row.push_back(static_cast<int32_t>(g.data<int64_t>()[static_cast<int64_t>(b) * g.shape()[1] + k]));
    return row;
  }

  Reference reference_;
  DecodeTrace ort_;
  testing::ScopedTempDir scratch_;
};

TEST_P(HfExport, LogitsMatchOnnxRuntimeAndTransformers) {
  SessionOptions options;
  options.num_threads = 2;
  auto session = Session::load((GetParam().dir / "model.onnx").string(), options);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto ours = testing::decode_with_session(**session, ort_);
  ASSERT_TRUE(ours.is_ok()) << ours.status().message();

  const Tolerance tol = ort_tolerance(reference_);
  auto vs_ort = testing::compare_steps(*ours, ort_, tol.abs, tol.rel);
  ASSERT_TRUE(vs_ort.is_ok()) << vs_ort.status().message();
  EXPECT_GT(vs_ort->rows_compared, 0);
  EXPECT_EQ(vs_ort->out_of_tolerance, 0) << "first at " << vs_ort->first_failure << "; max abs diff " << vs_ort->max_abs_diff;
  EXPECT_EQ(vs_ort->argmax_mismatches, 0);

  // Each row's last position at every step, while ORT's picks are still transformers' (after a
  // divergence the two decode different sequences).
  testing::LogitComparison vs_hf;
  for (size_t b = 0; b < reference_.prompts.size(); ++b) {
    const std::vector<int32_t> picks = ort_tokens(b);
    for (size_t step = 0; step < ort_.steps.size(); ++step) {
      const std::vector<float> got = testing::to_floats((*ours)[step]);
      const int64_t seq = (*ours)[step].shape()[1];
      const size_t offset = (b * static_cast<size_t>(seq) + static_cast<size_t>(seq - 1)) * static_cast<size_t>(reference_.vocab);
      testing::compare_row(got.data() + offset, reference_.row(b, step), reference_.vocab, 1e-4f, 1e-4f,
                           "prompt " + std::to_string(b) + " step " + std::to_string(step), vs_hf);
      if (picks[step] != reference_.tokens[b][step]) break;
    }
  }
  if (reference_.float32()) {
    EXPECT_EQ(vs_hf.out_of_tolerance, 0) << "first at " << vs_hf.first_failure << "; max abs diff " << vs_hf.max_abs_diff;
    EXPECT_EQ(vs_hf.argmax_mismatches, 0);
  }
  std::printf("[ hf export] %s: max |ours - ort| = %.3g over %lld positions; max |ours - transformers f32| = %.3g\n",
              GetParam().name.c_str(), vs_ort->max_abs_diff, static_cast<long long>(vs_ort->rows_compared),
              vs_hf.max_abs_diff);
}

TEST_P(HfExport, PackageGeneratesOnnxRuntimesTokens) {
  genai::ModelOptions options;
  options.num_threads = 2;
  auto model = genai::Model::load(GetParam().dir.string(), options);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  // Every fixture's config has 2 layers and 128 positions, GPT-2's under n_layer / n_positions.
  EXPECT_EQ((*model)->info().num_layers, 2);
  EXPECT_EQ((*model)->info().context_length, 128);
  auto tokens = testing::generate_greedy(**model, testing::to_int32(reference_.prompts), reference_.steps + 1);
  ASSERT_TRUE(tokens.is_ok()) << tokens.status().message();
  int agree_with_hf = 0;
  for (size_t b = 0; b < reference_.prompts.size(); ++b) {
    EXPECT_EQ((*tokens)[b], ort_tokens(b)) << "prompt " << b;
    if (reference_.float32()) {
      EXPECT_EQ((*tokens)[b], reference_.tokens[b]) << "prompt " << b << " vs transformers";
    }
    for (size_t k = 0; k < reference_.tokens[b].size() && (*tokens)[b][k] == reference_.tokens[b][k]; ++k) ++agree_with_hf;
  }
  std::printf("[ hf export] %s: greedy tokens equal ORT's; first %d of %zu equal transformers' f32\n",
              GetParam().name.c_str(), agree_with_hf, reference_.prompts.size() * static_cast<size_t>(reference_.steps + 1));
}

// The same files on the GPU (every node with a CUDA kernel runs there, CUDA graphs on): greedy
// tokens equal transformers' on the float32 files and our CPU's on the others (whose rounding on
// the two devices differs only below the tolerances above; the CPU's equal ORT's, HfExport). Needs
// no ONNX Runtime, so scripts/gpu-check runs it; without a usable GPU it skips with the reason.
class HfExportCuda : public ::testing::TestWithParam<HfFixture> {};

TEST_P(HfExportCuda, GreedyTokensMatchTheCpu) {
  OG_SKIP_WITHOUT_GPU();
  auto reference = read_reference(GetParam().dir);
  ASSERT_TRUE(reference.is_ok()) << reference.status().message();
  const auto prompts = testing::to_int32(reference->prompts);
  std::vector<std::vector<int32_t>> tokens[2];
  for (const bool gpu : {false, true}) {
    genai::ModelOptions options;
    options.num_threads = 2;
    if (gpu) options.device = Device{DeviceType::kCuda, 0};
    auto model = genai::Model::load(GetParam().dir.string(), options);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    auto generated = testing::generate_greedy(**model, prompts, reference->steps + 1);
    ASSERT_TRUE(generated.is_ok()) << generated.status().message();
    tokens[gpu] = std::move(*generated);
  }
  EXPECT_EQ(tokens[1], tokens[0]);
  if (reference->float32()) {
    EXPECT_EQ(tokens[1], reference->tokens);
  }
}

std::string fixture_name(const ::testing::TestParamInfo<HfFixture>& info) {
  std::string name = info.param.name;
  std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return name;
}

// The fixtures are committed files: an empty or missing folder is a broken checkout, not a pass.
TEST(HfExportFixtures, ArePresent) { EXPECT_GE(hf_fixtures().size(), 20u); }

INSTANTIATE_TEST_SUITE_P(Fixtures, HfExport, ::testing::ValuesIn(hf_fixtures()), fixture_name);
INSTANTIATE_TEST_SUITE_P(Fixtures, HfExportCuda, ::testing::ValuesIn(hf_fixtures()), fixture_name);

}  // namespace
}  // namespace onnx_genai
