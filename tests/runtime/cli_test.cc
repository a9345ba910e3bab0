// The `onnx-genai` executable run as a user runs it: error paths exit 1 with one line on stderr,
// and `exec` on the demo decoder prints the greedy tokens ONNX Runtime computes for the same ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "demo_model.h"
#include "oracle_io.h"

namespace onnx_genai {
namespace {

using testing::CommandResult;
using testing::shell_quote;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(scratch_.valid()); }

  CommandResult cli(const std::string& args) {
    auto result = testing::run_command(shell_quote(OG_CLI_PATH) + " " + args, scratch_.path());
    EXPECT_TRUE(result.is_ok()) << result.status().message();
    return result.is_ok() ? *result : CommandResult{};
  }

  // Exit status 1, nothing on stdout, exactly one line on stderr that contains `needle`.
  void expect_one_line_error(const std::string& args, const std::string& needle) {
    const CommandResult r = cli(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << " -> " << r.err;
    EXPECT_TRUE(r.err.starts_with("onnx-genai: ")) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << " -> " << r.err << " (wanted '" << needle << "')";
  }

  std::string demo_model() {
    const testing::DemoModels& models = testing::DemoModels::get();
    EXPECT_TRUE(models.status().is_ok()) << models.status().message();
    return models.path(testing::kDemoModelF32);
  }

  testing::ScopedTempDir scratch_;
};

TEST_F(CliTest, MissingModelFile) {
  expect_one_line_error("exec /nonexistent/dir/model.onnx", "/nonexistent/dir/model.onnx");
}

TEST_F(CliTest, CorruptModelFile) {
  const std::string path = (scratch_.path() / "garbage.onnx").string();
  std::ofstream(path) << "this is not a protobuf\n\x01\x02\x03";
  expect_one_line_error("exec " + shell_quote(path), "garbage.onnx");
}

TEST_F(CliTest, UsageErrors) {
  expect_one_line_error("", "missing subcommand");
  expect_one_line_error("frobnicate", "unknown subcommand 'frobnicate'");
  expect_one_line_error("exec", "needs a model path");
  expect_one_line_error("exec m.onnx --repeat 0", "--repeat");
  expect_one_line_error("exec m.onnx --threads x", "--threads");
  expect_one_line_error("exec m.onnx --dim batch", "--dim wants name=value");
  expect_one_line_error("exec m.onnx --bogus 1", "unknown option '--bogus'");
  expect_one_line_error("exec m.onnx --repeat", "--repeat needs a value");
}

TEST_F(CliTest, UnknownDimNamesTheModelsDims) {
  expect_one_line_error("exec " + shell_quote(demo_model()) + " --dim tokens=3", "unknown --dim 'tokens'");
  expect_one_line_error("exec " + shell_quote(demo_model()) + " --dim tokens=3", "batch, seq");
}

TEST_F(CliTest, InputFileOfWrongSize) {
  const std::string path = (scratch_.path() / "ids.bin").string();
  std::ofstream(path, std::ios::binary) << "12345";
  expect_one_line_error("exec " + shell_quote(demo_model()) + " --dim seq=4 --input input_ids=" + shell_quote(path),
                        "needs 32");
  expect_one_line_error("exec " + shell_quote(demo_model()) + " --input nope=" + shell_quote(path),
                        "no input of that name");
}

// exec with --input ids prints the argmax at the last position of every batch row; it must be
// the greedy token ONNX Runtime computes for the same ids.
TEST_F(CliTest, ExecPrintsTheGreedyTokensOnnxRuntimeComputes) {
  constexpr int64_t kBatch = 2, kSeq = 5;
  std::mt19937 rng(42);
  std::vector<int64_t> ids(kBatch * kSeq);
  for (auto& id : ids) id = static_cast<int64_t>(rng() % testing::kDemoVocab);
  const std::string ids_path = (scratch_.path() / "ids.bin").string();
  std::ofstream(ids_path, std::ios::binary)
      .write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * sizeof(int64_t)));

  const std::string model = demo_model();
  const CommandResult r = cli("exec " + shell_quote(model) + " --threads 1 --repeat 3 --dim batch=2 --dim seq=5" +
                              " --input input_ids=" + shell_quote(ids_path));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("output logits: float32 [2,5,1000] = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mean of the next 2 runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 plan(s) compiled, 2 cache hit(s)"), std::string::npos) << r.out;

  auto ort = testing::run_onnx_runtime(model, {{"input_ids", Tensor::from_vector<int64_t>(Shape{kBatch, kSeq}, ids)}});
  ASSERT_TRUE(ort.is_ok()) << ort.status().message();
  const float* logits = (*ort)[0].tensor.data<float>();
  std::string expected = "argmax over the last axis at the last position:";
  for (int64_t b = 0; b < kBatch; ++b) {
    const float* row = logits + ((b * kSeq) + kSeq - 1) * testing::kDemoVocab;
    expected += " " + std::to_string(std::max_element(row, row + testing::kDemoVocab) - row);
  }
  EXPECT_NE(r.out.find(expected + "\n"), std::string::npos) << "wanted '" << expected << "' in\n" << r.out;
}

}  // namespace
}  // namespace onnx_genai
