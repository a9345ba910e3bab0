// Hostile input to the `onnx-genai` executable, run as a user runs it on the default model
// (models/debian-prose-11m, or a copy of its folder with one file broken): invalid UTF-8, files
// that are directories, endless streams, unwritable stdout, tiny temperatures, truncation that
// keeps nothing, config values out of range or contradicted by the graph, an empty vocabulary,
// an option given where a value belongs, and inputs or plans past the memory limit. Each ends in
// one line on stderr that names what and where, and a non-zero exit (or, where the input is
// fine but odd, in what the help text promises).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;
using testing::shell_quote;

const fs::path kDefaultModel = fs::path(OG_SOURCE_DIR) / "models/debian-prose-11m";

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

class CliHostile : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(local_.valid()); }

  // `shell` is a shell command line in which "CLI" stands for the quoted onnx-genai path.
  CommandResult shell(const std::string& line) {
    std::string command = line;
    for (size_t at = command.find("CLI"); at != std::string::npos; at = command.find("CLI", at + 1)) {
      command.replace(at, 3, shell_quote(OG_CLI_PATH));
    }
    auto result = testing::run_command(command, local_.path());
    EXPECT_TRUE(result.is_ok()) << result.status().message();
    return result.is_ok() ? *result : CommandResult{};
  }

  // Exit status `code`, nothing on stdout, one line on stderr holding every needle.
  void expect_error(const std::string& line, int code, const std::vector<std::string>& needles) {
    const CommandResult r = shell(line);
    EXPECT_EQ(r.exit_code, code) << line << " -> " << r.err;
    EXPECT_EQ(r.out, "") << line;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << line << " -> " << r.err;
    EXPECT_TRUE(r.err.starts_with("onnx-genai: ")) << line << " -> " << r.err;
    for (const std::string& needle : needles) {
      EXPECT_NE(r.err.find(needle), std::string::npos) << line << " -> " << r.err << " (wanted '" << needle << "')";
    }
  }

  // The default model's folder with the decoder and tokenizer linked and the configs copied, to break.
  fs::path model_copy(const std::string& name) {
    const fs::path dir = local_.path() / name;
    fs::create_directories(dir);
    for (const char* file : {"model.onnx", "tokenizer.json"}) fs::create_symlink(kDefaultModel / file, dir / file);
    for (const char* file : {"genai_config.json", "tokenizer_config.json"}) fs::copy(kDefaultModel / file, dir / file);
    return dir;
  }

  // A copy whose genai_config.json is edited by `edit`.
  fs::path with_genai_config(const std::string& name, const std::function<void(json&)>& edit) {
    const fs::path dir = model_copy(name);
    json config = read_json(dir / "genai_config.json");
    edit(config);
    write_text(dir / "genai_config.json", config.dump());
    return dir;
  }

  std::string model() const { return shell_quote(kDefaultModel.string()); }

  testing::ScopedTempDir local_;
};

TEST_F(CliHostile, InvalidUtf8InChatMessagesIsAnError) {
  // /bin/sh's printf writes octal escapes: \377 is the byte 0xff.
  expect_error("CLI run " + model() + " --system \"$(printf '\\377')\"", 2, {"--system is not valid UTF-8 (byte 0)"});
  expect_error("CLI generate " + model() + " --chat --prompt hi --system \"$(printf 'a\\376')\"", 2,
               {"--system is not valid UTF-8 (byte 1)"});
  // The REPL reports each bad line and goes on; the exit status says a line failed.
  const CommandResult r = shell("printf 'x\\377\\n/system \\300\\n' | CLI run " + model());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err,
            "onnx-genai: input line 1 is not valid UTF-8 (byte 1)\n"
            "onnx-genai: input line 2 is not valid UTF-8 (byte 8)\n");
}

TEST_F(CliHostile, FilesThatAreDirectoriesAreErrorsNamingThem) {
  const fs::path dir = model_copy("config_dir");
  fs::remove(dir / "tokenizer_config.json");
  fs::create_directory(dir / "tokenizer_config.json");
  const std::string quoted = shell_quote(dir.string());
  const std::string valid = shell_quote((kDefaultModel / "valid.txt").string());
  for (const std::string& command : {"tokenize " + quoted + " --text hi", "generate " + quoted + " --prompt hi",
                                     "eval-ppl " + quoted + " --text " + valid, "run " + quoted}) {
    expect_error("CLI " + command + " </dev/null", 2, {"tokenizer_config.json': Is a directory"});
  }
  expect_error("CLI eval-ppl " + model() + " --text " + shell_quote(local_.path().string()), 2,
               {"--text: cannot read '" + local_.path().string() + "': Is a directory"});
}

TEST_F(CliHostile, StdinThatIsADirectoryIsAnError) {
  const std::string from_dir = " < " + shell_quote(local_.path().string());
  expect_error("CLI generate " + model() + from_dir, 2, {"cannot read the prompt on stdin: Is a directory"});
  expect_error("CLI tokenize " + model() + from_dir, 2, {"cannot read the text on stdin: Is a directory"});
  expect_error("CLI run " + model() + from_dir, 1, {"cannot read stdin: Is a directory"});
}

TEST_F(CliHostile, EndlessInputStopsAtTheLimit) {
  expect_error("head -c 5000 /dev/zero | CLI generate " + model() + " --max-input-bytes 4096", 2,
               {"the prompt on stdin is larger than the limit of 4096 bytes (--max-input-bytes raises it)"});
  expect_error("head -c 5000 /dev/zero | CLI tokenize " + model() + " --max-input-bytes 4096", 2,
               {"the text on stdin is larger than the limit of 4096 bytes"});
  expect_error("(echo /reset; head -c 5000 /dev/zero) | CLI run " + model() + " --max-input-bytes 4096", 1,
               {"input line 2 is longer than the limit of 4096 bytes (--max-input-bytes raises it)"});
  // The default limit ends an endless file too.
  expect_error("CLI eval-ppl " + model() + " --text /dev/zero", 2,
               {"--text: '/dev/zero' is larger than the limit of 67108864 bytes (--max-input-bytes raises it)"});
}

TEST_F(CliHostile, FailedWritesToStdoutExitNonZero) {
  // The subshell's own redirection wins over the test's capture of stdout.
  expect_error("(CLI tokenize " + model() + " --text hello >/dev/full)", 1,
               {"cannot write standard output"});
  expect_error("(CLI generate " + model() + " --prompt hi --max-new-tokens 2 >&-)", 1, {"cannot write standard output"});
  expect_error("(CLI --help >/dev/full)", 1, {"cannot write standard output"});
}

TEST_F(CliHostile, TemperatureBelowTheThresholdIsGreedy) {
  const std::string common = "CLI generate " + model() + " --prompt 'And the LORD said' --max-new-tokens 12";
  const CommandResult greedy = shell(common + " --greedy");
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  for (const std::string temperature : {"1e-45", "1e-30", "9e-6"}) {
    const CommandResult tiny = shell(common + " --temperature " + temperature + " --seed 7");
    EXPECT_EQ(tiny.exit_code, 0) << tiny.err;
    EXPECT_EQ(tiny.out, greedy.out) << "--temperature " << temperature;
  }
}

TEST_F(CliHostile, TruncationThatKeepsNoPromptIsRefused) {
  std::string prompt;
  for (int i = 0; i < 700; ++i) prompt += "the ";
  const fs::path file = local_.path() / "long.txt";
  write_text(file, prompt);
  const std::string from_file = " < " + shell_quote(file.string());
  expect_error("CLI generate " + model() + " --truncate --max-new-tokens 600" + from_file, 2,
               {"max_new_tokens 600 leaves none of the model's context of 512"});
  const CommandResult kept = shell("CLI generate " + model() + " --truncate --max-new-tokens 2" + from_file);
  EXPECT_EQ(kept.exit_code, 0) << kept.err;
}

TEST_F(CliHostile, ConfigValuesOutOfRangeNameTheFileAndKey) {
  struct Case {
    std::string name;
    std::function<void(json&)> edit;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"context", [](json& c) { c["model"]["context_length"] = -5; },
       "genai_config.json: model.context_length must be an integer >= 1, got -5"},
      {"eos_negative", [](json& c) { c["model"]["eos_token_id"] = -1; },
       "genai_config.json: model.eos_token_id must be a token id or a list of token ids in [0, 8192)"},
      {"eos_past_vocab", [](json& c) { c["model"]["eos_token_id"] = json::array({0, 8192}); },
       "model.eos_token_id must be a token id or a list of token ids in [0, 8192) (below vocab_size), got [0,8192]"},
      {"heads", [](json& c) { c["model"]["decoder"]["num_key_value_heads"] = 0; },
       "model.decoder.num_key_value_heads must be an integer >= 1, got 0"},
      // Without vocab_size in the config, the graph's logits decide.
      {"eos_past_graph",
       [](json& c) {
         c["model"].erase("vocab_size");
         c["model"]["eos_token_id"] = 9000;
       },
       "eos_token_id 9000 is not below the decoder's vocabulary size 8192"},
  };
  for (const Case& c : cases) {
    const fs::path dir = with_genai_config(c.name, c.edit);
    expect_error("CLI generate " + shell_quote(dir.string()) + " --prompt hi", 2, {c.needle});
  }
  const fs::path generation = model_copy("generation");
  write_text(generation / "generation_config.json", R"({"eos_token_id": [0, 70000]})");
  expect_error("CLI generate " + shell_quote(generation.string()) + " --prompt hi", 2,
               {"generation_config.json: eos_token_id must be a token id"});
  // The Hugging Face layout reads the same way.
  const fs::path hf = model_copy("hf");
  fs::remove(hf / "genai_config.json");
  write_text(hf / "config.json", R"({"num_hidden_layers": 8, "num_attention_heads": 5, "num_key_value_heads": 1,
      "hidden_size": 320, "vocab_size": 8192, "max_position_embeddings": -1, "eos_token_id": 0})");
  expect_error("CLI generate " + shell_quote(hf.string()) + " --prompt hi", 2,
               {"config.json: max_position_embeddings must be an integer >= 1, got -1"});
}

TEST_F(CliHostile, ConfigTheGraphContradictsWarnsAndTheGraphRuns) {
  const fs::path dir = with_genai_config("contradicted", [](json& c) {
    c["model"]["decoder"]["head_size"] = 32;
    c["model"]["decoder"]["num_key_value_heads"] = 2;
    c["model"]["vocab_size"] = 9000;
  });
  const CommandResult r = shell("CLI generate " + shell_quote(dir.string()) + " --prompt hi --max-new-tokens 2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const std::string warning :
       {"onnx-genai: warning: genai_config.json: model.decoder.num_key_value_heads is 2 but the decoder input "
        "'past_key_values.0.key' [batch_size, 1, past_sequence_length, 64] (the head count (dim 1)) has 1; using the "
        "graph's value\n",
        "onnx-genai: warning: genai_config.json: model.decoder.head_size is 32 but the decoder input ",
        "onnx-genai: warning: genai_config.json: model.vocab_size is 9000 but the decoder output 'logits' "}) {
    EXPECT_NE(r.err.find(warning), std::string::npos) << r.err << "\n  wanted: " << warning;
  }
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r.err;
}

TEST_F(CliHostile, EmptyVocabularyIsRefused) {
  const fs::path dir = local_.path() / "empty_vocab";
  fs::create_directory(dir);
  write_text(dir / "tokenizer.json", R"({"model": {"type": "BPE", "vocab": {}, "merges": []}})");
  expect_error("CLI tokenize " + shell_quote(dir.string()) + " --text hello", 2, {"model.vocab is empty"});
}

TEST_F(CliHostile, AnOptionWhereAValueBelongsIsRefused) {
  expect_error("CLI generate " + model() + " --prompt --greedy", 2,
               {"--prompt needs a value, got the option '--greedy' (to pass that text, write --prompt=--greedy)"});
  expect_error("CLI tokenize " + model() + " --text --ids=1", 2, {"--text needs a value, got the option '--ids=1'"});
  expect_error("CLI exec " + shell_quote((kDefaultModel / "model.onnx").string()) + " --dim --threads", 1,
               {"--dim needs a value, got the option '--threads'"});
  // A terminal escape in an argument comes back written out, not sent to the terminal.
  expect_error("CLI generate " + model() + " --top-k \"$(printf 'x\\033]0;t\\a')\"", 2,
               {"--top-k wants an integer in [0, 2147483647], got 'x\\x1b]0;t\\x07'"});
  const CommandResult literal = shell("CLI tokenize " + model() + " --text=--greedy --ids");
  EXPECT_EQ(literal.exit_code, 0) << literal.err;
  EXPECT_NE(literal.out, "") << literal.err;
}

TEST_F(CliHostile, ExecRefusesInputsAndPlansPastTheMemoryLimit) {
  const std::string exec = "CLI exec " + shell_quote((kDefaultModel / "model.onnx").string());
  // Dims whose product passes int64: refused before anything is allocated.
  expect_error(exec + " --dim batch_size=2147483647 --dim sequence_length=2147483647", 1,
               {"input 'input_ids' int64 [2147483647,2147483647] would take the inputs past the limit of"});
  expect_error(exec + " --max-input-bytes 100000 --dim sequence_length=20000", 1,
               {"would take the inputs past the limit of 100000 bytes (--max-input-bytes raises it)"});
  // A billion positions: refused at the inputs' default limit of 1 GiB before anything is filled.
  expect_error(exec + " --dim sequence_length=1000000000", 1,
               {"input 'input_ids' int64 [1,1000000000] would take the inputs past the limit of 1073741824 bytes"});
  // Inputs of 16 kB whose plan needs megabytes (activations of 1024 positions).
  expect_error(exec + " --max-memory 1000000 --dim sequence_length=1024", 1,
               {"the plan for these input shapes needs a", "-byte host activation arena, more than the limit of 1000000 bytes"});
}

}  // namespace
}  // namespace onnx_genai
