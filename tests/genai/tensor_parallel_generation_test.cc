// Tensor parallelism through the Generator and the CLI (genai::ModelOptions::tensor_parallel,
// `--tensor-parallel N` / `-tp N`): random decoders from tools/build_model.py with 8 query heads
// and 4 KV heads, sharded into N = 2 and 4 ranks, each rank with its own KV cache of 4 / N heads,
// must generate N = 1's greedy tokens (batched prompts of different lengths, chunked prefill,
// beam search's cache reorders, speculative rewinds); a model that cannot be split is refused
// with one line naming why; serve and bench-serve run sharded. tests/parallel checks the sharded logits themselves.
#include <gtest/gtest.h>

#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::shell_quote;

constexpr int kVocab = 300;
constexpr int kNewTokens = 24;

const std::vector<std::string> kHeads = {"--preset", "llama", "--set", "num_attention_heads=8", "--set",
                                         "num_key_value_heads=4", "--set", "vocab_size=300"};

class TensorParallelGeneration : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new testing::ScopedTempDir();
    f32_ = testing::build_model_with_test_tokenizer({"tp_f32", kHeads, {}, 0, ""}, scratch_->path(), kVocab);
    std::vector<std::string> int4 = kHeads;
    int4.insert(int4.end(), {"--weights", "int4", "--block-size", "16"});
    int4_ = testing::build_model_or_fail({"tp_int4", int4, {}, 0, ""}, scratch_->path());
  }
  static void TearDownTestSuite() { delete scratch_; }

  void SetUp() override { ASSERT_FALSE(f32_.empty() || int4_.empty()); }

  static std::unique_ptr<genai::Model> load(const fs::path& dir, int ranks) {
    genai::ModelOptions options;
    options.num_threads = 1;
    options.tensor_parallel = ranks;
    auto model = genai::Model::load(dir.string(), options);
    EXPECT_TRUE(model.is_ok()) << model.status().message();
    return model.is_ok() ? std::move(*model) : nullptr;
  }

  static testing::ScopedTempDir* scratch_;
  static fs::path f32_, int4_;
};

testing::ScopedTempDir* TensorParallelGeneration::scratch_ = nullptr;
fs::path TensorParallelGeneration::f32_;
fs::path TensorParallelGeneration::int4_;

const std::vector<std::vector<int32_t>> kPrompts = {
    {5, 17, 42, 99, 7, 3, 250, 11}, {8, 1, 64}, {120, 121, 122, 123, 9}};

TEST_F(TensorParallelGeneration, GreedyTokensEqualOneRank) {
  for (const fs::path& dir : {f32_, int4_}) {
    auto one = load(dir, 1);
    ASSERT_NE(one, nullptr);
    // Batched rows of different lengths, and one prompt fed in chunks of 3 (the cache grows).
    auto expected = testing::generate_greedy(*one, kPrompts, kNewTokens);
    auto chunked = testing::generate_greedy(*one, {kPrompts[0]}, kNewTokens, 3);
    ASSERT_TRUE(expected.is_ok() && chunked.is_ok()) << expected.status().message();
    for (const int ranks : {2, 4}) {
      auto model = load(dir, ranks);
      ASSERT_NE(model, nullptr);
      EXPECT_EQ(model->info().tensor_parallel, ranks);
      EXPECT_EQ(model->info().kv_heads, 4);
      auto got = testing::generate_greedy(*model, kPrompts, kNewTokens);
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      EXPECT_EQ(*got, *expected) << dir << " N=" << ranks;
      auto got_chunked = testing::generate_greedy(*model, {kPrompts[0]}, kNewTokens, 3);
      ASSERT_TRUE(got_chunked.is_ok()) << got_chunked.status().message();
      EXPECT_EQ(*got_chunked, *chunked) << dir << " N=" << ranks << " chunked";
    }
  }
}

// Beam search reorders every rank's cache rows; prompt-lookup speculation rewinds them.
TEST_F(TensorParallelGeneration, BeamSearchAndSpeculationEqualOneRank) {
  genai::GeneratorParams beam;
  beam.sampling.greedy = true;
  beam.max_new_tokens = 12;
  beam.ignore_eos = true;
  beam.prompts = {kPrompts[0]};
  beam.beam.num_beams = 3;
  beam.beam.num_return_sequences = 2;
  genai::GeneratorParams speculative = beam;
  speculative.beam = {};
  speculative.prompts = {{4, 5, 6, 4, 5, 6, 4, 5, 6, 4, 5}};
  speculative.speculative.method = genai::SpeculativeMethod::kNgram;
  auto one = load(f32_, 1);
  auto two = load(f32_, 2);
  ASSERT_TRUE(one && two);
  for (const genai::GeneratorParams& params : {beam, speculative}) {
    auto a = genai::Generator::create(*one, params);
    auto b = genai::Generator::create(*two, params);
    ASSERT_TRUE(a.is_ok() && b.is_ok()) << a.status().message() << b.status().message();
    ASSERT_TRUE((*a)->generate(nullptr).is_ok());
    ASSERT_TRUE((*b)->generate(nullptr).is_ok());
    ASSERT_EQ((*a)->batch_size(), (*b)->batch_size());
    for (size_t s = 0; s < (*a)->batch_size(); ++s) {
      const auto x = (*a)->tokens(s), y = (*b)->tokens(s);
      EXPECT_EQ(std::vector<int32_t>(x.begin(), x.end()), std::vector<int32_t>(y.begin(), y.end())) << s;
    }
  }
}

TEST_F(TensorParallelGeneration, RefusesWhatCannotBeSplit) {
  genai::ModelOptions options;
  options.tensor_parallel = 3;  // 4 KV heads
  auto model = genai::Model::load(f32_.string(), options);
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.status().message().find("cannot split the model into 3 tensor-parallel ranks"), std::string::npos)
      << model.status().message();
}

// The CLI: generate's greedy text with -tp 2 / --tensor-parallel 4 is N = 1's; bench runs sharded.
TEST_F(TensorParallelGeneration, CliGenerateAndBench) {
  testing::ScopedTempDir local;
  const std::string common = "generate " + shell_quote(f32_.string()) +
                             " --prompt 'the old lion said' --greedy --ignore-eos --max-new-tokens 16 --threads 1";
  const testing::CommandResult one = testing::run_cli(common, "", local.path());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_FALSE(one.out.empty());
  for (const std::string flag : {" -tp 2", " --tensor-parallel 4", " --tensor-parallel=2"}) {
    const testing::CommandResult sharded = testing::run_cli(common + flag, "", local.path());
    EXPECT_EQ(sharded.exit_code, 0) << flag << ": " << sharded.err;
    EXPECT_EQ(sharded.out, one.out) << flag;
  }
  const testing::CommandResult bench = testing::run_cli(
      "bench " + shell_quote(f32_.string()) + " --prompt-len 8 --gen-len 4 --repeat 1 --threads 1 -tp 2 --json", "",
      local.path());
  EXPECT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_NE(bench.out.find("\"tensor_parallel\": 2"), std::string::npos) << bench.out;
}

// The serving commands: bench-serve runs the engine sharded, and `serve -tp 2` answers a
// completion with the text `generate` gives at N = 1 (tests/engine checks the engine's tokens).
TEST_F(TensorParallelGeneration, CliServeAndBenchServe) {
  testing::ScopedTempDir local;
  const std::string model = shell_quote(f32_.string());
  const testing::CommandResult bench = testing::run_cli(
      "bench-serve " + model + " --num-requests 4 --concurrency 2 --prompt-len 12 --gen-len 6 --threads 1 "
      "--tensor-parallel 2 --json", "", local.path());
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const nlohmann::json report = nlohmann::json::parse(bench.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << bench.out;
  EXPECT_EQ(report["tensor_parallel"], 2);
  EXPECT_EQ(report["requests"], 4);
  EXPECT_TRUE(report["paged"].get<bool>());
  EXPECT_GT(report["output_tok_s"].get<double>(), 0.0);

  const testing::CommandResult one = testing::run_cli(
      "generate " + model + " --prompt 'the old lion said' --greedy --ignore-eos --max-new-tokens 12 --threads 1", "",
      local.path());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  // The server on a free port; its address from the line it prints once listening.
  const std::string log = shell_quote((local.path() / "serve.log").string());
  // In a subshell, so that run_command's redirections take the curl output, not only the last command's.
  const std::string script =
      "(" + shell_quote(OG_CLI_PATH) + " serve " + model + " -tp 2 --port 0 --threads 1 2>" + log + " & pid=$!; "
      "for i in $(seq 600); do grep -q 'listening on' " + log + " && break; kill -0 $pid || break; sleep 0.1; done; "
      "url=$(sed -n 's/.*listening on \\(http:[^ ]*\\).*/\\1/p' " + log + "); "
      "curl -s --max-time 120 \"$url/v1/completions\" -H 'Content-Type: application/json' -d "
      "'{\"prompt\": \"the old lion said\", \"max_tokens\": 12, \"temperature\": 0, "
      "\"ignore_eos\": true}'; kill -TERM $pid; wait $pid)";
  auto served = testing::run_command(script, local.path());
  ASSERT_TRUE(served.is_ok()) << served.status().message();
  EXPECT_EQ(served->exit_code, 0) << served->err;
  const nlohmann::json completion = nlohmann::json::parse(served->out, nullptr, false);
  ASSERT_TRUE(completion.is_object() && completion.contains("choices")) << served->out << served->err;
  const std::string text = completion["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(completion["usage"]["completion_tokens"], 12) << served->out;
  EXPECT_EQ(text + "\n", one.out);
}

// The default model has one KV head: one line saying why, exit 2.
TEST_F(TensorParallelGeneration, CliRefusesTheDefaultModel) {
  testing::ScopedTempDir local;
  const fs::path default_model = fs::path(OG_SOURCE_DIR) / "models/debian-prose-11m";
  const std::string args = "generate " + shell_quote(default_model.string()) + " --prompt hi --tensor-parallel 2";
  testing::expect_bad_input_result(testing::run_cli(args, "", local.path()), args, "kv_num_heads");
  for (const std::string bad : {"--tensor-parallel 0", "-tp x", "--tensor-parallel 65"}) {
    const std::string a = "generate " + shell_quote(default_model.string()) + " --prompt hi " + bad;
    testing::expect_bad_input_result(testing::run_cli(a, "", local.path()), a, bad.substr(0, bad.find(' ')));
  }
}

}  // namespace
}  // namespace onnx_genai
