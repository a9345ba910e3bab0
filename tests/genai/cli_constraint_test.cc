// `onnx-genai generate --json-schema / --json-object / --regex / --grammar` on the default model
// (models/debian-prose-11m), run as a user runs it: greedy and sampled outputs under every schema
// of tests/constraints/schema_corpus.json that end in eos must validate under python3-jsonschema
// (tests/constraints/validate_outputs.py); regex outputs must match in full (std::regex); Lark
// grammar outputs must parse under Lark (tests/constraints/lark_oracle.py); refused schemas and
// grammars exit 2 with one line naming the keyword or construct and where.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;
using testing::shell_quote;

const fs::path kDefaultModel = fs::path(OG_SOURCE_DIR) / "models/debian-prose-11m";

class CliConstraint : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(local_.valid()); }

  CommandResult generate(const std::string& args) {
    return testing::run_cli("generate " + shell_quote(kDefaultModel.string()) + " --stats " + args, "", local_.path());
  }

  testing::ScopedTempDir local_;
};

TEST_F(CliConstraint, OutputsValidateUnderTheirSchemas) {
  std::ifstream corpus_file(fs::path(OG_SOURCE_DIR) / "tests/constraints/schema_corpus.json");
  const json corpus = json::parse(corpus_file);
  const fs::path outputs = local_.path() / "outputs.jsonl";
  std::ofstream lines(outputs);
  int runs = 0, finished = 0;
  for (const auto& entry : corpus) {
    const fs::path schema = local_.path() / "schema.json";
    std::ofstream(schema) << entry["schema"].dump();
    for (const std::string sampling : {"--greedy", "--temperature 1.0 --seed 1", "--temperature 0.7 --seed 2"}) {
      ++runs;
      const CommandResult r = generate("--prompt 'The record:' --max-new-tokens 300 --json-schema " +
                                       shell_quote(schema.string()) + " " + sampling);
      ASSERT_EQ(r.exit_code, 0) << entry["name"] << " " << sampling << ": " << r.err;
      if (r.err.find("(eos)") == std::string::npos) continue;  // the token budget ran out first
      ++finished;
      ASSERT_FALSE(r.out.empty());
      lines << json{{"schema", entry["schema"]}, {"draft", "2020-12"}, {"text", r.out.substr(0, r.out.size() - 1)}}.dump()
            << "\n";
    }
  }
  lines.close();
  // An 11M prose model wanders inside free strings; a quarter of the runs closing within 300
  // tokens still validates a dozen texts.
  EXPECT_GE(finished, runs / 4) << "too few runs ended in eos within 300 tokens";
  auto validation = testing::run_command(
      "/usr/bin/python3 " + shell_quote(OG_SOURCE_DIR "/tests/constraints/validate_outputs.py") + " " + shell_quote(outputs.string()),
      local_.path());
  ASSERT_TRUE(validation.is_ok());
  EXPECT_EQ(validation->exit_code, 0) << validation->out;
  EXPECT_NE(validation->out.find("validated " + std::to_string(finished) + " texts, 0 failed"), std::string::npos)
      << validation->out;
}

TEST_F(CliConstraint, RegexAndJsonObject) {
  const std::string pattern = "(19|20)[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]";
  for (const std::string sampling : {"--greedy", "--temperature 1.0 --seed 7"}) {
    const CommandResult r = generate("--prompt 'Date:' --regex " + shell_quote(pattern) + " " + sampling);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(std::regex_match(r.out.substr(0, r.out.size() - 1), std::regex(pattern))) << r.out;
    EXPECT_NE(r.err.find("(eos)"), std::string::npos) << r.err;
  }
  const CommandResult r = generate("--prompt 'Data:' --json-object --temperature 0.8 --seed 3 --max-new-tokens 200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  if (r.err.find("(eos)") != std::string::npos) {
    const json value = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(value.is_object()) << r.out;
  }
}

TEST_F(CliConstraint, GrammarOutputsParseUnderLark) {
  const fs::path cases = local_.path() / "cases.jsonl";
  std::ofstream lines(cases);
  int runs = 0, finished = 0;
  for (const std::string name : {"arithmetic.lark", "json_like.lark", "sql.lark", "calls.lark"}) {
    const fs::path grammar = fs::path(OG_SOURCE_DIR) / "tests/constraints/lark" / name;
    for (const std::string sampling : {"--greedy", "--temperature 1.0 --seed 1", "--temperature 0.7 --seed 2"}) {
      ++runs;
      const CommandResult r = generate("--prompt 'The answer:' --max-new-tokens 120 --grammar " + shell_quote(grammar.string()) +
                                       " " + sampling);
      ASSERT_EQ(r.exit_code, 0) << name << " " << sampling << ": " << r.err;
      if (r.err.find("(eos)") == std::string::npos) continue;  // the token budget ran out first
      ++finished;
      lines << json{{"grammar", grammar.string()}, {"text", r.out.substr(0, r.out.size() - 1)}, {"ours", "complete"}}.dump() << "\n";
    }
  }
  lines.close();
  EXPECT_GE(finished, runs / 3) << "too few runs ended in eos within 120 tokens";
  auto check = testing::run_command(
      "/usr/bin/python3 " + shell_quote(OG_SOURCE_DIR "/tests/constraints/lark_oracle.py") + " " + shell_quote(cases.string()),
      local_.path());
  ASSERT_TRUE(check.is_ok());
  EXPECT_EQ(check->exit_code, 0) << check->out;
  EXPECT_NE(check->out.find("checked " + std::to_string(finished) + " texts, 0 disagree"), std::string::npos) << check->out;
}

TEST_F(CliConstraint, RefusalsNameTheKeyword) {
  const fs::path schema = local_.path() / "bad.json";
  std::ofstream(schema) << R"({"type":"object","properties":{"a":{"type":"string","not":{"const":"x"}}}})";
  CommandResult r = generate("--prompt x --json-schema " + shell_quote(schema.string()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "onnx-genai: json schema: unsupported keyword \"not\" (only of types, {} or a boolean) at /properties/a/not\n");
  r = generate("--prompt x --regex '(a)\\1'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("backreferences are not supported at offset"), std::string::npos) << r.err;
  r = generate("--prompt x --regex a --json-object");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("exclude each other"), std::string::npos) << r.err;
  const fs::path grammar = local_.path() / "bad.lark";
  std::ofstream(grammar) << "start: NAME\n%import python.NAME\n";  // only common.lark's terminals
  r = generate("--prompt x --grammar " + shell_quote(grammar.string()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "onnx-genai: lark grammar:2:16: %import from \"python\" is not supported (only Lark's common terminals)\n");
  r = generate("--prompt x --grammar " + shell_quote(grammar.string()) + " --regex a");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("exclude each other"), std::string::npos) << r.err;
  std::ofstream(schema) << "false";
  r = generate("--prompt x --json-schema " + shell_quote(schema.string()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("matches no text at all"), std::string::npos) << r.err;
  // A file that is not there: the error names the option that gave it.
  for (const char* option : {"--json-schema", "--grammar"}) {
    r = generate(std::string("--prompt x ") + option + " /no/such/file");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err.rfind(std::string("onnx-genai: ") + option + ": cannot open '/no/such/file'", 0), 0u) << r.err;
  }
}

}  // namespace
}  // namespace onnx_genai
