// Sets of Unicode code points, and the grammar rules that match one of them as bytes: raw UTF-8,
// or a character inside a JSON string literal (where '"', '\' and control characters must be
// escaped, and any character may be written as a \u escape).
#pragma once

#include <cstdint>
#include <vector>

#include "constraints/grammar.h"
#include "tokenizer/unicode.h"

namespace onnx_genai::constraints {

struct CodepointRange {
  char32_t lo;
  char32_t hi;
};

class CharClass {
 public:
  static constexpr char32_t kMaxCodepoint = 0x10FFFF;

  void add(char32_t lo, char32_t hi) { ranges_.push_back({lo, hi}); }
  void add(char32_t c) { add(c, c); }
  void add(const CharClass& other) { ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end()); }
  // Sorted, disjoint, non-adjacent ranges.
  std::vector<CodepointRange> normalized() const;
  // Every scalar value (surrogates excluded) not in this class.
  CharClass negated() const;
  bool empty() const { return normalized().empty(); }

 private:
  std::vector<CodepointRange> ranges_;
};

enum class TextEncoding {
  kUtf8,        // the characters' UTF-8 bytes
  kJsonString,  // inside a JSON string literal: escapes where required, \uXXXX for BMP controls
};

// A rule matching one character of `set`. Surrogate code points are never matched: they have no
// UTF-8 form, and a JSON string's \uD800-style escapes are left out for the same reason.
int32_t char_class_rule(GrammarBuilder& g, const CharClass& set, TextEncoding encoding);

// UTF-8 bytes of a code point: the tokenizer's.
using unicode::append_utf8;

}  // namespace onnx_genai::constraints
