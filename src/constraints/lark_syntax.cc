#include "constraints/lark_syntax.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>

#include "tokenizer/unicode.h"

namespace onnx_genai::constraints {

Status lark_error(LarkPosition at, const std::string& what) {
  return OG_ERROR("lark grammar:", at.line, ":", at.column, ": ", what);
}

namespace {

// Parentheses nested deeper than this are refused (the parser recurses per level).
constexpr int kMaxNesting = 200;

enum class Tok {
  kEnd, kNewline, kName, kString, kRegex, kJson, kDirective, kNumber, kTokenRef,
  kColon, kBar, kLParen, kRParen, kLBracket, kRBracket, kLBrace, kRBrace, kComma,
  kOp,  // ? * +
  kBang, kTilde, kDot, kDotDot, kArrow, kEquals,
};

struct Token {
  Tok kind = Tok::kEnd;
  LarkPosition at;
  std::string text;   // names, directives, numbers, operators; the raw body of strings and regexes
  std::string flags;  // after a string or regex; "json" or "llguidance" for kJson
};

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class LarkLexer {
 public:
  explicit LarkLexer(std::string_view text) : s_(text) {}

  Result<std::vector<Token>> run() {
    std::vector<Token> out;
    while (true) {
      skip_space();
      Token t;
      t.at = here();
      if (i_ >= s_.size()) {
        out.push_back(t);
        return out;
      }
      OG_RETURN_IF_ERROR(lex_one(t));
      out.push_back(std::move(t));
    }
  }

 private:
  LarkPosition here() const { return {line_, static_cast<int>(i_ - line_start_) + 1}; }
  bool at(std::string_view word) const { return s_.substr(i_, word.size()) == word; }
  void advance(size_t n) { i_ += n; }

  // Spaces, tabs and comments (// and #); not newlines.
  void skip_space() {
    while (i_ < s_.size()) {
      if (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r') {
        ++i_;
      } else if (at("//") || s_[i_] == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  Status lex_one(Token& t) {
    const char c = s_[i_];
    if (c == '\n') {
      t.kind = Tok::kNewline;
      ++i_;
      ++line_;
      line_start_ = i_;
      return Status::ok();
    }
    if (c == '"') return lex_quoted(t, '"', Tok::kString, "i");
    if (c == '/') return lex_quoted(t, '/', Tok::kRegex, "imslux");
    if (c == '%') return lex_directive(t);
    if (is_name_char(c)) {
      const size_t begin = i_;
      while (i_ < s_.size() && is_name_char(s_[i_])) ++i_;
      t.text = std::string(s_.substr(begin, i_ - begin));
      const bool digits = std::all_of(t.text.begin(), t.text.end(), [](char d) { return d >= '0' && d <= '9'; });
      t.kind = digits ? Tok::kNumber : Tok::kName;
      return Status::ok();
    }
    return lex_punctuation(t);
  }

  Status lex_punctuation(Token& t) {
    struct Punct {
      std::string_view text;
      Tok kind;
    };
    static constexpr Punct kPunct[] = {
        {"->", Tok::kArrow}, {"..", Tok::kDotDot}, {":", Tok::kColon}, {"|", Tok::kBar}, {"(", Tok::kLParen},
        {")", Tok::kRParen}, {"[", Tok::kLBracket}, {"]", Tok::kRBracket}, {"{", Tok::kLBrace}, {"}", Tok::kRBrace},
        {",", Tok::kComma}, {"?", Tok::kOp}, {"*", Tok::kOp}, {"+", Tok::kOp}, {"!", Tok::kBang},
        {"~", Tok::kTilde}, {".", Tok::kDot}, {"=", Tok::kEquals},
    };
    for (const Punct& p : kPunct) {
      if (!at(p.text)) continue;
      t.kind = p.kind;
      t.text = std::string(p.text);
      advance(p.text.size());
      return Status::ok();
    }
    const char c = s_[i_];
    if (c == '<') return lex_token_ref(t);
    if (c == '&') return lark_error(t.at, "the & (intersection) operator is not supported");
    if (c == '@') return lark_error(t.at, "grammar references (@name) are not supported");
    if (c == '\'') return lark_error(t.at, "single-quoted strings are not Lark syntax (use \"...\")");
    if (std::isprint(static_cast<unsigned char>(c))) return lark_error(t.at, std::string("unexpected character '") + c + "'");
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(static_cast<unsigned char>(c)));
    return lark_error(t.at, std::string("unexpected byte ") + hex);
  }

  // <name> (the token whose text that is, <|im_end|>) or <[...]> (ids: the parser reads them).
  Status lex_token_ref(Token& t) {
    const size_t end = s_.find_first_of(">\n", i_);
    if (end == std::string_view::npos || s_[end] != '>') return lark_error(t.at, "unterminated token reference <...>");
    t.kind = Tok::kTokenRef;
    t.text = std::string(s_.substr(i_, end + 1 - i_));
    i_ = end + 1;
    if (t.text == "<>") return lark_error(t.at, "empty token reference <>");
    return Status::ok();
  }

  // "..." or /.../ with its flags; the body is kept raw (escapes are read by the parser).
  Status lex_quoted(Token& t, char quote, Tok kind, std::string_view allowed_flags) {
    if (quote == '/' && at("//")) return lark_error(t.at, "internal: a comment lexed as a regex");
    ++i_;
    const size_t begin = i_;
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '\n') break;
      i_ += s_[i_] == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] != '\n' ? 2 : 1;
    }
    if (i_ >= s_.size() || s_[i_] != quote) {
      return lark_error(t.at, quote == '"' ? "unterminated string"
                                           : "unterminated regex (newlines need the x flag, which is not supported)");
    }
    t.kind = kind;
    t.text = std::string(s_.substr(begin, i_ - begin));
    ++i_;
    while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) {
      if (allowed_flags.find(s_[i_]) == std::string_view::npos) break;
      t.flags += s_[i_++];
    }
    return Status::ok();
  }

  Status lex_directive(Token& t) {
    const size_t begin = ++i_;
    while (i_ < s_.size() && is_name_char(s_[i_])) ++i_;
    t.kind = Tok::kDirective;
    t.text = std::string(s_.substr(begin, i_ - begin));
    if (t.text == "json" || t.text == "llguidance") {
      skip_space();
      return lex_json_object(t);
    }
    return Status::ok();
  }

  // A balanced {...} after %json (strings may hold braces); the JSON itself is checked later.
  Status lex_json_object(Token& t) {
    if (i_ >= s_.size() || s_[i_] != '{') return lark_error(here(), "expected '{' after %" + t.text);
    const size_t begin = i_;
    int depth = 0;
    bool in_string = false;
    for (; i_ < s_.size(); ++i_) {
      const char c = s_[i_];
      if (c == '\n') {
        ++line_;
        line_start_ = i_ + 1;
      }
      if (in_string) {
        if (c == '\\') ++i_;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        t.flags = t.text;
        t.kind = Tok::kJson;
        t.text = std::string(s_.substr(begin, i_ + 1 - begin));
        ++i_;
        return Status::ok();
      }
    }
    return lark_error(t.at, "unterminated %" + t.text + " { ... }");
  }

  std::string_view s_;
  size_t i_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A string literal's bytes as Lark reads them: \" \\ \n \t \r \f \xHH \uHHHH \UHHHHHHHH are
// escapes, any other backslash stands for itself ("\d" is two characters).
Result<std::string> unescape_string(const Token& t) {
  std::string out;
  const std::string& s = t.text;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    const char e = s[++i];
    switch (e) {
      case '"': out += '"'; continue;
      case '\\': out += '\\'; continue;
      case 'n': out += '\n'; continue;
      case 't': out += '\t'; continue;
      case 'r': out += '\r'; continue;
      case 'f': out += '\f'; continue;
      default: break;
    }
    const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits == 0) {
      out += '\\';
      out += e;
      continue;
    }
    char32_t cp = 0;
    for (size_t k = 1; k <= digits; ++k) {
      const int h = i + k < s.size() ? hex_digit(s[i + k]) : -1;
      if (h < 0) return lark_error(t.at, std::string("bad \\") + e + " escape in a string");
      cp = cp * 16 + static_cast<char32_t>(h);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return lark_error(t.at, "escape of a code point that is not a character");
    unicode::append_utf8(out, cp);
    i += digits;
  }
  return out;
}

// A regex literal's pattern: "\/" is '/'. Lark turns \xHH and \uHHHH into the character before
// Python's re sees it while Rust's regex reads them as escapes, so one that spells a syntax
// character means different things to the two and is refused.
Result<std::string> regex_pattern(const Token& t) {
  const std::string& s = t.text;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] != '\\') continue;
    const size_t digits = s[i + 1] == 'x' ? 2 : s[i + 1] == 'u' ? 4 : 0;
    if (digits > 0 && i + 1 + digits < s.size()) {
      int value = 0;
      for (size_t k = 0; k < digits; ++k) value = value * 16 + std::max(0, hex_digit(s[i + 2 + k]));
      if (value < 0x80 && std::string_view("\\^$.|?*+()[]{}/").find(static_cast<char>(value)) != std::string_view::npos) {
        return lark_error(t.at, "regex escape " + s.substr(i, 2 + digits) +
                                    " of a syntax character (Lark and llguidance read it differently; write \\" +
                                    static_cast<char>(value) + ")");
      }
    }
    ++i;
  }
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '/') continue;
    out += s[i];
    if (s[i] == '\\' && i + 1 < s.size()) out += s[++i];
  }
  return out;
}

enum class NameKind { kRule, kTerminal, kNeither };

// Terminals are uppercase and rules lowercase, after any leading underscores (_NAME, _name).
NameKind name_kind(const std::string& name) {
  const size_t letter = name.find_first_not_of('_');
  const std::string rest = letter == std::string::npos ? "" : name.substr(letter);
  const auto has = [&](char lo, char hi) { return std::any_of(rest.begin(), rest.end(), [&](char c) { return c >= lo && c <= hi; }); };
  if (rest.empty() || (has('a', 'z') && has('A', 'Z'))) return NameKind::kNeither;
  return has('a', 'z') ? NameKind::kRule : NameKind::kTerminal;
}

LarkExpr expr(LarkExpr::Kind kind, LarkPosition at) {
  LarkExpr e;
  e.kind = kind;
  e.at = at;
  return e;
}

// A token id as written: digits only, at most 9 (vocabularies are far smaller).
std::optional<int32_t> token_id(std::string_view digits) {
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  if (!std::all_of(digits.begin(), digits.end(), [](char d) { return d >= '0' && d <= '9'; })) return std::nullopt;
  return std::stoi(std::string(digits));
}

// The ranges of a token set's body as llguidance reads them: items separated by commas, each
// ID or A-B (inclusive); empty items are skipped (<[1,]>), as llguidance skips them.
Status token_ranges(const Token& t, std::string_view body, LarkExpr& e) {
  if (body.find('*') != std::string_view::npos) {
    return lark_error(t.at, "the wildcard stands alone: <[*]> (in " + t.text + ")");
  }
  for (size_t start = 0; start <= body.size();) {
    const size_t comma = std::min(body.find(',', start), body.size());
    const std::string_view item = body.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    const size_t dash = item.find('-');
    const std::optional<int32_t> lo = token_id(item.substr(0, dash));
    const std::optional<int32_t> hi = dash == std::string_view::npos ? lo : token_id(item.substr(dash + 1));
    const std::string in = "\"" + std::string(item) + "\" in " + t.text;
    if (!lo || !hi) return lark_error(t.at, "bad token id " + in + " (expected ID or FIRST-LAST, numbers of up to 9 digits)");
    if (*lo > *hi) return lark_error(t.at, "empty token range " + in + " (its first id is above its last)");
    e.token_ranges.emplace_back(*lo, *hi);
  }
  if (e.token_ranges.empty()) return lark_error(t.at, "no token id in " + t.text);
  return Status::ok();
}

// <name>, <[id]>, or a set of ids as llguidance spells it: <[1,5-9]>, <[^...]> (every id but
// those), <[*]> (every id). The ids are checked against the vocabulary when it is known.
Result<LarkExpr> token_ref(const Token& t) {
  LarkExpr e = expr(LarkExpr::Kind::kToken, t.at);
  e.text = t.text;
  if (t.text[1] != '[') return e;
  const std::string_view text = t.text;
  if (text.size() < 4 || text[text.size() - 2] != ']') {
    return lark_error(t.at, "bad token reference " + t.text + " (expected <[ID]>, <[FIRST-LAST,ID,...]>, <[^...]> or <[*]>)");
  }
  std::string_view body = text.substr(2, text.size() - 4);
  if (const std::optional<int32_t> id = token_id(body)) {
    e.token_id = *id;
    return e;
  }
  e.token_set = true;
  e.token_negated = body.starts_with('^');
  if (e.token_negated) body.remove_prefix(1);
  if (body == "*") {
    if (e.token_negated) return lark_error(t.at, "<[^*]> excludes every token (llguidance refuses it too)");
    e.token_negated = true;  // every id but none
    return e;
  }
  OG_RETURN_IF_ERROR(token_ranges(t, body, e));
  return e;
}

class LarkParser {
 public:
  explicit LarkParser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Result<LarkSyntax> parse() {
    LarkSyntax out;
    while (true) {
      while (peek().kind == Tok::kNewline) ++k_;
      const Token& t = peek();
      if (t.kind == Tok::kEnd) return out;
      if (t.kind == Tok::kDirective || t.kind == Tok::kJson) {
        OG_RETURN_IF_ERROR(directive(out));
      } else {
        OG_ASSIGN_OR_RETURN(LarkDefinition d, definition());
        out.definitions.push_back(std::move(d));
      }
      if (peek().kind != Tok::kNewline && peek().kind != Tok::kEnd) return unexpected("at the end of a definition");
    }
  }

 private:
  // Inside (...) and [...] newlines are only spacing; at the top of a definition a newline
  // ends it, unless the next line starts with '|'.
  const Token& peek() {
    if (nesting_ > 0) {
      while (t_[k_].kind == Tok::kNewline) ++k_;
    } else if (t_[k_].kind == Tok::kNewline) {
      size_t j = k_;
      while (t_[j].kind == Tok::kNewline) ++j;
      if (t_[j].kind == Tok::kBar) k_ = j;
    }
    return t_[k_];
  }
  Token take() {
    const Token t = peek();
    if (t.kind != Tok::kEnd) ++k_;
    return t;
  }
  bool next_is(Tok kind) { return peek().kind == kind; }
  Status unexpected(const std::string& where) {
    const Token& t = peek();
    const std::string what = t.kind == Tok::kEnd ? "end of grammar" : t.kind == Tok::kNewline ? "end of line" : "'" + t.text + "'";
    return lark_error(t.at, "unexpected " + what + " " + where);
  }

  Status directive(LarkSyntax& out) {
    const Token d = take();
    if (d.kind == Tok::kJson && d.flags == "llguidance") {
      if (d.text.find_first_not_of("{} \t\r\n") == std::string::npos) return Status::ok();  // %llguidance {}: a marker
      return lark_error(d.at, "%llguidance options are not supported");
    }
    if (d.kind == Tok::kJson) return lark_error(d.at, "%json outside a rule");
    if (d.text == "import") return import(d.at, out);
    if (d.text != "ignore") return lark_error(d.at, "%" + d.text + " is not supported");
    OG_ASSIGN_OR_RETURN(LarkExpr e, choice());
    out.ignores.push_back(std::move(e));
    return Status::ok();
  }

  // %import a.b.NAME [-> ALIAS] or %import a.b (NAME, NAME, ...), as Lark spells them.
  Status import(LarkPosition at, LarkSyntax& out) {
    if (next_is(Tok::kDot)) return lark_error(peek().at, "relative %import is not supported (only Lark's common terminals)");
    std::vector<Token> path;
    while (true) {
      path.push_back(take());
      if (path.back().kind != Tok::kName) return lark_error(path.back().at, "expected a name in %import");
      if (!next_is(Tok::kDot)) break;
      take();
    }
    std::vector<Token> names;
    std::string alias;
    if (next_is(Tok::kLParen)) {
      take();
      while (true) {
        names.push_back(take());
        if (names.back().kind != Tok::kName) return lark_error(names.back().at, "expected a name in %import (...)");
        if (!next_is(Tok::kComma)) break;
        take();
      }
      if (take().kind != Tok::kRParen) return lark_error(at, "unterminated %import (...)");
    } else {
      if (path.size() < 2) return lark_error(at, "expected %import MODULE.NAME or %import MODULE (NAMES)");
      names.push_back(path.back());
      path.pop_back();
      if (next_is(Tok::kArrow)) {
        take();
        const Token to = take();
        if (to.kind != Tok::kName) return lark_error(to.at, "expected a name after '->'");
        const bool terminal = name_kind(names[0].text) == NameKind::kTerminal;
        if (name_kind(to.text) != name_kind(names[0].text)) {
          return lark_error(to.at, "alias \"" + to.text + "\" of " + names[0].text + " must be " + (terminal ? "uppercase" : "lowercase"));
        }
        alias = to.text;
      }
    }
    std::string module = path[0].text;
    for (size_t k = 1; k < path.size(); ++k) module += "." + path[k].text;
    for (const Token& name : names) out.imports.push_back({module, name.text, alias, name.at});
    return Status::ok();
  }

  Result<LarkDefinition> definition() {
    while (next_is(Tok::kBang) || (next_is(Tok::kOp) && peek().text == "?")) take();  // tree shaping only
    const Token name = take();
    if (name.kind != Tok::kName) return lark_error(name.at, "expected a rule or terminal definition");
    LarkDefinition d;
    d.name = name.text;
    d.at = name.at;
    const NameKind kind = name_kind(name.text);
    if (kind == NameKind::kNeither) {
      return lark_error(name.at, "name \"" + name.text + "\" is neither a rule (lowercase) nor a terminal (uppercase)");
    }
    d.terminal = kind == NameKind::kTerminal;
    if (next_is(Tok::kDot)) return lark_error(peek().at, "priorities (" + name.text + ".N) are not supported");
    if (next_is(Tok::kLBrace)) return lark_error(peek().at, "templates (" + name.text + "{...}) are not supported");
    if (next_is(Tok::kLBracket) && d.terminal) {
      return lark_error(peek().at, "options on a terminal (" + name.text + "[...]): llguidance takes lexeme options on rules only");
    }
    if (next_is(Tok::kLBracket)) OG_RETURN_IF_ERROR(rule_options(name.text, d.options));
    if (!next_is(Tok::kColon)) return unexpected("after \"" + name.text + "\" (expected ':')");
    take();
    OG_ASSIGN_OR_RETURN(d.body, choice());
    return d;
  }

  // [option, option=value, ...] after a rule's name (llguidance: a trailing comma and [] pass).
  Status rule_options(const std::string& rule, LarkRuleOptions& out) {
    take();  // '['
    while (!next_is(Tok::kRBracket)) {
      const Token key = take();
      if (key.kind != Tok::kName) return lark_error(key.at, "expected a rule option (lazy, stop=, suffix=) in " + rule + "[...]");
      OG_RETURN_IF_ERROR(rule_option(key, out));
      if (!next_is(Tok::kComma)) break;
      take();
    }
    if (!next_is(Tok::kRBracket)) return unexpected("in " + rule + "[...] (expected ',' or ']')");
    take();
    return Status::ok();
  }

  // lazy, stop=X, suffix=X; llguidance's other options are refused by name: they need the
  // sampler (max_tokens, temperature) or report captures, which this runtime does not.
  Status rule_option(const Token& key, LarkRuleOptions& out) {
    const std::string& k = key.text;
    if (k == "lazy") {
      out.lazy = true;
      return Status::ok();
    }
    if (k == "max_tokens" || k == "temperature") {
      const std::string what =
          k == "max_tokens" ? "limits the tokens sampled inside the rule" : "sets the sampling temperature inside the rule";
      return lark_error(key.at, "rule option " + k + " is not supported (it " + what + ": the sampler's work, not the grammar's)");
    }
    if (k == "capture" || k == "stop_capture") {
      return lark_error(key.at, "rule option " + k + " is not supported (no captures are reported)");
    }
    if (k != "stop" && k != "suffix") {
      return lark_error(key.at, "unknown rule option \"" + k +
                                    "\" (llguidance's are lazy, stop, suffix, capture, stop_capture, max_tokens, temperature)");
    }
    if (out.until != LarkRuleOptions::Until::kNone) {
      return lark_error(key.at, "a second stop= or suffix= (llguidance refuses them together too)");
    }
    if (!next_is(Tok::kEquals)) return unexpected("after rule option " + k + " (expected '=')");
    take();
    out.until = k == "stop" ? LarkRuleOptions::Until::kStop : LarkRuleOptions::Until::kSuffix;
    OG_ASSIGN_OR_RETURN(out.value, option_value(k));
    return Status::ok();
  }

  // What a stop= or suffix= names: text a lexer can match.
  Result<LarkExpr> option_value(const std::string& key) {
    const Token& t = peek();
    if (t.kind == Tok::kString && t.text.empty()) {
      return lark_error(t.at, key + "=\"\" is not supported (llguidance ends the lexeme at the model's stop token and hides that "
                                    "token so the grammar goes on, which the generation loop would have to do)");
    }
    if (t.kind == Tok::kString) return string_atom();
    if (t.kind == Tok::kRegex || (t.kind == Tok::kName && name_kind(t.text) == NameKind::kTerminal)) return primary();
    return lark_error(t.at, key + "= takes a string, a regex or a terminal name");
  }

  // alternatives separated by '|', each optionally "-> alias" (tree shaping only).
  Result<LarkExpr> choice() {
    LarkExpr out = expr(LarkExpr::Kind::kChoice, peek().at);
    while (true) {
      OG_ASSIGN_OR_RETURN(LarkExpr alt, sequence());
      out.children.push_back(std::move(alt));
      if (next_is(Tok::kArrow)) {
        take();
        const Token alias = take();
        if (alias.kind != Tok::kName) return lark_error(alias.at, "expected a name after '->'");
      }
      if (!next_is(Tok::kBar)) break;
      take();
    }
    if (out.children.size() == 1) return std::move(out.children[0]);
    return out;
  }

  Result<LarkExpr> sequence() {
    LarkExpr out = expr(LarkExpr::Kind::kSequence, peek().at);
    while (true) {
      const Tok k = peek().kind;
      if (k == Tok::kEnd || k == Tok::kNewline || k == Tok::kBar || k == Tok::kRParen || k == Tok::kRBracket ||
          k == Tok::kArrow) {
        break;
      }
      OG_ASSIGN_OR_RETURN(LarkExpr item, postfix());
      out.children.push_back(std::move(item));
    }
    if (out.children.size() == 1) return std::move(out.children[0]);
    return out;
  }

  Result<int64_t> count() {
    const Token n = take();
    if (n.kind != Tok::kNumber) return lark_error(n.at, "expected a repeat count");
    if (n.text.size() > 6 || std::stoll(n.text) > kMaxLarkRepeat) {
      return lark_error(n.at, "repeat count above " + std::to_string(kMaxLarkRepeat));
    }
    return std::stoll(n.text);
  }

  // atom, then at most one of ? * + ~n ~n..m {n} {n,} {n,m}.
  Result<LarkExpr> postfix() {
    OG_ASSIGN_OR_RETURN(LarkExpr atom, primary());
    LarkExpr out = expr(LarkExpr::Kind::kRepeat, peek().at);
    if (next_is(Tok::kOp)) {
      const std::string op = take().text;
      out.min = op == "+" ? 1 : 0;
      out.max = op == "?" ? 1 : -1;
    } else if (next_is(Tok::kTilde)) {
      take();
      OG_ASSIGN_OR_RETURN(out.min, count());
      out.max = out.min;
      if (next_is(Tok::kDotDot)) {
        take();
        OG_ASSIGN_OR_RETURN(out.max, count());
      }
    } else if (next_is(Tok::kLBrace)) {
      OG_RETURN_IF_ERROR(braces(atom.kind == LarkExpr::Kind::kName ? atom.text : "name", out));
    } else {
      return atom;
    }
    if (out.max >= 0 && out.max < out.min) return lark_error(out.at, "repeat with its maximum below its minimum");
    out.children.push_back(std::move(atom));
    return out;
  }

  // {n}, {n,}, {,m}, {n,m} (llguidance); name{x, y} would be a template.
  Status braces(const std::string& name, LarkExpr& out) {
    const Token open = take();
    if (!next_is(Tok::kNumber) && !next_is(Tok::kComma)) return lark_error(open.at, "templates (" + name + "{...}) are not supported");
    out.min = 0;
    if (next_is(Tok::kNumber)) {
      OG_ASSIGN_OR_RETURN(out.min, count());
    }
    out.max = out.min;
    if (next_is(Tok::kComma)) {
      take();
      out.max = -1;
      if (next_is(Tok::kNumber)) {
        OG_ASSIGN_OR_RETURN(out.max, count());
      }
    }
    if (take().kind != Tok::kRBrace) return lark_error(open.at, "unterminated repeat {n,m}");
    return Status::ok();
  }

  Result<LarkExpr> primary() {
    const Token t = peek();
    switch (t.kind) {
      case Tok::kLParen:
      case Tok::kLBracket: return group();
      case Tok::kString: return string_atom();
      case Tok::kRegex: {
        take();
        LarkExpr e = expr(LarkExpr::Kind::kRegex, t.at);
        e.flags = t.flags;
        OG_ASSIGN_OR_RETURN(e.text, regex_pattern(t));
        return e;
      }
      case Tok::kName: {
        take();
        LarkExpr e = expr(LarkExpr::Kind::kName, t.at);
        e.text = t.text;
        return e;
      }
      case Tok::kJson: {
        take();
        LarkExpr e = expr(LarkExpr::Kind::kJson, t.at);
        e.text = t.text;
        return e;
      }
      case Tok::kTokenRef: take(); return token_ref(t);
      case Tok::kTilde: return lark_error(t.at, "the ~ (negation) operator is not supported");
      case Tok::kDirective: return lark_error(t.at, "%" + t.text + " inside a rule is not supported");
      default: return unexpected("in an expression");
    }
  }

  Result<LarkExpr> group() {
    const Token open = take();
    if (nesting_ >= kMaxNesting) return lark_error(open.at, "groups nested deeper than " + std::to_string(kMaxNesting));
    ++nesting_;
    Result<LarkExpr> inner = choice();
    const Tok close = open.kind == Tok::kLParen ? Tok::kRParen : Tok::kRBracket;
    if (inner && !next_is(close)) inner = unexpected(open.kind == Tok::kLParen ? "(expected ')')" : "(expected ']')");
    --nesting_;  // before the closing token, so a newline after it ends the definition again
    if (!inner) return inner;
    take();
    if (open.kind == Tok::kLParen) return inner;
    LarkExpr optional = expr(LarkExpr::Kind::kRepeat, open.at);  // [x]: x or nothing
    optional.min = 0;
    optional.children.push_back(std::move(inner).value());
    return optional;
  }

  Result<LarkExpr> string_atom() {
    const Token t = take();
    LarkExpr e = expr(LarkExpr::Kind::kLiteral, t.at);
    e.ignore_case = t.flags == "i";
    OG_ASSIGN_OR_RETURN(e.text, unescape_string(t));
    if (e.text.empty()) return lark_error(t.at, "empty string (Lark refuses empty terminals)");
    if (!next_is(Tok::kDotDot)) return e;
    take();
    const Token hi = take();
    if (hi.kind != Tok::kString) return lark_error(hi.at, "expected a string after '..'");
    e.kind = LarkExpr::Kind::kRange;
    OG_ASSIGN_OR_RETURN(e.text2, unescape_string(hi));
    return e;
  }

  std::vector<Token> t_;
  size_t k_ = 0;
  int nesting_ = 0;
};

}  // namespace

Result<LarkSyntax> parse_lark_syntax(std::string_view text) {
  LarkLexer lexer(text);
  OG_ASSIGN_OR_RETURN(std::vector<Token> tokens, lexer.run());
  LarkParser parser(std::move(tokens));
  return parser.parse();
}

}  // namespace onnx_genai::constraints
