// The tokenize, show, bench and run subcommands run as a user runs them, on models built by
// tools/build_model.py with the byte-level tokenizer of genai_test_util.h: tokenize agrees with
// the Tokenizer API, show's counts with the builder's model_config.json and a parameter count
// summed over the ONNX file by the onnx Python package, bench --json has positive numbers, run
// answers over a pipe as the generation API does (and /reset forgets), bad input exits 2.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::shell_quote;

constexpr int kVocab = 300;
constexpr int kNewTokens = 16;

// Initializer elements of an ONNX file, each MatMulNBits weight (input 1, uint8) counted as
// 8 / bits weights per byte, and the number of MatMulNBits nodes: what `show` should report,
// computed with the onnx package.
constexpr const char* kParameterScript = R"(import sys, numpy, onnx
model = onnx.load(sys.argv[1])
packed = {}
for node in model.graph.node:
    if node.op_type == 'MatMulNBits':
        bits = next((a.i for a in node.attribute if a.name == 'bits'), 4)
        packed[node.input[1]] = 8 // bits
print(sum(int(numpy.prod(t.dims)) * packed.get(t.name, 1) for t in model.graph.initializer))
print(sum(node.op_type == 'MatMulNBits' for node in model.graph.node))
)";

class CliCommands : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new testing::ScopedTempDir();
    dir_ = testing::build_model_with_test_tokenizer(
        {"cmd_qwen2", {"--preset", "qwen2", "--style", "genai", "--set", "vocab_size=300"}, {}, 0, ""}, scratch_->path(), kVocab);
    int4_dir_ = testing::build_model_or_fail(
        {"cmd_llama_q4",
         {"--preset", "llama", "--style", "genai", "--weights", "int4", "--block-size", "32", "--accuracy-level", "4",
          "--set", "vocab_size=300", "--set", "num_hidden_layers=3", "--set", "num_key_value_heads=1"},
         {}, 0, ""},
        scratch_->path());
  }
  static void TearDownTestSuite() { delete scratch_; }

  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    ASSERT_FALSE(int4_dir_.empty());
    ASSERT_TRUE(local_.valid());
  }

  CommandResult cli(const std::string& args, const std::string& stdin_text = "") {
    return testing::run_cli(args, stdin_text, local_.path());
  }

  void expect_bad_input(const std::string& args, const std::string& needle) {
    testing::expect_bad_input_result(cli(args), args, needle);
  }

  // `show`'s "key: value" lines.
  std::map<std::string, std::string> show(const fs::path& dir) {
    const CommandResult r = cli("show " + shell_quote(dir.string()));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, std::string> facts;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      const size_t colon = line.find(": ");
      if (colon != std::string::npos) facts[line.substr(0, colon)] = line.substr(colon + 2);
    }
    return facts;
  }

  // {parameter count, MatMulNBits node count} as text.
  std::pair<std::string, std::string> python_counts(const fs::path& dir) {
    std::ofstream(local_.path() / "count.py") << kParameterScript;
    auto r = testing::run_command("/usr/bin/python3 " + shell_quote((local_.path() / "count.py").string()) + " " +
                                      shell_quote((dir / "model.onnx").string()),
                                  local_.path());
    EXPECT_TRUE(r.is_ok() && r->exit_code == 0) << (r.is_ok() ? r->err : r.status().message());
    std::istringstream lines(r.is_ok() ? r->out : "");
    std::pair<std::string, std::string> counts;
    std::getline(lines, counts.first);
    std::getline(lines, counts.second);
    return counts;
  }

  // Greedy reply text of the API to a chat history (kNewTokens tokens at most, eos ends it).
  std::string api_reply(const nlohmann::json& messages) {
    auto model = genai::Model::load(dir_.string());
    EXPECT_TRUE(model.is_ok()) << model.status().message();
    if (!model.is_ok()) return "";
    ChatRequest request;
    request.messages_json = messages.dump();
    request.add_generation_prompt = true;
    auto ids = (*model)->encode_chat(request);
    EXPECT_TRUE(ids.is_ok()) << ids.status().message();
    genai::GeneratorParams params = (*model)->default_params();
    params.sampling.greedy = true;
    params.max_new_tokens = kNewTokens;
    params.prompts = {*ids};
    auto generator = genai::Generator::create(**model, params);
    EXPECT_TRUE(generator.is_ok()) << generator.status().message();
    std::string text;
    if (generator.is_ok()) {
      EXPECT_TRUE((*generator)->generate([&](size_t, std::string_view piece) { text += piece; }).is_ok());
    }
    return text;
  }

  static testing::ScopedTempDir* scratch_;
  static fs::path dir_, int4_dir_;
  testing::ScopedTempDir local_;
};

testing::ScopedTempDir* CliCommands::scratch_ = nullptr;
fs::path CliCommands::dir_;
fs::path CliCommands::int4_dir_;

TEST_F(CliCommands, TokenizeIsTheTokenizers) {
  auto tokenizer = Tokenizer::load(dir_.string());
  ASSERT_TRUE(tokenizer.is_ok());
  const std::string text = "the old lion said </s> hi";
  auto ids = (*tokenizer)->encode(text);
  ASSERT_TRUE(ids.is_ok());
  EncodeOptions plain;
  plain.add_special_tokens = false;
  auto plain_ids = (*tokenizer)->encode(text, plain);
  ASSERT_TRUE(plain_ids.is_ok());
  std::string id_line, table;
  for (int32_t id : *ids) {
    id_line += (id_line.empty() ? "" : " ") + std::to_string(id);
    table += std::to_string(id) + "\t" + std::string((*tokenizer)->id_to_token(id)) + "\n";
  }
  std::string plain_line;
  for (int32_t id : *plain_ids) plain_line += (plain_line.empty() ? "" : " ") + std::to_string(id);
  const std::string model = "tokenize " + shell_quote(dir_.string());

  CommandResult r = cli(model + " --ids --text " + shell_quote(text));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, id_line + "\n");
  r = cli(model + " --text=" + shell_quote(text));
  EXPECT_EQ(r.out, table);
  r = cli(model + " --ids", text);  // piped
  EXPECT_EQ(r.out, id_line + "\n");
  r = cli(model + " --ids --no-special --text " + shell_quote(text));
  EXPECT_EQ(r.out, plain_line + "\n");

  std::string csv = id_line;
  std::replace(csv.begin(), csv.end(), ' ', ',');
  r = cli(model + " --decode " + csv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, *(*tokenizer)->decode(*ids) + "\n");
  DecodeOptions skip;
  skip.skip_special_tokens = true;
  r = cli(model + " --no-special --decode " + csv);
  EXPECT_EQ(r.out, *(*tokenizer)->decode(*ids, skip) + "\n");
  EXPECT_EQ(r.out, "the old lion said  hi\n");  // the special token is gone
}

TEST_F(CliCommands, ShowCountsMatchTheConfigAndTheFile) {
  for (const fs::path& dir : {dir_, int4_dir_}) {
    std::ifstream config_file(dir / "model_config.json");
    const nlohmann::json config = nlohmann::json::parse(config_file, nullptr, false);
    ASSERT_TRUE(config.is_object()) << dir;
    const int64_t heads = config["num_attention_heads"], hidden = config["hidden_size"];
    const int64_t head_dim = config["head_dim"].is_number() ? config["head_dim"].get<int64_t>() : hidden / heads;
    auto facts = show(dir);
    EXPECT_EQ(facts["model type"], config["model_type"].get<std::string>()) << dir;
    EXPECT_EQ(facts["layers"], std::to_string(config["num_hidden_layers"].get<int64_t>())) << dir;
    EXPECT_EQ(facts["hidden size"], std::to_string(hidden)) << dir;
    EXPECT_EQ(facts["heads"], std::to_string(heads)) << dir;
    EXPECT_EQ(facts["kv heads"], std::to_string(config["num_key_value_heads"].get<int64_t>())) << dir;
    EXPECT_EQ(facts["head dim"], std::to_string(head_dim)) << dir;
    EXPECT_EQ(facts["vocab"], std::to_string(kVocab)) << dir;
    EXPECT_EQ(facts["context length"], std::to_string(config["max_position_embeddings"].get<int64_t>())) << dir;
    const auto [parameters, quantized_nodes] = python_counts(dir);
    EXPECT_EQ(facts["parameters"], parameters) << dir;
    EXPECT_EQ(facts["quantization"], quantized_nodes == "0" ? "none"
                                                           : "MatMulNBits bits=4 block=32 accuracy_level=4 (" +
                                                                 quantized_nodes + " nodes)")
        << dir;
    EXPECT_EQ(facts["kv dtype"], "float32") << dir;
    EXPECT_EQ(facts["file bytes"], std::to_string(fs::file_size(dir / "model.onnx"))) << dir;
    EXPECT_NE(facts["ops"].find("GroupQueryAttention " + std::to_string(config["num_hidden_layers"].get<int64_t>())),
              std::string::npos)
        << facts["ops"];
  }
}

TEST_F(CliCommands, BenchJsonHasPositiveNumbers) {
  const CommandResult r =
      cli("bench " + shell_quote(dir_.string()) + " --prompt-len 12 --gen-len 6 --repeat 2 --threads 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << r.out;
  EXPECT_EQ(report["prompt_len"], 12);
  EXPECT_EQ(report["gen_len"], 6);
  for (const char* key :
       {"prefill_tok_s", "decode_tok_s", "ttft_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms", "peak_rss_mib"}) {
    ASSERT_TRUE(report.contains(key)) << key;
    EXPECT_GT(report[key].get<double>(), 0.0) << key;
  }
  EXPECT_LE(report["itl_p50_ms"].get<double>(), report["itl_p99_ms"].get<double>());
  const CommandResult table = cli("bench " + shell_quote(dir_.string()) + " --prompt-len 4 --gen-len 3 --repeat 1");
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("decode"), std::string::npos) << table.out;
  // Steps of 4 tokens (3 appended, one sampled): the step count and its rate, not the generator's
  // split into prefill and decode, which counts every multi-token run as prefill.
  const CommandResult verify =
      cli("bench " + shell_quote(dir_.string()) + " --prompt-len 8 --gen-len 5 --repeat 1 --step-tokens 4 --json");
  ASSERT_EQ(verify.exit_code, 0) << verify.err;
  const nlohmann::json steps = nlohmann::json::parse(verify.out, nullptr, false);
  ASSERT_TRUE(steps.is_object()) << verify.out;
  EXPECT_EQ(steps["step_tokens"], 4);
  EXPECT_GT(steps["decode_tok_s"].get<double>(), 0.0);
  EXPECT_NEAR(steps["decode_step_ms"].get<double>(), 1e3 / steps["decode_tok_s"].get<double>(), 1e-6);
}

TEST_F(CliCommands, BenchServeReportsEveryRequest) {
  const CommandResult r = cli("bench-serve " + shell_quote(dir_.string()) +
                              " --num-requests 6 --concurrency 3 --prompt-len 12 --gen-len 5 --threads 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << r.out;
  EXPECT_EQ(report["requests"], 6);
  EXPECT_TRUE(report["paged"].get<bool>());
  const double seconds = report["seconds"].get<double>();
  ASSERT_GT(seconds, 0.0);
  EXPECT_GT(report["output_tok_s"].get<double>(), 0.0);
  EXPECT_NEAR(report["request_s"].get<double>(), 6 / seconds, 1e-6);
  for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    const nlohmann::json& d = report[key];
    EXPECT_LE(d["p50"].get<double>(), d["p90"].get<double>()) << key;
    EXPECT_LE(d["p90"].get<double>(), d["p99"].get<double>()) << key;
    EXPECT_GE(d["p50"].get<double>(), 0.0) << key;
  }
  EXPECT_LE(report["e2e_ms"]["p99"].get<double>(), seconds * 1e3);
  EXPECT_GE(report["kv_waste"].get<double>(), 0.0);
  EXPECT_LT(report["kv_waste"].get<double>(), 1.0);
  // A shared prefix two blocks long is found cached by every request after the first.
  const CommandResult prefixed = cli("bench-serve " + shell_quote(dir_.string()) +
                                     " --num-requests 4 --concurrency 1 --prompt-len 8 --gen-len 3 --range 0"
                                     " --shared-prefix-len 40 --block-size 16 --threads 1 --json");
  ASSERT_EQ(prefixed.exit_code, 0) << prefixed.err;
  const nlohmann::json p = nlohmann::json::parse(prefixed.out, nullptr, false);
  ASSERT_TRUE(p.is_object()) << prefixed.out;
  EXPECT_EQ(p["cached_prompt_tokens"], 3 * 32);
  // Every request speculating with prompt lookup: the drafts are counted, none accepted beyond them.
  const CommandResult speculating = cli("bench-serve " + shell_quote(dir_.string()) +
                                        " --num-requests 4 --concurrency 2 --prompt-len 12 --gen-len 24 --threads 1"
                                        " --speculative ngram --draft-tokens 4 --json");
  ASSERT_EQ(speculating.exit_code, 0) << speculating.err;
  const nlohmann::json s = nlohmann::json::parse(speculating.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << speculating.out;
  EXPECT_EQ(s["requests"], 4);
  EXPECT_GT(s["drafted_tokens"].get<int64_t>(), 0);
  EXPECT_LE(s["accepted_tokens"].get<int64_t>(), s["drafted_tokens"].get<int64_t>());
  // A batch of one running request already stops the drafting.
  const CommandResult paused = cli("bench-serve " + shell_quote(dir_.string()) +
                                   " --num-requests 4 --concurrency 2 --prompt-len 12 --gen-len 24 --threads 1"
                                   " --speculative ngram --speculative-disable-by-batch-size 1 --json");
  ASSERT_EQ(paused.exit_code, 0) << paused.err;
  const nlohmann::json q = nlohmann::json::parse(paused.out, nullptr, false);
  ASSERT_TRUE(q.is_object()) << paused.out;
  EXPECT_EQ(q["drafted_tokens"], 0);
  // Every request under a JSON schema: ends where the schema lets it or at its length, each output
  // counted (records.json needs 24 records, far more than 6 tokens).
  const std::string schema = (fs::path(OG_SOURCE_DIR) / "bench/schemas/records.json").string();
  const CommandResult constrained = cli("bench-serve " + shell_quote(dir_.string()) +
                                        " --num-requests 4 --concurrency 2 --prompt-len 12 --gen-len 6 --range 0"
                                        " --threads 1 --json-schema " + shell_quote(schema) + " --json");
  ASSERT_EQ(constrained.exit_code, 0) << constrained.err;
  const nlohmann::json c = nlohmann::json::parse(constrained.out, nullptr, false);
  ASSERT_TRUE(c.is_object()) << constrained.out;
  EXPECT_EQ(c["requests"], 4);
  EXPECT_EQ(c["output_tokens"], 4 * 6);
}

TEST_F(CliCommands, RunAnswersOverAPipe) {
  const std::string run =
      "run " + shell_quote(dir_.string()) + " --greedy --max-new-tokens " + std::to_string(kNewTokens);
  const nlohmann::json first = {{{"role", "user"}, {"content", "hi there"}}};
  const std::string reply = api_reply(first);
  nlohmann::json second = first;
  second.push_back({{"role", "assistant"}, {"content", reply}});
  second.push_back({{"role", "user"}, {"content", "and then"}});
  const std::string follow_up = api_reply(second);

  CommandResult r = cli(run, "hi there\nand then\n/reset\nhi there\n/exit\nnever read\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, reply + "\n" + follow_up + "\n" + reply + "\n");

  const nlohmann::json with_system = {{{"role", "system"}, {"content", "be brief"}}, first[0]};
  r = cli(run, "/system be brief\nhi there\n/stats\n/help\n");  // ends at end of input
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with(api_reply(with_system) + "\nprompt ")) << r.out;
  EXPECT_NE(r.out.find("tokens generated"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/reset"), std::string::npos) << r.out;

  r = cli(run, "/bogus\n");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown command '/bogus'"), std::string::npos) << r.err;
}

TEST_F(CliCommands, BadInputExitsTwoWithOneLine) {
  const std::string model = shell_quote(dir_.string());
  const fs::path empty = local_.path() / "empty_model";
  fs::create_directory(empty);
  expect_bad_input("tokenize " + model + " --text hi --bogus", "unknown option '--bogus'");
  expect_bad_input("tokenize " + model + " --decode 1,x", "--decode wants an integer in [0, 2147483647], got 'x'");
  expect_bad_input("tokenize " + model + " --decode 5000", "5000");
  expect_bad_input("tokenize " + model + " --text", "--text needs a value");
  expect_bad_input("tokenize " + model + " --ids=yes --text hi", "--ids takes no value");
  expect_bad_input("tokenize " + shell_quote(empty.string()) + " --text hi", "tokenizer.json");
  expect_bad_input("show " + model + " extra", "unexpected argument 'extra'");
  expect_bad_input("show " + shell_quote(empty.string()), "no genai_config.json or config.json");
  expect_bad_input("bench " + model + " --repeat 0", "--repeat wants an integer in [1, 1000], got '0'");
  expect_bad_input("bench " + model + " --prompt-len 250 --gen-len 10", "exceeds the context length 256");
  expect_bad_input("bench " + model + " --step-tokens 17", "--step-tokens wants an integer in [1, 16], got '17'");
  expect_bad_input("bench " + model + " --prompt-len 100 --gen-len 20 --step-tokens 8",
                   "--prompt-len 100 + --gen-len 20 x --step-tokens 8 exceeds the context length 256");
  expect_bad_input("bench " + model + " --cuda-graphs maybe", "--cuda-graphs wants on or off, got 'maybe'");
  expect_bad_input("bench " + shell_quote(empty.string()), "no genai_config.json or config.json");
  expect_bad_input("bench-serve " + model + " --concurrency 0", "--concurrency wants an integer in [1, 65536], got '0'");
  expect_bad_input("bench-serve " + model + " --range 1.5", "--range wants a number in [0, 0.99], got '1.5'");
  expect_bad_input("bench-serve " + model + " --prompt-len 300 --range 0 --num-requests 1", "context holds 256");
  expect_bad_input("bench-serve " + model + " --url http://127.0.0.1:9 --speculative ngram",
                   "--speculative runs the engine in process; with --url the server decides");
  expect_bad_input("bench-serve " + model + " --speculative /no/such/draft", "--speculative draft model");
  expect_bad_input("bench-serve " + model + " --json-schema /no/such/schema.json", "--json-schema: cannot open '/no/such/schema.json'");
  expect_bad_input("bench-serve " + model + " --url http://127.0.0.1:9 --json-schema /dev/null",
                   "--json-schema constrains the engine in process, not --url");
  expect_bad_input("run " + model + " --bogus", "unknown option '--bogus'");
  expect_bad_input("run " + shell_quote(int4_dir_.string()), "has no tokenizer.json");
}

}  // namespace
}  // namespace onnx_genai
