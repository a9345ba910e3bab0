// Perplexity (genai::evaluate_perplexity and `onnx-genai eval-ppl`) against the same sliding-window
// loop driven through ONNX Runtime (tests/oracle/ort_ppl.mjs, written out from Hugging Face's
// perplexity guide, log-softmax in double), on models tools/build_model.py writes at test time in
// both graph styles: genai (GroupQueryAttention; fp32 and int4 MatMulNBits; rotary inside attention
// or from position_ids with a sliding window) and standard (opset-17 Concat caches). Each fixture
// runs with the LM head computing every position and with it computing only the scored rows
// (ModelOptions::select_logit_rows).
//
// Tolerances, relative on the total NLL and on ppl: fp32 1e-4, int4 1e-3. Per-logit differences
// against ONNX Runtime are ~1e-5 (tests/runtime/model_parity_test.cc) and NLL sums hundreds of
// O(7) terms, so a wrong window, position or scored token moves it far more than that.
//
// Protocol arithmetic is checked apart from ONNX Runtime too: the window plan on the guide's
// example, scored-token counts from the protocol's formulas (a text shorter than the window, one
// of exactly k windows, stride == window), and stride == window as the sum of its chunks scored
// alone. Bad input exits 2 with one line naming the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "genai/perplexity.h"
#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::ParityFixture;
using testing::shell_quote;

constexpr double kF32Tolerance = 1e-4;
constexpr double kInt4Tolerance = 1e-3;
constexpr int kVocab = 1000;  // the presets' vocabulary
constexpr int kContext = 256;  // the presets' max_position_embeddings

// Token ids spread over the vocabulary (an LCG, fixed), special ids 0..2 avoided.
std::vector<int32_t> pseudo_random_tokens(size_t count, uint32_t seed) {
  std::vector<int32_t> ids(count);
  uint32_t state = seed;
  for (int32_t& id : ids) {
    state = state * 1664525u + 1013904223u;
    id = 3 + static_cast<int32_t>((state >> 8) % (kVocab - 3));
  }
  return ids;
}

struct Perplexity {
  int64_t scored = 0, runs = 0;
  double nll = 0, ppl = 0;
};

// ONNX Runtime's result for `tokens` (tests/oracle/ort_ppl.mjs).
Result<Perplexity> ort_perplexity(const fs::path& model_dir, std::span<const int32_t> tokens, int64_t window,
                                  int64_t stride, const fs::path& scratch) {
  const fs::path file = scratch / "ort_tokens.json";
  std::ofstream(file) << nlohmann::json(std::vector<int32_t>(tokens.begin(), tokens.end())).dump();
  const std::string command = "node " + shell_quote(testing::source_dir() + "/tests/oracle/ort_ppl.mjs") + " " +
                              shell_quote(model_dir.string()) + " --tokens-file " + shell_quote(file.string()) +
                              " --window " + std::to_string(window) + " --stride " + std::to_string(stride);
  OG_ASSIGN_OR_RETURN(testing::CommandResult run, testing::run_command(command, scratch));
  if (run.exit_code != 0) return OG_ERROR("ort_ppl.mjs failed (exit ", run.exit_code, "): ", run.err);
  const nlohmann::json j = nlohmann::json::parse(run.out, nullptr, false);
  if (!j.is_object() || !j.contains("nll")) return OG_ERROR("ort_ppl.mjs printed '", run.out, "'");
  return Perplexity{j["scored"].get<int64_t>(), j["runs"].get<int64_t>(), j["nll"].get<double>(),
                    j["ppl"].get<double>()};
}

double relative(double ours, double reference) { return std::abs(ours - reference) / std::abs(reference); }

std::unique_ptr<genai::Model> load_model(const fs::path& dir, bool select_logit_rows = true) {
  genai::ModelOptions options;
  options.num_threads = 2;
  options.select_logit_rows = select_logit_rows;
  auto model = genai::Model::load(dir.string(), options);
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  return model.is_ok() ? std::move(*model) : nullptr;
}

genai::PerplexityResult evaluate(const genai::Model& model, std::span<const int32_t> tokens, int64_t window,
                                 int64_t stride) {
  auto result = genai::evaluate_perplexity(model, tokens, {window, stride});
  EXPECT_TRUE(result.is_ok()) << result.status().message();
  return result.is_ok() ? *result : genai::PerplexityResult{};
}

TEST(PerplexityWindows, FollowTheSlidingWindowProtocol) {
  // The guide's picture: 10 tokens, window 6, stride 3 -> [0, 6) scores 1..5, [3, 9) scores 6..8,
  // [6, 10) scores 9.
  const std::vector<genai::ScoredWindow> windows = genai::plan_windows(10, 6, 3);
  ASSERT_EQ(windows.size(), 3u);
  const int64_t expected[3][3] = {{0, 6, 1}, {3, 9, 6}, {6, 10, 9}};
  for (size_t i = 0; i < windows.size(); ++i) {
    EXPECT_EQ(windows[i].begin, expected[i][0]) << i;
    EXPECT_EQ(windows[i].end, expected[i][1]) << i;
    EXPECT_EQ(windows[i].first_target, expected[i][2]) << i;
  }
  // stride == window: chunks, each scoring all but its first token; a last chunk of one token
  // would score nothing and is left out.
  const std::vector<genai::ScoredWindow> chunks = genai::plan_windows(9, 4, 4);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].begin, 4);
  EXPECT_EQ(chunks[1].end, 8);
  EXPECT_EQ(chunks[1].first_target, 5);
}

struct PplCase {
  ParityFixture fixture;
  double tolerance = kF32Tolerance;
};

void PrintTo(const PplCase& c, std::ostream* os) { *os << c.fixture.name; }

std::vector<PplCase> ppl_cases() {
  return {
      {{"genai_llama_fp32", {"--preset", "llama", "--style", "genai"}, {}, 0, ""}},
      {{"genai_llama_int4", {"--preset", "llama", "--style", "genai", "--weights", "int4", "--block-size", "32"}, {}, 0,
        ""},
       kInt4Tolerance},
      {{"genai_mistral_position_ids_fp32", {"--preset", "mistral", "--style", "genai", "--position-ids"}, {}, 0, ""}},
      {{"standard_llama_fp32", {"--preset", "llama", "--style", "standard"}, {}, 0, ""}},
      {{"standard_qwen3_fp32", {"--preset", "qwen3", "--style", "standard"}, {}, 0, ""}},
  };
}

class PerplexityVsOrt : public ::testing::TestWithParam<PplCase> {};

TEST_P(PerplexityVsOrt, MatchesOnnxRuntime) {
  const PplCase& param = GetParam();
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const fs::path dir = testing::build_model_or_fail(param.fixture, scratch.path());
  ASSERT_FALSE(dir.empty());
  const std::vector<int32_t> tokens = pseudo_random_tokens(700, 7);
  // 700 tokens, window 256, stride 128: windows at 0, 128, 256, 384, 512 (the last ends at 700).
  auto ort = ort_perplexity(dir, tokens, 256, 128, scratch.path());
  ASSERT_TRUE(ort.is_ok()) << ort.status().message();
  EXPECT_EQ(ort->scored, 699);
  for (const bool select_rows : {true, false}) {
    const auto model = load_model(dir, select_rows);
    ASSERT_NE(model, nullptr);
    const genai::PerplexityResult ours = evaluate(*model, tokens, 256, 128);
    EXPECT_EQ(ours.tokens, 700);
    EXPECT_EQ(ours.scored, ort->scored);
    EXPECT_EQ(ours.decoder_runs, ort->runs);
    EXPECT_LE(relative(ours.nll, ort->nll), param.tolerance) << ours.nll << " vs " << ort->nll;
    EXPECT_LE(relative(ours.ppl, ort->ppl), param.tolerance) << ours.ppl << " vs " << ort->ppl;
    std::printf("[ ppl      ] %s%s: ours %.9g, ORT %.9g, NLL relative difference %.3g, ppl %.3g (%.3f s)\n",
                param.fixture.name.c_str(), select_rows ? " (scored rows only)" : "", ours.ppl, ort->ppl,
                relative(ours.nll, ort->nll), relative(ours.ppl, ort->ppl), ours.seconds);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PerplexityVsOrt, ::testing::ValuesIn(ppl_cases()),
                         [](const ::testing::TestParamInfo<PplCase>& info) { return info.param.fixture.name; });

class PerplexityProtocol : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new testing::ScopedTempDir();
    dir_ = testing::build_model_or_fail({"ppl_qwen2", {"--preset", "qwen2", "--style", "genai"}, {}, 0, ""},
                                        scratch_->path());
  }
  static void TearDownTestSuite() { delete scratch_; }

  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    model_ = load_model(dir_);
    ASSERT_NE(model_, nullptr);
  }

  // Ours for `tokens`, with scored count and NLL checked against ONNX Runtime's.
  genai::PerplexityResult evaluate_vs_ort(std::span<const int32_t> tokens, int64_t window, int64_t stride) {
    const genai::PerplexityResult ours = evaluate(*model_, tokens, window, stride);
    auto ort = ort_perplexity(dir_, tokens, window, stride, scratch_->path());
    EXPECT_TRUE(ort.is_ok()) << ort.status().message();
    if (ort.is_ok()) {
      EXPECT_EQ(ours.scored, ort->scored);
      EXPECT_LE(relative(ours.nll, ort->nll), kF32Tolerance) << ours.nll << " vs " << ort->nll;
    }
    EXPECT_NEAR(ours.ppl, std::exp(ours.nll / static_cast<double>(ours.scored)), 1e-9 * ours.ppl);
    return ours;
  }

  static testing::ScopedTempDir* scratch_;
  static fs::path dir_;
  std::unique_ptr<genai::Model> model_;
};

testing::ScopedTempDir* PerplexityProtocol::scratch_ = nullptr;
fs::path PerplexityProtocol::dir_;

TEST_F(PerplexityProtocol, TextShorterThanTheWindowIsOneRun) {
  const std::vector<int32_t> tokens = pseudo_random_tokens(100, 11);
  const genai::PerplexityResult r = evaluate_vs_ort(tokens, 256, 128);
  EXPECT_EQ(r.decoder_runs, 1);
  EXPECT_EQ(r.scored, 99);  // every token but the first
  // The same single run whatever the window beyond the text.
  const genai::PerplexityResult exact = evaluate(*model_, tokens, 100, 50);
  EXPECT_EQ(exact.decoder_runs, 1);
  EXPECT_EQ(exact.nll, r.nll);
}

TEST_F(PerplexityProtocol, ExactlyKWindows) {
  // window 64, stride 32: k windows cover 64 + (k - 1) * 32 tokens.
  for (const int k : {1, 2, 4}) {
    const std::vector<int32_t> tokens = pseudo_random_tokens(static_cast<size_t>(64 + (k - 1) * 32), 13);
    const genai::PerplexityResult r = evaluate_vs_ort(tokens, 64, 32);
    EXPECT_EQ(r.decoder_runs, k);
    EXPECT_EQ(r.scored, static_cast<int64_t>(tokens.size()) - 1);
  }
  // One token more takes one more window.
  const genai::PerplexityResult more = evaluate_vs_ort(pseudo_random_tokens(161, 13), 64, 32);
  EXPECT_EQ(more.decoder_runs, 5);
  EXPECT_EQ(more.scored, 160);
}

TEST_F(PerplexityProtocol, StrideEqualToWindowScoresChunksAlone) {
  // 200 tokens in chunks of 64: [0, 64) [64, 128) [128, 192) [192, 200), each scoring all but its
  // first token.
  const std::vector<int32_t> tokens = pseudo_random_tokens(200, 17);
  const genai::PerplexityResult r = evaluate_vs_ort(tokens, 64, 64);
  EXPECT_EQ(r.decoder_runs, 4);
  EXPECT_EQ(r.scored, 200 - 4);
  double chunks_nll = 0;
  for (size_t begin = 0; begin < tokens.size(); begin += 64) {
    const auto chunk = std::span(tokens).subspan(begin, std::min<size_t>(64, tokens.size() - begin));
    chunks_nll += evaluate(*model_, chunk, 64, 64).nll;
  }
  EXPECT_NEAR(r.nll, chunks_nll, 1e-9 * r.nll);
  // 193 tokens: the last chunk is one token, which nothing in it can predict.
  const genai::PerplexityResult short_tail = evaluate_vs_ort(pseudo_random_tokens(193, 17), 64, 64);
  EXPECT_EQ(short_tail.decoder_runs, 3);
  EXPECT_EQ(short_tail.scored, 193 - 4);
}

TEST_F(PerplexityProtocol, DefaultsAreTheContextCappedAt512AndHalfAWindow) {
  const std::vector<int32_t> tokens = pseudo_random_tokens(300, 19);
  auto r = genai::evaluate_perplexity(*model_, tokens);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->window, kContext);
  EXPECT_EQ(r->stride, kContext / 2);
  EXPECT_EQ(r->decoder_runs, 2);
}

TEST_F(PerplexityProtocol, RejectsBadOptionsAndTokens) {
  const std::vector<int32_t> tokens = pseudo_random_tokens(50, 23);
  const auto expect_error = [&](std::span<const int32_t> ids, genai::PerplexityOptions options,
                                const std::string& needle) {
    auto r = genai::evaluate_perplexity(*model_, ids, options);
    ASSERT_FALSE(r.is_ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error(tokens, {kContext + 1, 0}, "exceeds the model's context length 256");
  expect_error(tokens, {64, 65}, "stride must be in [1, window 64], got 65");
  expect_error(tokens, {64, -1}, "got -1");
  expect_error(tokens, {1, 1}, "at least 2 tokens, got 1");
  expect_error(std::span(tokens).first(1), {}, "needs at least 2 tokens");
  std::vector<int32_t> outside = tokens;
  outside[7] = kVocab;
  expect_error(outside, {}, "token 7 is 1000, outside the vocabulary [0, 1000)");
}

// Rewrites DIR/model.onnx so that its logits keep only the last position (a Slice after the LM
// head), declaring that output [batch, 1, vocab] or, with "symbolic", [batch, sequence, vocab].
constexpr const char* kLastPositionScript = R"(import sys, onnx
from onnx import helper, TensorProto
path, declared = sys.argv[1] + '/model.onnx', sys.argv[2]
model = onnx.load(path)
graph = model.graph
out = next(o for o in graph.output if o.name == 'logits')
for node in graph.node:
    node.output[:] = ['logits_all' if name == 'logits' else name for name in node.output]
graph.initializer.extend([helper.make_tensor(n, TensorProto.INT64, [1], [v])
                          for n, v in (('last_start', -1), ('last_end', 2**62), ('last_axis', 1))])
graph.node.append(helper.make_node('Slice', ['logits_all', 'last_start', 'last_end', 'last_axis'], ['logits']))
dims = out.type.tensor_type.shape.dim
dims[1].Clear()
if declared == 'fixed':
    dims[1].dim_value = 1
else:
    dims[1].dim_param = 'sequence_length'
onnx.save(model, path)
)";

class EvalPplCli : public ::testing::Test {
 protected:
  static constexpr int kCliVocab = 300;

  static void SetUpTestSuite() {
    scratch_ = new testing::ScopedTempDir();
    dir_ = testing::build_model_with_test_tokenizer(
        {"ppl_cli_llama", {"--preset", "llama", "--style", "genai", "--set", "vocab_size=300"}, {}, 0, ""}, scratch_->path(), kCliVocab);
  }
  static void TearDownTestSuite() { delete scratch_; }

  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(local_.valid());
  }

  testing::CommandResult cli(const std::string& args) { return testing::run_cli(args, "", local_.path()); }

  fs::path write_text(const std::string& name, const std::string& text) {
    const fs::path file = local_.path() / name;
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

  // A copy of the fixture whose logits keep only the last position.
  fs::path last_position_model(const std::string& declared) {
    const fs::path copy = local_.path() / ("last_" + declared);
    fs::copy(dir_, copy, fs::copy_options::recursive);
    std::ofstream(local_.path() / "last.py") << kLastPositionScript;
    auto r = testing::run_command("/usr/bin/python3 " + shell_quote((local_.path() / "last.py").string()) + " " +
                                      shell_quote(copy.string()) + " " + declared,
                                  local_.path());
    EXPECT_TRUE(r.is_ok() && r->exit_code == 0) << (r.is_ok() ? r->err : r.status().message());
    return copy;
  }

  static testing::ScopedTempDir* scratch_;
  static fs::path dir_;
  testing::ScopedTempDir local_;
};

testing::ScopedTempDir* EvalPplCli::scratch_ = nullptr;
fs::path EvalPplCli::dir_;

// Sentences over a small word list (fixed), about `bytes` long.
std::string sample_text(size_t bytes) {
  static const char* const kWords[] = {"the", "river", "sings", "to", "a",    "quiet", "stone", "while",
                                       "light", "falls", "on", "old", "trees", "and",  "wind",  "runs"};
  std::string text;
  uint32_t state = 5;
  for (size_t word = 0; text.size() < bytes; ++word) {
    state = state * 1664525u + 1013904223u;
    text += kWords[(state >> 8) % std::size(kWords)];
    text += word % 11 == 10 ? ". " : " ";
  }
  return text;
}

TEST_F(EvalPplCli, JsonMatchesOnnxRuntimeOnTheTokenizedText) {
  const std::string text = sample_text(3000);
  const fs::path file = write_text("text.txt", text);
  const auto model = load_model(dir_);
  ASSERT_NE(model, nullptr);
  EncodeOptions no_special;
  no_special.add_special_tokens = false;
  auto tokens = model->tokenizer()->encode(text, no_special);
  ASSERT_TRUE(tokens.is_ok()) << tokens.status().message();
  auto ort = ort_perplexity(dir_, *tokens, 128, 64, local_.path());
  ASSERT_TRUE(ort.is_ok()) << ort.status().message();

  const testing::CommandResult r =
      cli("eval-ppl " + shell_quote(dir_.string()) + " --text " + shell_quote(file.string()) +
          " --window 128 --stride=64 --threads 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["tokens"].get<int64_t>(), static_cast<int64_t>(tokens->size()));
  EXPECT_EQ(j["scored"].get<int64_t>(), ort->scored);
  EXPECT_EQ(j["window"].get<int64_t>(), 128);
  EXPECT_EQ(j["stride"].get<int64_t>(), 64);
  EXPECT_LE(relative(j["nll"].get<double>(), ort->nll), kF32Tolerance);
  EXPECT_LE(relative(j["ppl"].get<double>(), ort->ppl), kF32Tolerance);
  EXPECT_GT(j["seconds"].get<double>(), 0);
  std::printf("[ eval-ppl ] %zu tokens: ours %.9g, ORT %.9g\n", tokens->size(), j["ppl"].get<double>(), ort->ppl);
}

TEST_F(EvalPplCli, TableUsesTheDefaultWindow) {
  const fs::path file = write_text("text.txt", sample_text(1500));
  const testing::CommandResult r =
      cli("eval-ppl " + shell_quote(dir_.string()) + " --text " + shell_quote(file.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"tokens ", "scored ", "nll ", "ppl ", "seconds "}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " in " << r.out;
  }
  EXPECT_NE(r.out.find("window 256, stride 128"), std::string::npos) << r.out;
}

TEST_F(EvalPplCli, BadInputExitsTwoWithOneLine) {
  const std::string model = shell_quote(dir_.string());
  const std::string text = shell_quote(write_text("ok.txt", sample_text(400)).string());
  const auto expect_bad_input = [&](const std::string& args, const std::string& needle) {
    testing::expect_bad_input_result(cli(args), args, needle);
  };
  expect_bad_input("eval-ppl " + model, "needs --text FILE");
  expect_bad_input("eval-ppl " + model + " --text " + shell_quote((local_.path() / "missing.txt").string()),
                   "cannot open '" + (local_.path() / "missing.txt").string() + "'");
  const std::string empty = write_text("empty.txt", "").string();
  expect_bad_input("eval-ppl " + model + " --text " + shell_quote(empty), "needs at least 2 tokens");
  expect_bad_input("eval-ppl " + model + " --text " + shell_quote(write_text("one.txt", "a").string()),
                   "needs at least 2 tokens (one to predict from, one to score), got 1");
  const std::string broken = write_text("broken.txt", "river\xff stone").string();
  expect_bad_input("eval-ppl " + model + " --text " + shell_quote(broken), broken + ": ");
  expect_bad_input("eval-ppl " + model + " --text " + shell_quote(broken), "not valid UTF-8 (byte offset 5)");
  expect_bad_input("eval-ppl " + model + " --text " + text + " --window 512", "exceeds the model's context length 256");
  expect_bad_input("eval-ppl " + model + " --text " + text + " --stride 0", "--stride wants an integer in [1, ");
  expect_bad_input("eval-ppl " + model + " --text " + text + " --window 64 --stride 65",
                   "stride must be in [1, window 64], got 65");
  expect_bad_input("eval-ppl " + model + " --text " + text + " --window 1", "--window wants an integer in [2, ");
  expect_bad_input("eval-ppl " + model + " --text " + text + " --bogus", "unknown option '--bogus'");
  expect_bad_input("eval-ppl " + model + " --text " + text + " --json=1", "--json takes no value");
  expect_bad_input("eval-ppl " + shell_quote(last_position_model("fixed").string()) + " --text " + text,
                   "decoder output 'logits' is declared [batch_size, 1, 300]: it keeps only the last position");
}

TEST_F(EvalPplCli, LogitsOfTheLastPositionOnlyCannotBeScored) {
  // Declared with a symbolic sequence: found when the first window runs.
  const auto model = load_model(last_position_model("symbolic"));
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> tokens = {5, 6, 7, 8};
  auto r = genai::evaluate_perplexity(*model, tokens);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("decoder output 'logits' is [1,1,300]: it keeps only the last position"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace onnx_genai
