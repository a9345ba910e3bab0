#include "genai/json_fields.h"

#include <limits>

#include "core/file_reader.h"

namespace onnx_genai::genai {

namespace {

// nlohmann's DOM builder, keeping the parse error's message instead of throwing it.
class CapturingParser : public nlohmann::detail::json_sax_dom_parser<Json> {
 public:
  explicit CapturingParser(Json& result) : json_sax_dom_parser(result, /*allow_exceptions=*/false) {}
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) {
    message = error.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> from "parse error".
    if (const size_t start = message.find("] "); start != std::string::npos) message.erase(0, start + 2);
    return false;
  }
  std::string message;
};

std::string shown(const Json& value) {
  std::string text = value.dump();
  constexpr size_t kMaxShown = 40;
  return text.size() > kMaxShown ? text.substr(0, kMaxShown) + "..." : text;
}

}  // namespace

Result<Json> read_json_object(const std::filesystem::path& path) {
  OG_ASSIGN_OR_RETURN(const std::string content, read_file(path.string()));
  Json json;
  CapturingParser parser(json);
  if (!Json::sax_parse(content, &parser) || json.is_discarded()) {
    return OG_ERROR(path.string(), ": not valid JSON (", parser.message.empty() ? "parse error" : parser.message, ")");
  }
  if (!json.is_object()) return OG_ERROR(path.string(), ": expected a JSON object, got ", json.type_name());
  return json;
}

const Json* JsonFields::find(const char* key) const {
  const auto it = object_.find(key);
  return it == object_.end() || it->is_null() ? nullptr : &*it;
}

Status JsonFields::wrong_type(const char* key, const char* wanted) const {
  return OG_ERROR(where_, key, " must be ", wanted, ", got ", shown(object_.at(key)));
}

Result<std::optional<int64_t>> JsonFields::integer(const char* key) const {
  const Json* value = find(key);
  if (value == nullptr) return std::optional<int64_t>();
  if (!value->is_number_integer()) return wrong_type(key, "an integer");
  if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return wrong_type(key, "an integer that fits 64 bits");
  }
  return std::optional<int64_t>(value->get<int64_t>());
}

Result<std::optional<int64_t>> JsonFields::integer(const char* key, int64_t min) const {
  OG_ASSIGN_OR_RETURN(std::optional<int64_t> value, integer(key));
  if (value && *value < min) return wrong_type(key, ("an integer >= " + std::to_string(min)).c_str());
  return value;
}

Result<std::optional<double>> JsonFields::number(const char* key) const {
  const Json* value = find(key);
  if (value == nullptr) return std::optional<double>();
  if (!value->is_number()) return wrong_type(key, "a number");
  return std::optional<double>(value->get<double>());
}

Result<std::optional<bool>> JsonFields::boolean(const char* key) const {
  const Json* value = find(key);
  if (value == nullptr) return std::optional<bool>();
  if (!value->is_boolean()) return wrong_type(key, "true or false");
  return std::optional<bool>(value->get<bool>());
}

Result<std::optional<std::string>> JsonFields::string(const char* key) const {
  const Json* value = find(key);
  if (value == nullptr) return std::optional<std::string>();
  if (!value->is_string()) return wrong_type(key, "a string");
  return std::optional<std::string>(value->get<std::string>());
}

Result<const Json*> JsonFields::object(const char* key) const {
  const Json* value = find(key);
  if (value != nullptr && !value->is_object()) return wrong_type(key, "an object");
  return value;
}

Result<JsonFields> JsonFields::nested(const char* key) const {
  static const Json kEmpty = Json::object();
  OG_ASSIGN_OR_RETURN(const Json* value, object(key));
  return JsonFields(value != nullptr ? *value : kEmpty, where_ + key + ".");
}

Result<std::vector<int32_t>> JsonFields::token_ids(const char* key, std::optional<int64_t> vocab_size) const {
  const Json* value = find(key);
  std::vector<int32_t> ids;
  if (value == nullptr) return ids;
  const int64_t end = vocab_size.value_or(int64_t{std::numeric_limits<int32_t>::max()} + 1);
  const auto valid = [end](const Json& id) {
    return id.is_number_integer() && !(id.is_number_unsigned() && id.get<uint64_t>() >= static_cast<uint64_t>(end)) &&
           id.get<int64_t>() >= 0 && id.get<int64_t>() < end;
  };
  const std::string wanted = "a token id or a list of token ids in [0, " + std::to_string(end) + ")" +
                             (vocab_size ? " (below vocab_size)" : "");
  if (valid(*value)) return std::vector<int32_t>{value->get<int32_t>()};
  if (!value->is_array()) return wrong_type(key, wanted.c_str());
  for (const Json& id : *value) {
    if (!valid(id)) return wrong_type(key, wanted.c_str());
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

}  // namespace onnx_genai::genai
