// Helpers for the generation tests: fixture models built at test time with tools/build_model.py,
// greedy decodes of them in ONNX Runtime (tests/oracle/ort_decode.mjs), and a small byte-level
// BPE tokenizer.json for models whose vocabulary it covers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "onnx_genai/genai.h"
#include "runtime/model_parity.h"

namespace onnx_genai::testing {

// Runs the onnx-genai binary (OG_CLI_PATH) with `args` in `cwd`, feeding `stdin_text` on stdin
// (or /dev/null when empty).
inline CommandResult run_cli(const std::string& args, const std::string& stdin_text, const std::filesystem::path& cwd) {
  const std::string command = shell_quote(OG_CLI_PATH) + " " + args;
  auto result = run_command(
      stdin_text.empty() ? command + " </dev/null" : "printf '%s' " + shell_quote(stdin_text) + " | " + command, cwd);
  EXPECT_TRUE(result.is_ok()) << result.status().message();
  return result.is_ok() ? *result : CommandResult{};
}

// A bad-input run: exit code 2, nothing on stdout, one line on stderr naming `needle`.
inline void expect_bad_input_result(const CommandResult& r, const std::string& args, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << args << " -> " << r.err;
  EXPECT_EQ(r.out, "") << args;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << " -> " << r.err;
  EXPECT_TRUE(r.err.starts_with("onnx-genai: ")) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << args << " -> " << r.err << " (wanted '" << needle << "')";
}

// Builds `fixture` (its builder args) into scratch/fixture.name; fails the test on error.
inline std::filesystem::path build_model_or_fail(const ParityFixture& fixture, const std::filesystem::path& scratch) {
  std::printf("[ builder  ] %s\n", builder_command(fixture, "OUT").c_str());
  auto dir = build_fixture_model(fixture, scratch);
  EXPECT_TRUE(dir.is_ok()) << dir.status().message();
  return dir.is_ok() ? *dir : std::filesystem::path();
}

// ONNX Runtime's greedy tokens: the first `count` picks of every prompt, as int32 rows.
inline Result<std::vector<std::vector<int32_t>>> ort_greedy_tokens(const std::filesystem::path& model_dir,
                                                                   ParityFixture fixture, int count,
                                                                   const std::filesystem::path& scratch) {
  fixture.steps = count - 1;  // the prefill picks the first token
  OG_ASSIGN_OR_RETURN(DecodeTrace trace, run_ort_decode(model_dir, fixture, scratch));
  const Tensor& generated = trace.generated;
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(generated.shape()[0]));
  for (size_t b = 0; b < rows.size(); ++b) {
    for (int64_t k = 0; k < generated.shape()[1]; ++k) {
      rows[b].push_back(static_cast<int32_t>(generated.data<int64_t>()[static_cast<int64_t>(b) * generated.shape()[1] + k]));
    }
  }
  return rows;
}

inline std::vector<std::vector<int32_t>> to_int32(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& row : rows) out.emplace_back(row.begin(), row.end());
  return out;
}

// Greedy generation through the API: `count` new tokens per prompt, eos ignored (ONNX Runtime's
// loop does not stop either). Returns the generated tokens of each sequence.
inline Result<std::vector<std::vector<int32_t>>> generate_greedy(const genai::Model& model,
                                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                                 int count, int64_t prefill_chunk = 0) {
  genai::GeneratorParams params;
  params.sampling.greedy = true;
  params.ignore_eos = true;
  params.max_new_tokens = count;
  params.prefill_chunk = prefill_chunk;
  params.prompts = prompts;
  OG_ASSIGN_OR_RETURN(auto generator, genai::Generator::create(model, params));
  OG_RETURN_IF_ERROR(generator->generate(nullptr));
  std::vector<std::vector<int32_t>> out;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const auto tokens = generator->tokens(b);
    out.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(generator->prompt_length(b)), tokens.end());
  }
  return out;
}

// GPT-2's byte -> printable character table (what byte-level BPE vocabularies are written in).
inline std::vector<std::string> byte_level_alphabet() {
  std::vector<int> printable;
  for (int b = 0; b < 256; ++b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) printable.push_back(b);
  }
  std::vector<std::string> alphabet(256);
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool kept = std::find(printable.begin(), printable.end(), b) != printable.end();
    const char32_t cp = kept ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
    std::string utf8;
    if (cp < 0x80) {
      utf8 += static_cast<char>(cp);
    } else {
      utf8 += static_cast<char>(0xC0 | (cp >> 6));
      utf8 += static_cast<char>(0x80 | (cp & 0x3F));
    }
    alphabet[static_cast<size_t>(b)] = utf8;
  }
  return alphabet;
}

// Writes dir/tokenizer.json and dir/tokenizer_config.json: a byte-level BPE with <pad>=0, <s>=1,
// </s>=2 (special), the 256 bytes at 3..258, then letter-pair merges up to `vocab_size` ids, and
// a small chat template. Every id below vocab_size decodes.
inline void write_test_tokenizer(const std::filesystem::path& dir, int vocab_size) {
  const std::vector<std::string> alphabet = byte_level_alphabet();
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  vocab["<pad>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  for (int b = 0; b < 256; ++b) vocab[alphabet[static_cast<size_t>(b)]] = 3 + b;
  nlohmann::json merges = nlohmann::json::array();
  const std::string letters = "etaoinshrd lu";
  for (char a : letters) {
    for (char c : letters) {
      const std::string left = alphabet[static_cast<unsigned char>(a)], right = alphabet[static_cast<unsigned char>(c)];
      if (static_cast<int>(vocab.size()) >= vocab_size || vocab.contains(left + right)) continue;
      merges.push_back(left + " " + right);
      const size_t id = vocab.size();
      vocab[left + right] = id;
    }
  }
  nlohmann::json added = nlohmann::json::array();
  for (const auto& [content, id] : {std::pair{"<pad>", 0}, std::pair{"<s>", 1}, std::pair{"</s>", 2}}) {
    added.push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  }
  const nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                                     {"use_regex", true}};
  nlohmann::ordered_json tokenizer = {
      {"version", "1.0"}, {"added_tokens", added}, {"normalizer", nullptr}, {"pre_tokenizer", byte_level},
      {"post_processor", nullptr}, {"decoder", byte_level},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"fuse_unk", false},
                 {"byte_fallback", false}, {"vocab", vocab}, {"merges", merges}}}};
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
  const nlohmann::json config = {
      {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"pad_token", "<pad>"},
      {"chat_template", "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
                        "{% if add_generation_prompt %}<|assistant|>{% endif %}"}};
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
}

// build_model_or_fail, then write_test_tokenizer's files beside the model.
inline std::filesystem::path build_model_with_test_tokenizer(const ParityFixture& fixture,
                                                             const std::filesystem::path& scratch, int vocab_size) {
  std::filesystem::path dir = build_model_or_fail(fixture, scratch);
  if (!dir.empty()) write_test_tokenizer(dir, vocab_size);
  return dir;
}

// One sequence generated to the end: its tokens (prompt included), streamed text, finish reason
// and stats.
struct GenerationOutcome {
  std::vector<int32_t> tokens;
  std::string text;
  genai::FinishReason reason = genai::FinishReason::kNone;
  genai::GenerationStats stats;
};

inline GenerationOutcome generate(const genai::Model& model, const genai::GeneratorParams& params) {
  GenerationOutcome run;
  auto g = genai::Generator::create(model, params);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  if (!g.is_ok()) return run;
  const Status status = (*g)->generate([&](size_t, std::string_view piece) { run.text += piece; });
  EXPECT_TRUE(status.is_ok()) << status.message();
  const std::span<const int32_t> tokens = (*g)->tokens(0);
  run.tokens.assign(tokens.begin(), tokens.end());
  run.reason = (*g)->finish_reason(0);
  run.stats = (*g)->stats();
  return run;
}

}  // namespace onnx_genai::testing
