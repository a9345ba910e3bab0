// `onnx-genai generate` run as a user runs it, on a model built by tools/build_model.py with the
// byte-level tokenizer of genai_test_util.h: greedy output is the text of ONNX Runtime's greedy
// tokens (up to eos), from --prompt or stdin, streamed or not; --chat is the API's chat encoding;
// bad input exits 2 with one line on stderr.
#include <gtest/gtest.h>

#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::shell_quote;

constexpr int kVocab = 300;
constexpr int kNewTokens = 16;
constexpr int kEos = 2;

class CliGenerate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new testing::ScopedTempDir();
    fixture_ = testing::ParityFixture{
        "cli300", {"--preset", "qwen2", "--style", "genai", "--set", "vocab_size=300"}, {}, 0, ""};
    dir_ = testing::build_model_with_test_tokenizer(fixture_, scratch_->path(), kVocab);
  }
  static void TearDownTestSuite() { delete scratch_; }

  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(local_.valid());
  }

  CommandResult cli(const std::string& args, const std::string& stdin_text = "") {
    return testing::run_cli("generate " + args, stdin_text, local_.path());
  }

  void expect_bad_input(const std::string& args, const std::string& needle, const std::string& stdin_text = "") {
    testing::expect_bad_input_result(cli(args, stdin_text), args, needle);
  }

  // The text of ONNX Runtime's greedy continuation of `ids`, cut after the first eos.
  std::string ort_text(const std::vector<int32_t>& ids) {
    testing::ParityFixture fixture = fixture_;
    fixture.prompts = {std::vector<int64_t>(ids.begin(), ids.end())};
    auto tokens = testing::ort_greedy_tokens(dir_, fixture, kNewTokens, local_.path());
    EXPECT_TRUE(tokens.is_ok()) << tokens.status().message();
    if (!tokens.is_ok()) return "";
    std::vector<int32_t> generated = (*tokens)[0];
    generated.erase(std::find(generated.begin(), generated.end(), kEos), generated.end());
    auto tokenizer = Tokenizer::load(dir_.string());
    EXPECT_TRUE(tokenizer.is_ok());
    DecodeOptions options;
    options.skip_special_tokens = true;
    auto text = (*tokenizer)->decode(generated, options);
    EXPECT_TRUE(text.is_ok());
    return text.is_ok() ? *text : "";
  }

  static testing::ScopedTempDir* scratch_;
  static testing::ParityFixture fixture_;
  static fs::path dir_;
  testing::ScopedTempDir local_;
};

testing::ScopedTempDir* CliGenerate::scratch_ = nullptr;
testing::ParityFixture CliGenerate::fixture_;
fs::path CliGenerate::dir_;

TEST_F(CliGenerate, GreedyTextIsOnnxRuntimesTokens) {
  const std::string prompt = "the old lion said";
  auto tokenizer = Tokenizer::load(dir_.string());
  ASSERT_TRUE(tokenizer.is_ok());
  auto ids = (*tokenizer)->encode(prompt);
  ASSERT_TRUE(ids.is_ok());
  const std::string expected = ort_text(*ids) + "\n";
  const std::string common = shell_quote(dir_.string()) + " --greedy --max-new-tokens " + std::to_string(kNewTokens);

  for (const std::string extra : {"", " --stream", " --stats --threads 1"}) {
    const CommandResult r = cli(common + " --prompt " + shell_quote(prompt) + extra);
    EXPECT_EQ(r.exit_code, 0) << extra << ": " << r.err;
    EXPECT_EQ(r.out, expected) << extra;
    if (extra.find("--stats") != std::string::npos) {
      EXPECT_NE(r.err.find("decode"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("plans compiled"), std::string::npos) << r.err;
    } else {
      EXPECT_EQ(r.err, "") << extra;
    }
  }
  const CommandResult piped = cli(common, prompt);
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, expected);
}

// On a terminal (script(1) runs the command on a pseudo-terminal) a reply ends with the compact
// stats line on stderr; piped runs above print nothing there.
TEST_F(CliGenerate, TerminalShowsAReplyStatsLine) {
  const std::string command = shell_quote(OG_CLI_PATH) + " generate " + shell_quote(dir_.string()) +
                              " --greedy --max-new-tokens 4 --prompt hi";
  auto r = testing::run_command("script -qec " + shell_quote(command) + " /dev/null </dev/null", local_.path());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_NE(r->out.find("[4 tokens \u00b7 "), std::string::npos) << r->out;
  EXPECT_NE(r->out.find(" tok/s \u00b7 TTFT "), std::string::npos) << r->out;
}

TEST_F(CliGenerate, ChatUsesTheTemplate) {
  auto model = genai::Model::load(dir_.string());
  ASSERT_TRUE(model.is_ok());
  ChatRequest request;
  request.messages_json = R"([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}])";
  request.add_generation_prompt = true;
  auto ids = (*model)->encode_chat(request);
  ASSERT_TRUE(ids.is_ok()) << ids.status().message();
  const std::string expected = ort_text(*ids) + "\n";
  const CommandResult r = cli(shell_quote(dir_.string()) +
                              " --chat --system 'be brief' --prompt 'hi there' --greedy --max-new-tokens " +
                              std::to_string(kNewTokens));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
}

TEST_F(CliGenerate, SeededSamplingRepeats) {
  const std::string args =
      shell_quote(dir_.string()) + " --prompt 'the end' --temperature 0.8 --top-k 40 --seed 7 --max-new-tokens 12";
  const CommandResult a = cli(args), b = cli(args);
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

// --num-beams prints the API's beam search hypotheses, best first, each ending in a newline.
TEST_F(CliGenerate, BeamSearchPrintsTheApisHypotheses) {
  const CommandResult r = cli(shell_quote(dir_.string()) + " --prompt 'the end' --max-new-tokens 8 --num-beams 3 "
                              "--num-return-sequences 2 --length-penalty 0.5 --early-stopping never --stream");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto model = genai::Model::load(dir_.string());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  genai::GeneratorParams params = (*model)->default_params();
  params.max_new_tokens = 8;
  params.beam = {3, 0.5f, genai::EarlyStopping::kNever, 2};
  params.prompts = {(*model)->encode("the end").value()};
  auto generator = genai::Generator::create(**model, params);
  ASSERT_TRUE(generator.is_ok()) << generator.status().message();
  std::string want;
  ASSERT_TRUE((*generator)->generate([&](size_t, std::string_view text) { want += std::string(text) + "\n"; }).is_ok());
  EXPECT_EQ(r.out, want);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
}

TEST_F(CliGenerate, BadInputExitsTwoWithOneLine) {
  const std::string model = shell_quote(dir_.string());
  expect_bad_input(model + " --prompt hi --bogus", "unknown option '--bogus'");
  expect_bad_input(model + " --prompt hi --top-p 2", "--top-p wants a number in [0, 1], got '2'");
  expect_bad_input(model + " --prompt hi --max-new-tokens", "--max-new-tokens needs a value");
  expect_bad_input(model + " --prompt hi --greedy=yes", "--greedy takes no value");
  expect_bad_input(model + " --prompt \"$(printf 'ab\\377')\"", "the prompt is not valid UTF-8 (byte 2)");
  expect_bad_input(model + " --prompt hi --system x", "--system needs --chat");
  expect_bad_input(model + " --prompt hi --num-beams 0", "--num-beams wants an integer in [1, ");
  expect_bad_input(model + " --prompt hi --num-beams 2 --num-return-sequences 3",
                   "num_return_sequences must be in [1, num_beams 2], got 3");
  expect_bad_input(model + " --prompt hi --num-beams 2 --temperature 0.7",
                   "beam search (num_beams 2) cannot be combined with sampling");
  expect_bad_input(model + " --prompt hi --early-stopping maybe", "--early-stopping wants true, false or never");
  expect_bad_input(model, "generator: prompt 0 is empty");  // stdin is /dev/null
  expect_bad_input(model + " --prompt hi --device tpu", "--device: device 'tpu': expected cpu, cuda or cuda:N");
  // A GPU this process cannot use: the reason, naming the device (the CUDA build's tests cover
  // the device itself; this machine may have none, or no CUDA in the build).
  expect_bad_input(model + " --prompt hi --device cuda:7", "cuda:7");

  const fs::path empty = local_.path() / "empty_model";
  fs::create_directory(empty);
  expect_bad_input(shell_quote(empty.string()) + " --prompt hi", "no genai_config.json or config.json");
  const fs::path garbled = local_.path() / "garbled_model";
  fs::copy(dir_, garbled, fs::copy_options::recursive);
  std::ofstream(garbled / "genai_config.json") << "{\"model\": ";
  expect_bad_input(shell_quote(garbled.string()) + " --prompt hi", "genai_config.json: not valid JSON");
}

}  // namespace
}  // namespace onnx_genai
