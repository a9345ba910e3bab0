#include "constraints/json_grammar.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace onnx_genai::constraints {
namespace {

using R = GrammarBuilder;

// Code points of a (valid UTF-8) string; nlohmann has validated what it parsed.
std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    const size_t n = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
    char32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
    for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

// Digit strings without leading zeros, compared and stepped as the integers they spell.
bool digits_less(const std::string& a, const std::string& b) { return a.size() != b.size() ? a.size() < b.size() : a < b; }

std::string successor(std::string digits) {
  size_t k = digits.size();
  while (k > 0 && digits[k - 1] == '9') digits[--k] = '0';
  if (k == 0) return "1" + digits;
  ++digits[k - 1];
  return digits;
}

std::string predecessor(std::string digits) {  // of a positive integer
  size_t k = digits.size();
  while (digits[k - 1] == '0') digits[--k] = '9';
  --digits[k - 1];
  if (digits.size() > 1 && digits[0] == '0') digits.erase(0, 1);
  return digits;
}

// The fraction "(.F)?" of a number whose integer part equals the lower bound's (`low`) and/or
// the upper bound's (`high`). F is read left to right; while its digits so far equal a bound's,
// that bound's next digit (0 past its end) limits the next one. A strict lower bound needs a
// larger digit somewhere. The states past both bounds' digits loop, so F may be any length.
class FractionRange {
 public:
  FractionRange(GrammarBuilder& g, std::string lo, bool lo_strict, std::string hi)
      : g_(g), lo_(std::move(lo)), hi_(std::move(hi)), strict_(lo_strict), last_(std::max({lo_.size(), hi_.size(), size_t{1}})) {}

  Symbol fraction(bool low, bool high) {
    low = low && (strict_ || !lo_.empty());  // a lower bound without a fraction holds any
    const int32_t rule = g_.new_rule("fraction");
    if (!low) g_.add_alt(rule, {});
    g_.add_alt(rule, {g_.byte('.'), R::ref(digits(0, low, high))});
    return R::ref(rule);
  }

 private:
  // F from its k-th digit on (k = 0: just after the point, where a digit must come).
  int32_t digits(size_t k, bool low, bool high) {
    low = low && (strict_ || k < lo_.size());  // past a non-strict bound's digits, F is above it
    k = low || high ? std::min(k, last_) : std::min<size_t>(k, 1);
    const auto key = std::make_tuple(k, low, high);
    if (auto it = rules_.find(key); it != rules_.end()) return it->second;
    const int32_t rule = g_.new_rule("fraction digits");
    rules_.emplace(key, rule);
    // Ending pads F with zeros: below a lower bound that still holds, never above an upper one.
    if (k > 0 && !low) g_.add_alt(rule, {});
    const char lo_digit = low && k < lo_.size() ? lo_[k] : '0';
    const char hi_digit = !high ? '9' : k < hi_.size() ? hi_[k] : '0';
    const auto add = [&](char from, char to, bool l, bool h) {
      if (from <= to) g_.add_alt(rule, {g_.bytes(static_cast<uint8_t>(from), static_cast<uint8_t>(to)), R::ref(digits(k + 1, l, h))});
    };
    if (lo_digit == hi_digit) {
      add(lo_digit, hi_digit, low, high);
      return rule;
    }
    char from = lo_digit, to = hi_digit;
    if (low) add(from, from, true, false), ++from;
    if (high) add(to, to, false, true), --to;
    add(from, to, false, false);
    return rule;
  }

  GrammarBuilder& g_;
  std::string lo_, hi_;
  bool strict_;
  size_t last_;
  std::map<std::tuple<size_t, bool, bool>, int32_t> rules_;
};

}  // namespace

Symbol JsonGrammar::ws() {
  if (ws_ < 0) {
    ByteSet space;
    space.set(static_cast<uint8_t>(' '));
    if (!compact_) {
      for (const char c : {'\t', '\n', '\r'}) space.set(static_cast<uint8_t>(c));
    }
    ws_ = g_.repeat("ws", g_.bytes(space), 0, compact_ ? 1 : kMaxWhitespace);
  }
  return R::ref(ws_);
}

Symbol JsonGrammar::string_char() {
  if (char_ >= 0) return R::ref(char_);
  // Every character: the JSON-string lowering spells controls, '"' and '\\' as escapes.
  CharClass all;
  all.add(0, CharClass::kMaxCodepoint);
  char_ = char_class_rule(g_, all, TextEncoding::kJsonString);
  // \uXXXX for any non-surrogate: first hex digit not D, or D followed by 0-7.
  ByteSet hex, not_d, low_d;
  for (const char c : std::string("0123456789abcdefABCDEF")) hex.set(static_cast<uint8_t>(c));
  not_d = hex;
  not_d.reset('d');
  not_d.reset('D');
  for (char c = '0'; c <= '7'; ++c) low_d.set(static_cast<uint8_t>(c));
  const Symbol h = g_.bytes(hex), slash = g_.byte('\\'), u = g_.byte('u');
  g_.add_alt(char_, {slash, u, g_.bytes(not_d), h, h, h});
  ByteSet d;
  d.set('d');
  d.set('D');
  g_.add_alt(char_, {slash, u, g_.bytes(d), g_.bytes(low_d), h, h});
  return R::ref(char_);
}

Symbol JsonGrammar::raw_string_char(const CharClass& excluded) {
  CharClass raw;
  raw.add(0x20, CharClass::kMaxCodepoint);
  CharClass allowed;
  const CharClass out = excluded.negated();
  // raw ∩ ¬excluded, minus the characters a raw string cannot hold.
  for (const CodepointRange& r : out.normalized()) {
    const char32_t lo = std::max<char32_t>(r.lo, 0x20);
    if (lo > r.hi) continue;
    for (char32_t a = lo; a <= r.hi;) {
      const char32_t skip = a <= '"' && '"' <= r.hi ? '"' : a <= '\\' && '\\' <= r.hi ? '\\' : 0;
      if (skip == 0) {
        allowed.add(a, r.hi);
        break;
      }
      if (skip > a) allowed.add(a, skip - 1);
      a = skip + 1;
    }
  }
  return R::ref(char_class_rule(g_, allowed, TextEncoding::kUtf8));
}

Symbol JsonGrammar::string(int64_t min_chars, int64_t max_chars) {
  const int32_t rule = g_.new_rule("string");
  const int32_t body = g_.repeat("chars", string_char(), min_chars, max_chars);
  g_.add_alt(rule, {g_.byte('"'), R::ref(body), g_.byte('"')});
  return R::ref(rule);
}

Symbol JsonGrammar::number() {
  if (number_ >= 0) return R::ref(number_);
  const Symbol digit = g_.bytes('0', '9');
  const int32_t digits = g_.repeat("digits", digit, 1, -1);
  const int32_t integer = g_.new_rule("int");
  g_.add_alt(integer, {g_.byte('0')});
  g_.add_alt(integer, {g_.bytes('1', '9'), R::ref(g_.repeat("digits", digit, 0, -1))});
  const int32_t fraction = g_.new_rule("frac");
  g_.add_alt(fraction, {});
  g_.add_alt(fraction, {g_.byte('.'), R::ref(digits)});
  ByteSet e, sign;
  e.set('e');
  e.set('E');
  sign.set('+');
  sign.set('-');
  const int32_t exponent = g_.new_rule("exp");
  g_.add_alt(exponent, {});
  g_.add_alt(exponent, {g_.bytes(e), R::ref(digits)});
  g_.add_alt(exponent, {g_.bytes(e), g_.bytes(sign), R::ref(digits)});
  number_ = g_.new_rule("number");
  g_.add_alt(number_, {R::ref(integer), R::ref(fraction), R::ref(exponent)});
  g_.add_alt(number_, {g_.byte('-'), R::ref(integer), R::ref(fraction), R::ref(exponent)});
  return R::ref(number_);
}

// Same-length digit strings lo <= hi: the usual range-to-regex split on the first digit.
int32_t JsonGrammar::digits_between(const std::string& lo, const std::string& hi) {
  const int32_t rule = g_.new_rule("digits");
  const size_t rest = lo.size() - 1;
  const Symbol any = g_.bytes('0', '9');
  const auto tail = [&](std::vector<Symbol> seq) {
    for (size_t k = 0; k < rest; ++k) seq.push_back(any);
    return seq;
  };
  if (lo.substr(1) == std::string(rest, '0') && hi.substr(1) == std::string(rest, '9')) {
    g_.add_alt(rule, tail({g_.bytes(static_cast<uint8_t>(lo[0]), static_cast<uint8_t>(hi[0]))}));
  } else if (lo[0] == hi[0]) {
    g_.add_alt(rule, {g_.byte(lo[0]), R::ref(digits_between(lo.substr(1), hi.substr(1)))});
  } else {
    g_.add_alt(rule, {g_.byte(lo[0]), R::ref(digits_between(lo.substr(1), std::string(rest, '9')))});
    if (hi[0] - lo[0] >= 2) {
      g_.add_alt(rule, tail({g_.bytes(static_cast<uint8_t>(lo[0] + 1), static_cast<uint8_t>(hi[0] - 1))}));
    }
    g_.add_alt(rule, {g_.byte(hi[0]), R::ref(digits_between(std::string(rest, '0'), hi.substr(1)))});
  }
  return rule;
}

int32_t JsonGrammar::unsigned_range(const std::string& lo, const std::optional<std::string>& hi) {
  const int32_t rule = g_.new_rule("uint");
  const size_t top = hi ? hi->size() : lo.size();
  for (size_t length = lo.size(); length <= top; ++length) {
    const std::string low = length == lo.size() ? lo : "1" + std::string(length - 1, '0');
    const std::string high = hi && length == top ? *hi : std::string(length, '9');
    g_.add_alt(rule, {R::ref(digits_between(low, high))});
  }
  if (!hi) {  // more digits than lo has: any of them
    std::vector<Symbol> seq{g_.bytes('1', '9')};
    for (size_t k = 0; k < lo.size(); ++k) seq.push_back(g_.bytes('0', '9'));
    seq.push_back(R::ref(g_.repeat("digits", g_.bytes('0', '9'), 0, -1)));
    g_.add_alt(rule, std::move(seq));
  }
  return rule;
}

Symbol JsonGrammar::integer(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  const int32_t rule = g_.new_rule("integer");
  // Magnitudes of negatives as uint64 (INT64_MIN's has no int64).
  const auto magnitude = [](int64_t v) { return std::to_string(static_cast<uint64_t>(-(v + 1)) + 1); };
  if (!hi || *hi >= 0) {
    const std::string from = lo && *lo > 0 ? std::to_string(*lo) : "0";
    g_.add_alt(rule, {R::ref(unsigned_range(from, hi ? std::optional<std::string>(std::to_string(*hi)) : std::nullopt))});
  }
  if (!lo || *lo < 0) {
    const std::string from = hi && *hi < 0 ? magnitude(*hi) : "1";
    const std::optional<std::string> to = lo ? std::optional<std::string>(magnitude(*lo)) : std::nullopt;
    g_.add_alt(rule, {g_.byte('-'), R::ref(unsigned_range(from, to))});
  }
  return R::ref(rule);
}

int32_t JsonGrammar::unsigned_decimal(const Decimal& lo, bool lo_strict, const std::optional<Decimal>& hi) {
  const int32_t rule = g_.new_rule("decimal");
  FractionRange fraction(g_, lo.fraction, lo_strict, hi ? hi->fraction : "");
  const auto at = [&](const std::string& integer, Symbol f) { g_.add_alt(rule, {R::ref(g_.literal(integer)), f}); };
  if (hi && hi->integer == lo.integer) {
    at(lo.integer, fraction.fraction(true, true));
    return rule;
  }
  at(lo.integer, fraction.fraction(true, false));
  // Integer parts strictly between the bounds' take any fraction.
  const std::string first = successor(lo.integer);
  const std::optional<std::string> last = hi ? std::optional<std::string>(predecessor(hi->integer)) : std::nullopt;
  if (!last || !digits_less(*last, first)) g_.add_alt(rule, {R::ref(unsigned_range(first, last)), fraction.fraction(false, false)});
  if (hi) at(hi->integer, fraction.fraction(false, true));
  return rule;
}

Symbol JsonGrammar::number_range(const std::optional<Decimal>& lo, const std::optional<Decimal>& hi) {
  const int32_t rule = g_.new_rule("number range");
  // x >= 0: magnitudes from max(lo, 0) up to hi.
  if (!hi || !hi->negative) {
    g_.add_alt(rule, {R::ref(unsigned_decimal(lo && !lo->negative ? *lo : Decimal{}, false, hi))});
  }
  // x < 0 as "-" and a magnitude m: x <= hi < 0 is m >= -hi (else m > 0: no "-0"), x >= lo is m <= -lo.
  if (!lo || lo->negative) {
    const bool negative_hi = hi && hi->negative;
    g_.add_alt(rule, {g_.byte('-'), R::ref(unsigned_decimal(negative_hi ? *hi : Decimal{}, !negative_hi, lo))});
  }
  return R::ref(rule);
}

// The digits are read left to right keeping value * 10^(digits read in F) modulo step; the
// number may end where the remainder, scaled by the fraction digits it lacks, is zero.
Symbol JsonGrammar::multiple_of(uint64_t step, int fraction_digits, int max_integer_digits) {
  const auto p = static_cast<size_t>(step);
  const auto d = static_cast<size_t>(fraction_digits);
  // Integer digits are counted only when bounded: whole[n][r] after n + 1 of them (n = 0 alone
  // when unbounded, looping).
  const size_t counted = max_integer_digits > 0 ? static_cast<size_t>(max_integer_digits) : 1;
  std::vector<uint64_t> scale(d + 1, 1 % step);  // scale[k] = 10^k mod step
  for (size_t k = 1; k <= d; ++k) scale[k] = scale[k - 1] * 10 % step;
  const auto next = [&](size_t r, int digit) { return static_cast<size_t>((r * 10 + static_cast<size_t>(digit)) % p); };
  std::vector<std::vector<int32_t>> whole(counted, std::vector<int32_t>(p));
  std::vector<std::vector<int32_t>> ended(d + 1, std::vector<int32_t>(p));  // after I and f digits of F
  for (size_t r = 0; r < p; ++r) {
    for (auto& w : whole) w[r] = g_.new_rule("multiple digits");
    for (size_t f = 0; f <= d; ++f) ended[f][r] = g_.new_rule("multiple end");
  }
  const auto digit_then = [&](int digit, int32_t rule) { return std::vector<Symbol>{g_.byte(static_cast<char>('0' + digit)), R::ref(rule)}; };
  for (size_t r = 0; r < p; ++r) {
    for (size_t n = 0; n < counted; ++n) {
      g_.add_alt(whole[n][r], {R::ref(ended[0][r])});
      if (max_integer_digits > 0 && n + 1 == counted) continue;
      const size_t more = max_integer_digits > 0 ? n + 1 : n;
      for (int digit = 0; digit <= 9; ++digit) g_.add_alt(whole[n][r], digit_then(digit, whole[more][next(r, digit)]));
    }
    for (size_t f = 0; f <= d; ++f) {
      if (r * scale[d - f] % step == 0) g_.add_alt(ended[f][r], {});
      if (f == d) continue;
      for (int digit = 0; digit <= 9; ++digit) {
        std::vector<Symbol> seq = digit_then(digit, ended[f + 1][next(r, digit)]);
        if (f == 0) seq.insert(seq.begin(), g_.byte('.'));
        g_.add_alt(ended[f][r], std::move(seq));
      }
    }
  }
  const int32_t magnitude = g_.new_rule("multiple");
  g_.add_alt(magnitude, {g_.byte('0'), R::ref(ended[0][0])});
  for (int digit = 1; digit <= 9; ++digit) g_.add_alt(magnitude, digit_then(digit, whole[0][next(0, digit)]));
  const int32_t rule = g_.new_rule("multiple of");
  g_.add_alt(rule, {R::ref(magnitude)});
  g_.add_alt(rule, {g_.byte('-'), R::ref(magnitude)});
  return R::ref(rule);
}

// At most 15 significant digits (9 before the point; up to 2 zeros, then a non-zero digit and at
// most 3 more after it), so that the double a reader parses is still not an integer.
Symbol JsonGrammar::non_integer() {
  const Symbol digit = g_.bytes('0', '9');
  const int32_t whole = g_.new_rule("non-integer whole");
  g_.add_alt(whole, {g_.byte('0')});
  g_.add_alt(whole, {g_.bytes('1', '9'), R::ref(g_.repeat("digits", digit, 0, 8))});
  const int32_t magnitude = g_.new_rule("non-integer");
  g_.add_alt(magnitude, {R::ref(whole), g_.byte('.'), R::ref(g_.repeat("zeros", g_.byte('0'), 0, 2)), g_.bytes('1', '9'),
                         R::ref(g_.repeat("digits", digit, 0, 3))});
  const int32_t rule = g_.new_rule("non-integer number");
  g_.add_alt(rule, {R::ref(magnitude)});
  g_.add_alt(rule, {g_.byte('-'), R::ref(magnitude)});
  return R::ref(rule);
}

Symbol JsonGrammar::any_value() {
  if (value_ >= 0) return R::ref(value_);
  value_ = g_.new_rule("value");
  const Symbol v = R::ref(value_);
  // array := "[" ws ("]" | value ws items) ; items := "]" | "," ws value ws items
  const int32_t items = g_.new_rule("items");
  g_.add_alt(items, {g_.byte(']')});
  g_.add_alt(items, {g_.byte(','), ws(), v, ws(), R::ref(items)});
  const int32_t array = g_.new_rule("array");
  g_.add_alt(array, {g_.byte('['), ws(), g_.byte(']')});
  g_.add_alt(array, {g_.byte('['), ws(), v, ws(), R::ref(items)});
  g_.add_alt(value_, {any_object()});
  g_.add_alt(value_, {R::ref(array)});
  g_.add_alt(value_, {any_string()});
  g_.add_alt(value_, {number()});
  for (const char* word : {"true", "false", "null"}) g_.add_alt(value_, {R::ref(g_.literal(word))});
  return v;
}

Symbol JsonGrammar::any_object() {
  if (object_ >= 0) return R::ref(object_);
  object_ = g_.new_rule("object");
  const Symbol v = any_value();
  const int32_t member = g_.new_rule("member");
  g_.add_alt(member, {any_string(), ws(), g_.byte(':'), ws(), v});
  const int32_t members = g_.new_rule("members");
  g_.add_alt(members, {g_.byte('}')});
  g_.add_alt(members, {g_.byte(','), ws(), R::ref(member), ws(), R::ref(members)});
  g_.add_alt(object_, {g_.byte('{'), ws(), g_.byte('}')});
  g_.add_alt(object_, {g_.byte('{'), ws(), R::ref(member), ws(), R::ref(members)});
  return R::ref(object_);
}

Symbol JsonGrammar::string_literal(const std::string& text) {
  const int32_t rule = g_.new_rule("string literal");
  std::vector<Symbol> seq{g_.byte('"')};
  for (const char32_t cp : code_points(text)) {
    if (cp < 0x20 || cp == '"' || cp == '\\') {
      CharClass one;
      one.add(cp);
      seq.push_back(R::ref(char_class_rule(g_, one, TextEncoding::kJsonString)));
      continue;
    }
    std::string bytes;
    append_utf8(bytes, cp);
    g_.append_literal(seq, bytes);
  }
  seq.push_back(g_.byte('"'));
  g_.add_alt(rule, std::move(seq));
  return R::ref(rule);
}

Symbol JsonGrammar::value(const OrderedJson& value) {
  const int32_t rule = g_.new_rule("const");
  if (value.is_string()) return string_literal(value.get<std::string>());
  if (value.is_object() || value.is_array()) {
    std::vector<Symbol> seq{g_.byte(value.is_object() ? '{' : '['), ws()};
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (!first) seq.insert(seq.end(), {ws(), g_.byte(','), ws()});
      first = false;
      if (value.is_object()) seq.insert(seq.end(), {string_literal(key), ws(), g_.byte(':'), ws()});
      seq.push_back(this->value(item));
    }
    seq.insert(seq.end(), {ws(), g_.byte(value.is_object() ? '}' : ']')});
    g_.add_alt(rule, std::move(seq));
    return R::ref(rule);
  }
  g_.add_alt(rule, {R::ref(g_.literal(value.dump()))});
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
      g_.add_alt(rule, {R::ref(g_.literal(std::to_string(static_cast<int64_t>(d))))});
    }
  }
  return R::ref(rule);
}

}  // namespace onnx_genai::constraints
