// Soundness against an independent validator: random token walks under each schema of the
// corpus (tests/constraints/schema_corpus.json, draft 2020-12) and of the JSON-Schema-Test-Suite
// schemas the engine supports (draft-07), over qwen3's real 151k vocabulary, each step taking a
// token the mask allows, until the stop token. Every finished text must parse and validate under
// python3-jsonschema (with its format checker), run by tests/constraints/validate_outputs.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "constraint_test_util.h"

namespace onnx_genai::testing {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Instrumented, a walk costs ~10x (each step scans a 152k-token mask): fewer under the sanitizers.
#ifdef __SANITIZE_ADDRESS__
constexpr int kWalksPerSchema = 2;
#else
constexpr int kWalksPerSchema = 6;
#endif
constexpr int kMaxTokens = 400;

// One walk: half the steps take any allowed token, half an allowed single-byte token (so that
// strings and arrays close within the budget). Empty when the budget runs out first.
std::optional<std::string> walk(const std::shared_ptr<CompiledConstraint>& compiled, const TestVocabulary& v,
                                std::mt19937_64& rng) {
  ConstraintMatcher m(compiled);
  std::vector<uint64_t> mask(m.mask_words());
  std::string text;
  std::vector<int32_t> any, short_ones;
  for (int step = 0; step < kMaxTokens; ++step) {
    EXPECT_TRUE(m.compute_mask(mask).is_ok());
    if (mask_has(mask, v.eos) && rng() % 3 == 0) return text;
    any.clear();
    short_ones.clear();
    for (size_t w = 0; w < mask.size(); ++w) {
      for (uint64_t bits = mask[w]; bits; bits &= bits - 1) {
        const auto id = static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
        if (id == v.eos) continue;
        any.push_back(id);
        if (v.vocabulary->token_bytes(id).size() == 1) short_ones.push_back(id);
      }
    }
    if (any.empty()) return mask_has(mask, v.eos) ? std::optional<std::string>(text) : std::nullopt;
    const std::vector<int32_t>& pool = (rng() % 2 && !short_ones.empty()) ? short_ones : any;
    const int32_t id = pool[rng() % pool.size()];
    EXPECT_TRUE(m.accept_token(id).is_ok());
    text += v.vocabulary->token_bytes(id);
  }
  return std::nullopt;
}

std::vector<std::pair<OrderedJson, std::string>> schemas() {
  std::vector<std::pair<OrderedJson, std::string>> out;
  std::ifstream corpus(OG_SOURCE_DIR "/tests/constraints/schema_corpus.json");
  for (const auto& entry : OrderedJson::parse(corpus)) out.emplace_back(entry["schema"], "2020-12");
  for (const auto& file : std::filesystem::directory_iterator(OG_JSON_SCHEMA_SUITE_DIR "/draft7")) {
    if (file.path().extension() != ".json") continue;
    std::ifstream in(file.path());
    for (const auto& group : OrderedJson::parse(in)) {
      OrderedJson schema = group["schema"];
      if (schema.is_object()) schema["$schema"] = "http://json-schema.org/draft-07/schema#";
      out.emplace_back(schema, "7");
    }
  }
  return out;
}

TEST(GeneratedOutputs, ValidateUnderPythonJsonschema) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  const std::filesystem::path out = std::filesystem::temp_directory_path() / ("og_constraint_outputs_" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream lines(out);
  std::mt19937_64 rng(2026);
  int compiled_count = 0, finished = 0, walks = 0;
  for (const auto& [schema, draft] : schemas()) {
    auto compiled = CompiledConstraint::compile({ConstraintKind::kJsonSchema, schema.dump()}, v.vocabulary);
    // The corpus holds only schemas the engine supports; the suite's it may refuse.
    if (draft == "2020-12") {
      EXPECT_TRUE(compiled && !(*compiled)->matches_nothing()) << schema.dump() << ": " << compiled.status().message();
    }
    if (!compiled || (*compiled)->matches_nothing()) continue;
    ++compiled_count;
    for (int k = 0; k < kWalksPerSchema; ++k, ++walks) {
      const std::optional<std::string> text = walk(*compiled, v, rng);
      if (!text) continue;
      ++finished;
      lines << OrderedJson{{"schema", schema}, {"draft", draft}, {"text", *text}}.dump(-1, ' ', false,
                                                                                       OrderedJson::error_handler_t::replace)
            << "\n";
    }
  }
  lines.close();
  std::cout << "schemas " << compiled_count << ", walks " << walks << ", finished " << finished << "\n";
  EXPECT_GT(finished, walks / 2) << "most walks should finish within " << kMaxTokens << " tokens";
  const auto [status, report] = run_checker("validate_outputs.py", out.string());
  EXPECT_EQ(status, 0) << report;
  EXPECT_NE(report.find("validated " + std::to_string(finished) + " texts, 0 failed"), std::string::npos) << report;
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace onnx_genai::testing
