// PCRE2 (UTF + UCP, JIT) behind a small interface, plus the translation of tokenizer.json's
// Oniguruma patterns into the dialect Hugging Face's JavaScript tokenizers actually match with.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai::tokenizer {

// Character-class bodies shared by several components.
// JavaScript's \s (White_Space without U+0085, plus U+FEFF).
inline constexpr const char* kJsSpaceClass =
    "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}\\x{FEFF}";
// The Unicode White_Space property (what tokenizer.json patterns mean by \s).
inline constexpr const char* kWhiteSpaceClass =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

struct Match {
  size_t begin;
  size_t end;
};

class Regex {
 public:
  // `pattern` is PCRE2 syntax; it is matched over UTF-8 with Unicode properties.
  static Result<Regex> compile(std::string_view pattern);
  // `pattern` is a tokenizer.json "Regex" (Oniguruma syntax), rewritten as Hugging Face's
  // JavaScript tokenizers rewrite it: \s is White_Space, (?i:...) folds ASCII letters only,
  // possessive quantifiers and atomic groups lose their possessiveness.
  static Result<Regex> compile_oniguruma(std::string_view pattern);
  // Matches `text` literally.
  static Result<Regex> literal(std::string_view text);

  // All non-overlapping matches left to right, JavaScript matchAll semantics: after an empty
  // match the search resumes one code point later. Empty matches are reported too.
  Status find_all(std::string_view text, std::vector<Match>& matches) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  std::string pattern_;
};

// Exposed for tests: the PCRE2 pattern compile_oniguruma builds from an Oniguruma one.
Result<std::string> translate_oniguruma(std::string_view pattern);

}  // namespace onnx_genai::tokenizer
