#include "constraints/regex_compiler.h"

#include <string>

#include "tokenizer/unicode.h"

namespace onnx_genai::constraints {
namespace {

// Nesting deeper than this is refused (the parser recurses per group).
constexpr int kMaxDepth = 256;

Result<std::u32string> decode_pattern(std::string_view text) {
  std::u32string out;
  for (size_t i = 0; i < text.size();) {
    const auto b0 = static_cast<uint8_t>(text[i]);
    const size_t n = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > text.size()) return OG_ERROR("regex: invalid UTF-8 at byte ", i);
    char32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<uint8_t>(text[i + k]);
      if ((b & 0xC0) != 0x80) return OG_ERROR("regex: invalid UTF-8 at byte ", i);
      cp = (cp << 6) | (b & 0x3F);
    }
    const char32_t min = n == 1 ? 0 : n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > CharClass::kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return OG_ERROR("regex: invalid UTF-8 at byte ", i);
    }
    out.push_back(cp);
    i += n;
  }
  return out;
}

CharClass digits() {
  CharClass c;
  c.add('0', '9');
  return c;
}
CharClass word() {
  CharClass c;
  c.add('a', 'z');
  c.add('A', 'Z');
  c.add('0', '9');
  c.add('_');
  return c;
}
// ECMAScript WhiteSpace and LineTerminator.
CharClass space() {
  CharClass c;
  for (const char32_t cp : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF}) c.add(cp);
  c.add(0x2000, 0x200A);
  return c;
}
// A class of every code point with `property`, built once (a pass over all of Unicode).
template <typename Property>
CharClass unicode_class(Property property) {
  CharClass c;
  for (char32_t cp = 0; cp <= CharClass::kMaxCodepoint; ++cp) {
    if (!property(cp)) continue;
    char32_t hi = cp;
    while (hi < CharClass::kMaxCodepoint && property(hi + 1)) ++hi;
    c.add(cp, hi);
    cp = hi;
  }
  return c;
}
// Python's and Rust's Unicode \d: the decimal digits (general category Nd).
const CharClass& unicode_digits() {
  static const CharClass c = unicode_class([](char32_t cp) { return unicode::category(cp) == unicode::Category::Nd; });
  return c;
}
// Rust's Unicode \s: the White_Space property.
const CharClass& unicode_space() {
  static const CharClass c = unicode_class(unicode::is_white_space);
  return c;
}
CharClass line_terminators() {
  CharClass c;
  for (const char32_t cp : {0x0A, 0x0D, 0x2028, 0x2029}) c.add(cp);
  return c;
}

int hex_value(char32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

class RegexParser {
 public:
  RegexParser(GrammarBuilder& g, std::u32string pattern, const RegexOptions& options)
      : g_(g), p_(std::move(pattern)), options_(options) {}

  Result<int32_t> parse_top() {
    if (lark() && options_.search) return error("internal: a Lark regex is never searched");
    const int32_t rule = g_.new_rule("regex");
    int32_t any_star = -1;
    if (options_.search) {
      CharClass all;
      all.add(0, CharClass::kMaxCodepoint);
      any_star = g_.repeat("any", GrammarBuilder::ref(char_class_rule(g_, all, options_.encoding)), 0, -1);
    }
    while (true) {
      const bool start_anchor = !lark() && at('^');
      if (start_anchor) ++i_;
      OG_ASSIGN_OR_RETURN(std::vector<Symbol> seq, parse_sequence(0));
      bool end_anchor = false;
      if (!lark() && at('$')) {
        ++i_;
        end_anchor = true;
      }
      if (options_.search && !start_anchor) seq.insert(seq.begin(), GrammarBuilder::ref(any_star));
      if (options_.search && !end_anchor) seq.push_back(GrammarBuilder::ref(any_star));
      g_.add_alt(rule, std::move(seq));
      if (i_ == p_.size()) return rule;
      if (!at('|')) return error("unexpected ')'");
      ++i_;
    }
  }

 private:
  bool at(char32_t c) const { return i_ < p_.size() && p_[i_] == c; }
  bool lark() const { return options_.dialect == RegexDialect::kLark; }
  Status error(const std::string& what) const { return OG_ERROR("regex: ", what, " at offset ", i_); }

  // Pieces until '|', ')' or the end (a top-level '$' ends one too when it is last).
  Result<std::vector<Symbol>> parse_sequence(int depth) {
    std::vector<Symbol> seq;
    while (i_ < p_.size() && !at('|') && !at(')')) {
      if (lark() && (at('^') || at('$'))) return error("anchors ^ and $ are not supported in a Lark regex");
      if (at('$') && depth == 0 && (i_ + 1 == p_.size() || p_[i_ + 1] == '|')) break;
      if (at('^') || at('$')) return error("anchor inside the pattern (only at the start or end of an alternative)");
      OG_RETURN_IF_ERROR(parse_piece(depth, seq));
    }
    return seq;
  }

  // Whether p_[i_] starts {n}, {n,} or {n,m}; sets the bounds and the length when it does.
  bool braces(int64_t& min, int64_t& max, size_t& length) const {
    size_t k = i_ + 1;
    auto number = [&](int64_t& value) {
      const size_t begin = k;
      value = 0;
      while (k < p_.size() && p_[k] >= '0' && p_[k] <= '9') {
        value = std::min<int64_t>(value * 10 + (p_[k] - '0'), kMaxRepeat + 1);
        ++k;
      }
      return k > begin;
    };
    if (!number(min)) return false;
    max = min;
    if (k < p_.size() && p_[k] == ',') {
      ++k;
      if (!number(max)) max = -1;
    }
    if (k >= p_.size() || p_[k] != '}') return false;
    length = k + 1 - i_;
    return true;
  }

  Status parse_piece(int depth, std::vector<Symbol>& seq) {
    const size_t begin = i_;
    OG_ASSIGN_OR_RETURN(std::vector<Symbol> atom, parse_atom(depth));
    int64_t min = 1, max = 1;
    size_t length = 1;
    if (at('*')) {
      min = 0, max = -1;
    } else if (at('+')) {
      min = 1, max = -1;
    } else if (at('?')) {
      min = 0, max = 1;
    } else if (!(at('{') && braces(min, max, length))) {
      // Python reads {,n} as a repeat, Rust refuses it, ECMAScript takes '{' literally.
      if (lark() && at('{')) return error("'{' that is not a repeat {n}, {n,} or {n,m}");
      seq.insert(seq.end(), atom.begin(), atom.end());
      return Status::ok();
    }
    if (min > kMaxRepeat || max > kMaxRepeat) return error("repeat count above " + std::to_string(kMaxRepeat));
    if (max >= 0 && max < min) return error("repeat {n,m} with m < n");
    i_ += length;
    if (at('?')) {
      // A lexer's lazy match ends the terminal early, which changes what follows it can see.
      if (lark()) return error("lazy quantifier in a Lark regex (llguidance refuses it)");
      ++i_;  // lazy: the same language
    }
    if (at('*') || at('+') || at('?') || (at('{') && braces(min, max, length))) return error("nothing to repeat");
    Symbol body = atom.size() == 1 ? atom[0] : GrammarBuilder::ref(sequence_rule(std::move(atom)));
    seq.push_back(GrammarBuilder::ref(g_.repeat("repeat@" + std::to_string(begin), body, min, max)));
    return Status::ok();
  }

  int32_t sequence_rule(std::vector<Symbol> seq) {
    const int32_t rule = g_.new_rule("group");
    g_.add_alt(rule, std::move(seq));
    return rule;
  }

  std::vector<Symbol> class_atom(const CharClass& c) {
    return {GrammarBuilder::ref(char_class_rule(g_, c, options_.encoding))};
  }

  std::vector<Symbol> literal_atom(char32_t cp) {
    const bool needs_escape = cp < 0x20 || cp == '"' || cp == '\\';
    if (options_.encoding == TextEncoding::kJsonString && needs_escape) {
      CharClass c;
      c.add(cp);
      return class_atom(c);
    }
    std::string bytes;
    append_utf8(bytes, cp);
    std::vector<Symbol> seq;
    g_.append_literal(seq, bytes);
    return seq;
  }

  Result<std::vector<Symbol>> parse_atom(int depth) {
    const char32_t c = p_[i_];
    int64_t min = 0, max = 0;
    size_t length = 0;
    if (c == '*' || c == '+' || c == '?' || (c == '{' && braces(min, max, length))) return error("nothing to repeat");
    if (c == '{' && lark()) return error("'{' that is not a repeat {n}, {n,} or {n,m}");
    if (c == '(') return parse_group(depth);
    if (c == '[') {
      ++i_;
      OG_ASSIGN_OR_RETURN(CharClass set, parse_class());
      return class_atom(set);
    }
    if (c == '.') {
      ++i_;
      if (!lark()) return class_atom(line_terminators().negated());
      CharClass newline;
      if (!options_.dot_all) newline.add('\n');
      return class_atom(newline.negated());
    }
    if (c == '\\') {
      ++i_;
      bool is_class = false;
      OG_ASSIGN_OR_RETURN(CharClass set, parse_escape(false, is_class));
      if (is_class) return class_atom(set);
      return literal_atom(set.normalized()[0].lo);
    }
    ++i_;
    return literal_atom(c);
  }

  Result<std::vector<Symbol>> parse_group(int depth) {
    if (depth >= kMaxDepth) return error("groups nested deeper than " + std::to_string(kMaxDepth));
    ++i_;
    if (at('?')) {
      const char32_t kind = i_ + 1 < p_.size() ? p_[i_ + 1] : 0;
      if (kind == ':') {
        i_ += 2;
      } else if (kind == '<' && i_ + 2 < p_.size() && p_[i_ + 2] != '=' && p_[i_ + 2] != '!') {
        while (i_ < p_.size() && p_[i_] != '>') ++i_;  // a named group: the name is not needed
        if (i_ == p_.size()) return error("unterminated group name");
        ++i_;
      } else {
        return error("lookaround or group flags (?" + std::string(1, static_cast<char>(kind & 0x7F)) + " are not supported");
      }
    }
    const int32_t rule = g_.new_rule("group");
    while (true) {
      OG_ASSIGN_OR_RETURN(std::vector<Symbol> seq, parse_sequence(depth + 1));
      g_.add_alt(rule, std::move(seq));
      if (at(')')) {
        ++i_;
        return std::vector<Symbol>{GrammarBuilder::ref(rule)};
      }
      if (!at('|')) return error("unterminated group");
      ++i_;
    }
  }

  // After '['. Ranges of single characters; class escapes (\d...) join as sets.
  Result<CharClass> parse_class() {
    const bool negate = at('^');
    if (negate) ++i_;
    CharClass set;  // ECMAScript: ']' always closes, so [] is empty and [^] any character
    const size_t first = i_;
    while (i_ < p_.size() && (!at(']') || (lark() && i_ == first))) {  // Python, Rust: []] holds ']'
      if (lark() && at('[')) return error("'[' inside a class (Rust reads a nested class, Python a '[')");
      bool lo_is_class = false;
      OG_ASSIGN_OR_RETURN(CharClass lo, class_member(lo_is_class));
      if (!lo_is_class && at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        bool hi_is_class = false;
        OG_ASSIGN_OR_RETURN(CharClass hi, class_member(hi_is_class));
        if (hi_is_class) return error("character class range with a class escape");
        const char32_t a = lo.normalized()[0].lo, b = hi.normalized()[0].lo;
        if (b < a) return error("character class range out of order");
        set.add(a, b);
        continue;
      }
      set.add(lo);
    }
    if (!at(']')) return error("unterminated character class");
    ++i_;
    return negate ? set.negated() : set;
  }

  Result<CharClass> class_member(bool& is_class) {
    if (at('\\')) {
      ++i_;
      return parse_escape(true, is_class);
    }
    CharClass c;
    c.add(p_[i_++]);
    is_class = false;
    return c;
  }

  // After '\'. A single character (is_class false) or a class escape.
  Result<CharClass> parse_escape(bool in_class, bool& is_class) {
    if (i_ >= p_.size()) return error("pattern ends with '\\'");
    const char32_t c = p_[i_++];
    is_class = true;
    if (lark()) {
      switch (c) {
        case 'd': return unicode_digits();
        case 'D': return unicode_digits().negated();
        case 's': return unicode_space();
        case 'S': return unicode_space().negated();
        case 'w':
        case 'W': return error("\\w in a Lark regex (Python's and Rust's Unicode word classes differ; write the class out)");
        default: break;
      }
    }
    switch (c) {
      case 'd': return digits();
      case 'D': return digits().negated();
      case 'w': return word();
      case 'W': return word().negated();
      case 's': return space();
      case 'S': return space().negated();
      default: break;
    }
    is_class = false;
    CharClass one;
    const auto single = [&](char32_t cp) {
      one.add(cp);
      return one;
    };
    switch (c) {
      case 't': return single('\t');
      case 'n': return single('\n');
      case 'r': return single('\r');
      case 'f': return single('\f');
      case 'v': return single('\v');
      case '0':
        if (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') return error("octal escape");
        return single(0);
      case 'x':
      case 'u': {
        const size_t n = c == 'x' ? 2 : 4;
        if (i_ + n > p_.size()) return error("truncated \\" + std::string(1, static_cast<char>(c)) + " escape");
        char32_t value = 0;
        for (size_t k = 0; k < n; ++k) {
          const int h = hex_value(p_[i_ + k]);
          if (h < 0) return error("bad hex digit in escape");
          value = value * 16 + static_cast<char32_t>(h);
        }
        i_ += n;
        if (value >= 0xD800 && value <= 0xDFFF) return error("surrogate escape");
        return single(value);
      }
      case 'c':
        if (i_ < p_.size() && ((p_[i_] | 0x20) >= 'a' && (p_[i_] | 0x20) <= 'z')) return single(p_[i_++] % 32);
        return error("bad \\c escape");
      case 'b':
        if (in_class) return single('\b');
        return error("word boundary \\b is not supported");
      case 'B': return error("word boundary \\B is not supported");
      case 'p':
      case 'P': return error("Unicode property escapes are not supported");
      case 'k': return error("named backreferences are not supported");
      default: break;
    }
    if (c >= '1' && c <= '9') return error("backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      return error("unknown escape \\" + std::string(1, static_cast<char>(c)));
    }
    return single(c);  // an escaped syntax or other character stands for itself
  }

  GrammarBuilder& g_;
  std::u32string p_;
  RegexOptions options_;
  size_t i_ = 0;
};

}  // namespace

Result<int32_t> add_regex(GrammarBuilder& g, std::string_view pattern, const RegexOptions& options) {
  OG_ASSIGN_OR_RETURN(std::u32string cps, decode_pattern(pattern));
  RegexParser parser(g, std::move(cps), options);
  return parser.parse_top();
}

Result<Grammar> compile_regex(std::string_view pattern) {
  GrammarBuilder g;
  OG_ASSIGN_OR_RETURN(const int32_t rule, add_regex(g, pattern, RegexOptions{}));
  return g.build(rule);
}

}  // namespace onnx_genai::constraints
