// Helpers shared by the component factories.
#include "tokenizer/components.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace onnx_genai::tokenizer {

Result<std::string> json_string(const Json& config, const char* key, const char* component) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_string()) {
    return OG_ERROR(component, ": missing string field \"", key, "\"");
  }
  return it->get<std::string>();
}

std::string json_string_or(const Json& config, const char* key, std::string fallback) {
  auto it = config.find(key);
  return (it != config.end() && it->is_string()) ? it->get<std::string>() : fallback;
}

bool json_bool_or(const Json& config, const char* key, bool fallback) {
  auto it = config.find(key);
  return (it != config.end() && it->is_boolean()) ? it->get<bool>() : fallback;
}

Result<Regex> compile_pattern(const Json& pattern, const char* component) {
  if (pattern.is_object()) {
    if (auto it = pattern.find("String"); it != pattern.end() && it->is_string()) {
      return Regex::literal(it->get<std::string>());
    }
    if (auto it = pattern.find("Regex"); it != pattern.end() && it->is_string()) {
      auto regex = Regex::compile_oniguruma(it->get<std::string>());
      if (!regex) return regex.status().with_context(component);
      return regex;
    }
  }
  return OG_ERROR(component, ": pattern must be {\"String\": ...} or {\"Regex\": ...}, got ", pattern.dump());
}

std::string_view js_trim_start(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    if (!unicode::is_js_space(unicode::next_code_point(s, next))) break;
    i = next;
  }
  return s.substr(i);
}

std::string_view js_trim_end(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
    size_t probe = start;
    if (!unicode::is_js_space(unicode::next_code_point(s, probe))) break;
    end = start;
  }
  return s.substr(0, end);
}

}  // namespace onnx_genai::tokenizer
