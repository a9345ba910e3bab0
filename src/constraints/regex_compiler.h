// ECMAScript regular expressions (the subset below) compiled to grammar rules.
//
// Supported: literals and escapes (\t \n \r \f \v \0 \xHH \uHHHH \cX, escaped syntax characters),
// the classes \d \D \w \W \s \S and '.', bracket classes with ranges and negation, groups
// ((...), (?:...), (?<name>...)), alternation, the quantifiers * + ? {n} {n,} {n,m} (lazy or not:
// the language is the same), and ^ / $ at the start / end of a top-level alternative.
// Refused with the construct and its offset: lookaround, backreferences, \b \B, \p{...}, flags,
// anchors elsewhere, and repeat counts above kMaxRepeat.
#pragma once

#include <string_view>

#include "constraints/char_class.h"
#include "constraints/grammar.h"

namespace onnx_genai::constraints {

// How the pattern reads: ECMAScript (JSON Schema's "pattern", --regex), or the /.../ literals of
// a Lark grammar, which Lark reads with Python's re and llguidance with Rust's regex. Where those
// two agree the Lark dialect follows them: '.' excludes only '\n', \d and \s are Unicode
// (\s as White_Space, Rust's; Python adds U+001C..U+001F), ']' first in a class is literal.
// Where they differ or the construct changes a lexer's match (\w, anchors, lazy quantifiers,
// nested classes, a '{' that is not a repeat) it is refused.
enum class RegexDialect { kEcmaScript, kLark };

struct RegexOptions {
  TextEncoding encoding = TextEncoding::kUtf8;
  // JSON Schema "pattern" semantics: the regex may match anywhere in the text unless anchored
  // (an unanchored side gets any characters). Otherwise the whole text must match.
  bool search = false;
  RegexDialect dialect = RegexDialect::kEcmaScript;
  bool dot_all = false;  // '.' matches '\n' too (the s flag)
};

inline constexpr int64_t kMaxRepeat = 10000;

// A rule matching the strings `pattern` describes.
Result<int32_t> add_regex(GrammarBuilder& g, std::string_view pattern, const RegexOptions& options);

// A grammar whose sentences are exactly the UTF-8 texts `pattern` matches in full.
Result<Grammar> compile_regex(std::string_view pattern);

}  // namespace onnx_genai::constraints
