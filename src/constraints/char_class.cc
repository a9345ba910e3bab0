#include "constraints/char_class.h"

#include <algorithm>
#include <string>

namespace onnx_genai::constraints {
namespace {

constexpr char32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

// Code points [lo, hi] (no surrogates) as sequences of byte ranges, each sequence one UTF-8
// length and each byte range a contiguous span: the construction RE2 and regex-automata use.
void utf8_sequences(char32_t lo, char32_t hi, std::vector<ByteRanges>& out) {
  for (const char32_t max : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
    if (lo <= max && hi > max) {
      utf8_sequences(lo, max, out);
      utf8_sequences(max + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  const int n = lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
  // Split until every continuation byte position spans a full or aligned range.
  for (int i = 1; i < n; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  ByteRanges seq;
  for (size_t k = 0; k < a.size(); ++k) seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  out.push_back(std::move(seq));
}

void add_utf8_alternatives(GrammarBuilder& g, int32_t rule, const std::vector<CodepointRange>& ranges) {
  std::vector<ByteRanges> sequences;
  for (const CodepointRange& r : ranges) utf8_sequences(r.lo, r.hi, sequences);
  for (const ByteRanges& seq : sequences) {
    std::vector<Symbol> symbols;
    for (const auto& [lo, hi] : seq) symbols.push_back(g.bytes(lo, hi));
    g.add_alt(rule, std::move(symbols));
  }
}

bool contains(const std::vector<CodepointRange>& ranges, char32_t c) {
  return std::any_of(ranges.begin(), ranges.end(), [c](const CodepointRange& r) { return r.lo <= c && c <= r.hi; });
}

// `ranges` minus [lo, hi].
std::vector<CodepointRange> without(const std::vector<CodepointRange>& ranges, char32_t lo, char32_t hi) {
  std::vector<CodepointRange> out;
  for (const CodepointRange& r : ranges) {
    if (r.hi < lo || r.lo > hi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < lo) out.push_back({r.lo, lo - 1});
    if (r.hi > hi) out.push_back({hi + 1, r.hi});
  }
  return out;
}

void add_json_escapes(GrammarBuilder& g, int32_t rule, const std::vector<CodepointRange>& ranges) {
  const Symbol backslash = g.byte('\\');
  for (const auto& [c, letter] : {std::pair<char32_t, char>{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {0x08, 'b'},
                                  {0x0C, 'f'}, {0x0A, 'n'}, {0x0D, 'r'}, {0x09, 't'}}) {
    if (contains(ranges, c)) g.add_alt(rule, {backslash, g.byte(letter)});
  }
  // Controls also as \u00XX, in either case of hex digit.
  static const char kHex[] = "0123456789abcdef";
  for (char32_t c = 0; c < 0x20; ++c) {
    if (!contains(ranges, c)) continue;
    std::vector<Symbol> seq{backslash, g.byte('u'), g.byte('0'), g.byte('0')};
    seq.push_back(g.byte(kHex[c >> 4]));
    const char low = kHex[c & 15];
    ByteSet digit;
    digit.set(static_cast<uint8_t>(low));
    digit.set(static_cast<uint8_t>(low >= 'a' ? low - 'a' + 'A' : low));
    seq.push_back(g.bytes(digit));
    g.add_alt(rule, std::move(seq));
  }
}

}  // namespace

std::vector<CodepointRange> CharClass::normalized() const {
  std::vector<CodepointRange> sorted;
  for (const CodepointRange& r : ranges_) {
    if (r.lo <= r.hi && r.lo <= kMaxCodepoint) sorted.push_back({r.lo, std::min(r.hi, kMaxCodepoint)});
  }
  std::sort(sorted.begin(), sorted.end(), [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> out;
  for (const CodepointRange& r : sorted) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return without(out, kSurrogateLo, kSurrogateHi);
}

CharClass CharClass::negated() const {
  CharClass out;
  char32_t next = 0;
  for (const CodepointRange& r : normalized()) {
    if (r.lo > next) out.add(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.add(next, kMaxCodepoint);
  return out;
}

int32_t char_class_rule(GrammarBuilder& g, const CharClass& set, TextEncoding encoding) {
  const int32_t rule = g.new_rule("char");
  const std::vector<CodepointRange> ranges = set.normalized();
  if (encoding == TextEncoding::kUtf8) {
    add_utf8_alternatives(g, rule, ranges);
    return rule;
  }
  std::vector<CodepointRange> raw = without(ranges, 0, 0x1F);
  raw = without(raw, '"', '"');
  raw = without(raw, '\\', '\\');
  add_utf8_alternatives(g, rule, raw);
  add_json_escapes(g, rule, ranges);
  return rule;
}

}  // namespace onnx_genai::constraints
