// The JSON-Schema-Test-Suite (Debian's json-schema-test-suite, draft-07 and the optional format
// tests of the formats the engine knows) against the constraint engine.
//
// For every schema the engine compiles, every test instance is serialized compactly and pretty
// printed, fed byte by byte and token by token (qwen3's byte-level BPE and llama2's SentencePiece
// with byte fallback), and must be accepted exactly when the suite says it is valid. Token and
// byte answers must always agree. A schema the engine refuses must be refused with a message
// naming what (an error value, never a looser grammar).
//
// Accepting an invalid instance is a soundness bug and fails the test. Refusing a valid one is
// a known gap (members in another order than the schema's past kMaxAnyOrderProperties, 1.0 for
// an integer, escapes the grammar does not spell): counted, and together with the schemas
// supported held to tests/constraints/coverage_ratchet.json, which may only rise.
// OG_SUITE_VERBOSE=1 lists each refused schema with its error and each refused valid instance.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "constraint_test_util.h"

namespace onnx_genai::testing {
namespace {

using OrderedJson = nlohmann::ordered_json;

struct Coverage {
  int schemas_total = 0, schemas_supported = 0;
  int instances_total = 0, instances_agreeing = 0;
  int valid_rejected = 0, invalid_accepted = 0;
  int token_spellings = 0, canonical_spellings = 0;
};

std::vector<std::string> suite_files() {
  const std::string root = OG_JSON_SCHEMA_SUITE_DIR "/draft7";
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  }
  for (const char* format : {"date", "date-time", "time", "email", "uri"}) {
    files.push_back(root + "/optional/format/" + format + ".json");
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::shared_ptr<CompiledConstraint> compile(const OrderedJson& schema, const TestVocabulary& v, std::string& error) {
  OrderedJson with_draft = schema;
  if (with_draft.is_object() && !with_draft.contains("$schema")) {
    with_draft["$schema"] = "http://json-schema.org/draft-07/schema#";
  }
  auto compiled = CompiledConstraint::compile({ConstraintKind::kJsonSchema, with_draft.dump()}, v.vocabulary);
  if (!compiled) {
    error = compiled.status().message();
    return nullptr;
  }
  return *compiled;
}

// Whether `text` is accepted, after checking that bytes and both tokenizers agree on it.
bool accepted(const std::vector<std::shared_ptr<CompiledConstraint>>& compiled,
              const std::vector<const TestVocabulary*>& vocabularies, const std::string& text, Coverage& coverage,
              const std::string& where) {
  const bool by_bytes = accepts_bytes(compiled[0], text);
  for (size_t k = 0; k < compiled.size(); ++k) {
    bool canonical = false;
    const std::vector<int32_t> ids = spell(*vocabularies[k], text, &canonical);
    if (ids.empty() && !text.empty()) continue;  // a byte no token of this vocabulary spells
    ++coverage.token_spellings;
    coverage.canonical_spellings += canonical;
    EXPECT_EQ(accepts_tokens(compiled[k], ids, vocabularies[k]->eos), by_bytes) << where << ": " << text;
  }
  return by_bytes;
}

TEST(JsonSchemaSuite, Draft7AgreesWithTheSuiteAndTheRatchet) {
  const std::vector<const TestVocabulary*> vocabularies = {&test_vocabulary("qwen3"), &test_vocabulary("llama2")};
  Coverage c;
  for (const std::string& file : suite_files()) {
    std::ifstream in(file);
    const OrderedJson groups = OrderedJson::parse(in);
    for (const auto& group : groups) {
      ++c.schemas_total;
      const std::string where = std::filesystem::path(file).filename().string() + ": " + group["description"].get<std::string>();
      std::vector<std::shared_ptr<CompiledConstraint>> compiled;
      std::string error;
      for (const TestVocabulary* v : vocabularies) compiled.push_back(compile(group["schema"], *v, error));
      if (!compiled[0]) {
        EXPECT_TRUE(compiled[1] == nullptr) << where;
        EXPECT_NE(error.find("json schema: "), std::string::npos) << where << ": " << error;
        if (getenv("OG_SUITE_VERBOSE")) std::cout << "unsupported: " << where << ": " << error << "\n";
        c.instances_total += static_cast<int>(group["tests"].size());
        continue;
      }
      ++c.schemas_supported;
      for (const auto& test : group["tests"]) {
        ++c.instances_total;
        const bool valid = test["valid"].get<bool>();
        const std::string label = where + " / " + test["description"].get<std::string>();
        const bool compact = accepted(compiled, vocabularies, test["data"].dump(), c, label);
        const bool pretty = accepted(compiled, vocabularies, test["data"].dump(2), c, label);
        if (!valid) {
          EXPECT_FALSE(compact || pretty) << "invalid instance accepted: " << label << ": " << test["data"].dump();
        }
        c.instances_agreeing += compact == valid && pretty == valid;
        c.valid_rejected += valid && !(compact && pretty);
        if (getenv("OG_SUITE_VERBOSE") && valid && !(compact && pretty)) std::cout << "valid rejected: " << label << ": " << test["data"].dump() << "\n";
        c.invalid_accepted += !valid && (compact || pretty);
      }
    }
  }
  std::cout << "draft-07 coverage: schemas supported " << c.schemas_supported << " / " << c.schemas_total
            << ", instances agreeing " << c.instances_agreeing << " / " << c.instances_total << " (valid rejected "
            << c.valid_rejected << ", invalid accepted " << c.invalid_accepted << "); token spellings "
            << c.token_spellings << ", canonical " << c.canonical_spellings << "\n";
  std::ifstream ratchet_file(OG_SOURCE_DIR "/tests/constraints/coverage_ratchet.json");
  ASSERT_TRUE(ratchet_file.good()) << "tests/constraints/coverage_ratchet.json is missing";
  const OrderedJson ratchet = OrderedJson::parse(ratchet_file)["draft7"];
  EXPECT_EQ(c.schemas_total, ratchet["schemas_total"].get<int>()) << "the suite changed: update the ratchet";
  EXPECT_GE(c.schemas_supported, ratchet["schemas_supported"].get<int>()) << "fewer schemas supported than the ratchet";
  EXPECT_GE(c.instances_agreeing, ratchet["instances_agreeing"].get<int>()) << "fewer instances agree than the ratchet";
  EXPECT_EQ(c.invalid_accepted, 0);
}

}  // namespace
}  // namespace onnx_genai::testing
