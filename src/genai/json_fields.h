// Reading config JSON files with errors that name the file and the key: a missing or null key is
// "unset", a key of the wrong type is an error ("genai_config.json: model.decoder.head_size must
// be an integer, got \"abc\"").
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai::genai {

using Json = nlohmann::json;

// The file parsed as a JSON object; errors name the file and, for syntax errors, where.
Result<Json> read_json_object(const std::filesystem::path& path);

// Typed access to one JSON object; `where` prefixes messages ("/m/config.json: text_config.").
class JsonFields {
 public:
  JsonFields(const Json& object, std::string where) : object_(object), where_(std::move(where)) {}

  Result<std::optional<int64_t>> integer(const char* key) const;
  // An integer >= `min` (sizes, counts and lengths: one below is an error, not "unset").
  Result<std::optional<int64_t>> integer(const char* key, int64_t min) const;
  Result<std::optional<double>> number(const char* key) const;
  Result<std::optional<bool>> boolean(const char* key) const;
  Result<std::optional<std::string>> string(const char* key) const;
  // A nested object, or null when the key is absent.
  Result<const Json*> object(const char* key) const;
  // Fields of the nested object `key` (an empty object when absent).
  Result<JsonFields> nested(const char* key) const;
  // A token id or a list of them (eos_token_id), each below `vocab_size` when given; empty when unset.
  Result<std::vector<int32_t>> token_ids(const char* key, std::optional<int64_t> vocab_size = {}) const;

 private:
  const Json* find(const char* key) const;
  Status wrong_type(const char* key, const char* wanted) const;

  const Json& object_;
  std::string where_;
};

}  // namespace onnx_genai::genai
