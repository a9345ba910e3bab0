// Quality gates of the shipped default model, models/debian-prose-11m (issue 6), against real
// references:
//   PerplexityMatchesPyTorch       our ppl of its fp16 variant on valid.txt (window 512, stride
//                                  256) within 1% of tools/train/eval_ppl.py (PyTorch, float32) on
//                                  the same token ids
//   Int4WithinFivePercentOfFp16    the shipped int4 package's ppl within 5% of the fp16 variant's
//   GreedyLockAgainstOnnxRuntime   64 plain-argmax tokens for a ragged batch of 3 prompts equal
//                                  ONNX Runtime's loop (tests/oracle/ort_decode.mjs)
//   TokenizerMatchesTransformersJs tokenizer.json against @huggingface/transformers
//                                  (tests/oracle/tokenizer_texts.mjs) on every line of valid.txt,
//                                  the whole file and a few tricky strings
//   CliDefaultsToTheShippedModel   `onnx-genai generate` without a model argument uses it: its
//                                  continuation of "And God said" is King James English
//
// The fp16 variant is built from the shipped checkpoint by tools/train/export_default.sh into the
// build tree, next to this test binary, and rebuilt only when the checkpoint, the tokenizer or the
// export scripts are newer than it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <future>
#include <optional>

#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::shell_quote;

const fs::path kPackage = fs::path(testing::source_dir()) / "models" / "debian-prose-11m";
constexpr int64_t kWindow = 512, kStride = 256;
constexpr int kLockedTokens = 64;

fs::file_time_type newest_file_time(const std::vector<fs::path>& paths) {
  fs::file_time_type newest = fs::file_time_type::min();
  std::error_code ec;
  for (const fs::path& path : paths) {
    if (!fs::is_directory(path, ec)) {
      newest = std::max(newest, fs::last_write_time(path, ec));
      continue;
    }
    for (const auto& entry : fs::directory_iterator(path, ec)) newest = std::max(newest, entry.last_write_time(ec));
  }
  return newest;
}

// Builds (or finds up to date) the fp16 variant in the build tree. A rebuild goes to a folder of
// its own, renamed into place, so test processes running at once (ctest -j) never load half a
// package.
Result<fs::path> fp16_variant() {
  std::error_code ec;
  const fs::path binary_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec) return OG_ERROR("cannot find the test binary's folder: ", ec.message());
  const fs::path target = binary_dir / "default_model_fp16";
  const fs::path script = fs::path(testing::source_dir()) / "tools" / "train" / "export_default.sh";
  const fs::file_time_type sources =
      newest_file_time({kPackage / "checkpoint", kPackage / "tokenizer.json", kPackage / "tokenizer_config.json",
                        script, fs::path(testing::source_dir()) / "tools" / "build_model.py"});
  const auto up_to_date = [&] {
    std::error_code ignored;
    return fs::exists(target / "model.onnx", ignored) && fs::last_write_time(target / "model.onnx", ignored) >= sources;
  };
  if (up_to_date()) return target;

  const fs::path staging = binary_dir / ("default_model_fp16.building." + std::to_string(getpid()));
  const std::string command = shell_quote(script.string()) + " " + shell_quote((kPackage / "checkpoint").string()) +
                              " fp16 " + shell_quote(staging.string());
  std::printf("[ export   ] %s\n", command.c_str());
  testing::ScopedTempDir scratch;  // the command's captured output
  if (!scratch.valid()) return OG_ERROR("cannot create a temporary folder");
  const Status built = testing::run_checked("tools/train/export_default.sh", command, scratch.path());
  // Another process may have put a build in place meanwhile: keep that one, which it may be loading.
  if (!built.is_ok() || up_to_date()) {
    fs::remove_all(staging, ec);
    OG_RETURN_IF_ERROR(built);
    return target;
  }
  fs::remove_all(target, ec);
  fs::rename(staging, target, ec);
  if (ec) {
    fs::remove_all(staging, ec);
    if (!up_to_date()) return OG_ERROR("cannot move the fp16 build to ", target.string());
  }
  return target;
}

std::unique_ptr<genai::Model> load_model(const fs::path& dir) {
  genai::ModelOptions options;
  options.num_threads = 2;
  auto model = genai::Model::load(dir.string(), options);
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  return model.is_ok() ? std::move(*model) : nullptr;
}

std::unique_ptr<Tokenizer> load_tokenizer() {
  auto tokenizer = Tokenizer::load(kPackage.string());
  EXPECT_TRUE(tokenizer.is_ok()) << tokenizer.status().message();
  return tokenizer.is_ok() ? std::move(*tokenizer) : nullptr;
}

std::string valid_text() {
  auto text = testing::read_text_file(kPackage / "valid.txt");
  EXPECT_TRUE(text.is_ok()) << text.status().message();
  return text.is_ok() ? *text : std::string();
}

double relative_gap(double value, double reference) { return std::abs(value / reference - 1); }

// Perplexity on valid.txt, tokenized as `onnx-genai eval-ppl` does (the whole file in one encode,
// no special tokens). The fp16 result is computed once per test process and shared.
class DefaultModel : public ::testing::Test {
 protected:
  static const std::vector<int32_t>& valid_tokens() {
    if (tokens_.empty()) {
      const auto tokenizer = load_tokenizer();
      if (tokenizer == nullptr) return tokens_;
      auto ids = tokenizer->encode(valid_text(), {.add_special_tokens = false});
      EXPECT_TRUE(ids.is_ok()) << ids.status().message();
      if (ids.is_ok()) tokens_ = std::move(*ids);
    }
    return tokens_;
  }

  static std::optional<genai::PerplexityResult> perplexity(const fs::path& dir) {
    const auto model = load_model(dir);
    if (model == nullptr || valid_tokens().empty()) return std::nullopt;
    auto result = genai::evaluate_perplexity(*model, valid_tokens(), {kWindow, kStride});
    EXPECT_TRUE(result.is_ok()) << result.status().message();
    if (!result.is_ok()) return std::nullopt;
    std::printf("[ ppl      ] %s: %.6f over %lld scored tokens (%.1f s)\n", dir.filename().c_str(), result->ppl,
                static_cast<long long>(result->scored), result->seconds);
    return *result;
  }

  static const std::optional<genai::PerplexityResult>& fp16_perplexity() {
    if (!fp16_.has_value()) {
      auto dir = fp16_variant();
      EXPECT_TRUE(dir.is_ok()) << dir.status().message();
      if (dir.is_ok()) fp16_ = perplexity(*dir);
    }
    return fp16_;
  }

  static std::vector<int32_t> tokens_;
  static std::optional<genai::PerplexityResult> fp16_;
};

std::vector<int32_t> DefaultModel::tokens_;
std::optional<genai::PerplexityResult> DefaultModel::fp16_;

struct TorchPerplexity {
  int64_t tokens = 0, scored = 0;
  double ppl = 0;
};

// tools/train/eval_ppl.py on `tokens` (the image's torch has no `tokenizers`, so it gets our ids).
Result<TorchPerplexity> torch_perplexity(const std::vector<int32_t>& tokens, const fs::path& scratch) {
  const fs::path ids = scratch / "valid_ids.json";
  std::ofstream(ids) << nlohmann::json(tokens).dump();
  const std::string command =
      "/usr/bin/python3 " + shell_quote(testing::source_dir() + "/tools/train/eval_ppl.py") +
      " --checkpoint " + shell_quote((kPackage / "checkpoint").string()) + " --token-ids " + shell_quote(ids.string()) +
      " --window " + std::to_string(kWindow) + " --stride " + std::to_string(kStride);
  OG_ASSIGN_OR_RETURN(testing::CommandResult run, testing::run_command(command, scratch));
  if (run.exit_code != 0) return OG_ERROR("eval_ppl.py failed (exit ", run.exit_code, "): ", run.err);
  const nlohmann::json j = nlohmann::json::parse(run.out, nullptr, false);
  if (!j.is_object() || !j.contains("ppl")) return OG_ERROR("eval_ppl.py printed '", run.out, "'");
  return TorchPerplexity{j["tokens"].get<int64_t>(), j["scored"].get<int64_t>(), j["ppl"].get<double>()};
}

TEST_F(DefaultModel, PerplexityMatchesPyTorch) {
  const std::vector<int32_t>& tokens = valid_tokens();
  ASSERT_GT(tokens.size(), static_cast<size_t>(kWindow));
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  // PyTorch takes longest: it runs while we evaluate.
  auto torch = std::async(std::launch::async, torch_perplexity, tokens, scratch.path());
  const auto& ours = fp16_perplexity();
  const Result<TorchPerplexity> reference = torch.get();
  ASSERT_TRUE(reference.is_ok()) << reference.status().message();
  ASSERT_TRUE(ours.has_value());
  EXPECT_EQ(reference->tokens, ours->tokens);
  EXPECT_EQ(reference->scored, ours->scored);
  EXPECT_LT(relative_gap(ours->ppl, reference->ppl), 0.01) << ours->ppl << " vs PyTorch " << reference->ppl;
  std::printf("[ ppl      ] fp16 ours %.6f, PyTorch float32 %.6f (ratio - 1 = %.2e), %lld tokens\n", ours->ppl,
              reference->ppl, ours->ppl / reference->ppl - 1, static_cast<long long>(ours->tokens));
}

TEST_F(DefaultModel, Int4WithinFivePercentOfFp16) {
  const auto& fp16 = fp16_perplexity();
  ASSERT_TRUE(fp16.has_value());
  const auto int4 = perplexity(kPackage);
  ASSERT_TRUE(int4.has_value());
  EXPECT_EQ(int4->scored, fp16->scored);
  EXPECT_LT(relative_gap(int4->ppl, fp16->ppl), 0.05) << int4->ppl << " vs fp16 " << fp16->ppl;
  std::printf("[ ppl      ] int4 %.6f, fp16 %.6f (ratio - 1 = %.2e)\n", int4->ppl, fp16->ppl,
              int4->ppl / fp16->ppl - 1);
}

TEST(DefaultModelGeneration, GreedyLockAgainstOnnxRuntime) {
  const auto model = load_model(kPackage);
  ASSERT_NE(model, nullptr);
  testing::ParityFixture fixture{"debian_prose_11m", {}, {}, kLockedTokens - 1, ""};
  for (const char* prompt : {"And God said", "The quick brown fox", "In the beginning"}) {
    auto ids = model->encode(prompt);
    ASSERT_TRUE(ids.is_ok()) << ids.status().message();
    fixture.prompts.emplace_back(ids->begin(), ids->end());
  }
  ASSERT_NE(fixture.prompts[0].size(), fixture.prompts[1].size()) << "the batch should be ragged";
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  auto ort = testing::ort_greedy_tokens(kPackage, fixture, kLockedTokens, scratch.path());
  ASSERT_TRUE(ort.is_ok()) << ort.status().message();
  // Plain argmax: generate_greedy starts from empty GeneratorParams, not the package's search
  // defaults (repetition penalty, no-repeat n-grams), as ONNX Runtime's loop does.
  auto ours = testing::generate_greedy(*model, testing::to_int32(fixture.prompts), kLockedTokens);
  ASSERT_TRUE(ours.is_ok()) << ours.status().message();
  ASSERT_EQ(ours->size(), ort->size());
  for (size_t b = 0; b < ours->size(); ++b) {
    ASSERT_EQ((*ort)[b].size(), static_cast<size_t>(kLockedTokens));
    EXPECT_EQ((*ours)[b], (*ort)[b]) << "sequence " << b;
    auto text = model->tokenizer()->decode((*ours)[b]);
    std::printf("[ greedy   ] %zu: %s\n", b, text.is_ok() ? text->c_str() : text.status().message().c_str());
  }
}

// Strings whose tokenization depends on the pre-tokenizer's and decoder's details.
const std::vector<std::string> kTrickyTexts = {
    " And God said", "  two leading spaces", "\n\n", "verse\n\n\nnext", "\t tab\r\nwindows", "1 22 333 4444 55555",
    "3.14159, 1,000,000 and 2026-11-30", "naïve café Straße", "日本語のテキスト", "emoji 🙂👍🏽 and 🇩🇪",
    "a<|endoftext|>b", "<|endoftext|> at the start", "end <|endoftext|>", "<|endoftext|><|endoftext|>",
    "don't I'll we're it's", "trailing spaces   ", "",
};

TEST(DefaultModelTokenizer, TokenizerMatchesTransformersJs) {
  const auto tokenizer = load_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const std::string valid = valid_text();
  ASSERT_FALSE(valid.empty());
  std::vector<std::string> texts = kTrickyTexts;
  texts.push_back(valid);
  for (size_t begin = 0; begin < valid.size();) {
    const size_t end = std::min(valid.find('\n', begin), valid.size());
    texts.push_back(valid.substr(begin, end - begin));
    begin = end + 1;
  }
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const fs::path texts_file = scratch.path() / "texts.json", out = scratch.path() / "reference.json";
  std::ofstream(texts_file) << nlohmann::json(texts).dump();
  const std::string command = "node " + shell_quote(testing::source_dir() + "/tests/oracle/tokenizer_texts.mjs") +
                              " " + shell_quote(kPackage.string()) + " " + shell_quote(texts_file.string()) + " " +
                              shell_quote(out.string());
  const Status ran = testing::run_checked("tests/oracle/tokenizer_texts.mjs", command, scratch.path());
  ASSERT_TRUE(ran.is_ok()) << ran.message();
  auto reference_text = testing::read_text_file(out);
  ASSERT_TRUE(reference_text.is_ok()) << reference_text.status().message();
  const nlohmann::json reference = nlohmann::json::parse(*reference_text, nullptr, false);
  ASSERT_TRUE(reference.is_array() && reference.size() == texts.size()) << "reference has the wrong shape";

  int mismatches = 0;
  const auto expect_same = [&](const auto& ours, const auto& theirs, const std::string& what, const std::string& text) {
    if (ours == theirs) return;
    if (mismatches++ < 5) ADD_FAILURE() << what << " differs for " << nlohmann::json(text).dump();
  };
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ids = reference[i]["ids"].get<std::vector<int32_t>>();
    auto ours = tokenizer->encode(texts[i], {.add_special_tokens = false});
    ASSERT_TRUE(ours.is_ok()) << ours.status().message();
    expect_same(*ours, ids, "encode", texts[i]);
    // Decode the reference's ids so that an encode difference cannot hide a decode one.
    auto decoded = tokenizer->decode(ids);
    auto skipped = tokenizer->decode(ids, {.skip_special_tokens = true});
    ASSERT_TRUE(decoded.is_ok() && skipped.is_ok()) << texts[i];
    // transformers.js rejects decoding no ids; "" is the only sensible answer.
    const auto reference_decode = [&](const char* field) {
      return reference[i][field].is_null() ? std::string() : reference[i][field].get<std::string>();
    };
    expect_same(*decoded, reference_decode("decoded"), "decode", texts[i]);
    expect_same(*skipped, reference_decode("decoded_skip"), "decode (skip special tokens)", texts[i]);
  }
  EXPECT_EQ(mismatches, 0);
  std::printf("[ tokenizer] %zu texts (%zu lines of valid.txt, the whole file, %zu tricky), %d mismatches\n",
              texts.size(), texts.size() - kTrickyTexts.size() - 1, kTrickyTexts.size(), mismatches);
}

TEST(DefaultModelCli, CliDefaultsToTheShippedModel) {
  // Run away from the source tree: the build compiles the default folder's absolute path in.
  testing::ScopedTempDir elsewhere;
  ASSERT_TRUE(elsewhere.valid());
  const testing::CommandResult r =
      testing::run_cli("generate --prompt 'And God said' --max-new-tokens 20", "", elsewhere.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("unto"), std::string::npos) << r.out;
  std::printf("[ cli      ] %s", r.out.c_str());
}

}  // namespace
}  // namespace onnx_genai
