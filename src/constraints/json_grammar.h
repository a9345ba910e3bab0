// Grammar rules for JSON text (RFC 8259): whitespace, strings, numbers, integer ranges, any
// value, and one given value. The schema compiler (json_schema.h) assembles these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "constraints/char_class.h"
#include "constraints/grammar.h"

namespace onnx_genai::constraints {

using OrderedJson = nlohmann::ordered_json;

class JsonGrammar {
 public:
  // Whitespace between tokens is bounded so a model cannot spend its whole budget on it; this
  // still fits pretty-printed JSON nested a dozen levels deep at two spaces.
  static constexpr int64_t kMaxWhitespace = 32;

  // `compact`: whitespace between tokens is at most one space.
  JsonGrammar(GrammarBuilder& g, bool compact) : g_(g), compact_(compact) {}

  Symbol ws();
  Symbol any_value();
  Symbol any_object();
  Symbol any_string() { return string(0, -1); }
  // A string literal of min..max characters (max < 0: unbounded). A character is a raw UTF-8
  // scalar value or one escape; \u escapes of surrogates are left out, so every escape is one
  // code point and the count is exact.
  Symbol string(int64_t min_chars, int64_t max_chars);
  // One character inside a string, raw (no escapes) and not among `excluded` code points.
  Symbol raw_string_char(const CharClass& excluded);
  Symbol number();
  // Integers in [lo, hi] (either side open when unset), written canonically (no leading zeros,
  // no "-0").
  Symbol integer(std::optional<int64_t> lo, std::optional<int64_t> hi);
  // A decimal number: its sign, integer digits without leading zeros ("0" for zero) and fraction
  // digits without trailing zeros (empty for an integer). Zero is not negative.
  struct Decimal {
    bool negative = false;
    std::string integer = "0";
    std::string fraction;
  };
  // Numbers lo <= x <= hi (either side open when unset; lo <= hi), compared as exact decimals,
  // written without an exponent (-?I(.F)?, the fraction any length) and never as "-0".
  Symbol number_range(const std::optional<Decimal>& lo, const std::optional<Decimal>& hi);
  // Numbers written -?I(.F)? with at most `fraction_digits` digits in F whose value is a multiple
  // of step / 10^fraction_digits (step > 0), I of at most `max_integer_digits` digits (<= 0: any
  // number); exponent forms are left out.
  Symbol multiple_of(uint64_t step, int fraction_digits, int max_integer_digits);
  // Numbers that are not integers, written with few enough digits that a double keeps them so:
  // a fraction with a non-zero digit, no exponent.
  Symbol non_integer();
  // Exactly `value`: its members in the given order, whitespace allowed between tokens; a float
  // with an integral value may also be written as that integer.
  Symbol value(const OrderedJson& value);
  // A string literal spelling `text` (characters that must be escaped in their usual escapes).
  Symbol string_literal(const std::string& text);

  GrammarBuilder& builder() { return g_; }

 private:
  Symbol string_char();
  // Integers lo..hi (digit strings without leading zeros; hi unset: unbounded).
  int32_t unsigned_range(const std::string& lo, const std::optional<std::string>& hi);
  int32_t digits_between(const std::string& lo, const std::string& hi);
  // Non-negative I(.F)? with lo <= value <= hi (lo < value when lo_strict; hi unset: no upper
  // bound); the signs of lo and hi are ignored.
  int32_t unsigned_decimal(const Decimal& lo, bool lo_strict, const std::optional<Decimal>& hi);

  GrammarBuilder& g_;
  bool compact_;
  int32_t ws_ = -1, value_ = -1, object_ = -1, char_ = -1, number_ = -1;
};

}  // namespace onnx_genai::constraints
