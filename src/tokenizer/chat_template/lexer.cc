#include "tokenizer/chat_template/lexer.h"

#include <array>
#include <utility>

#include "tokenizer/chat_template/text.h"

namespace onnx_genai::chat_template {

const char* token_type_name(TokenType type) {
  static constexpr std::array<const char*, 26> kNames = {
      "Text", "NumericLiteral", "StringLiteral", "Identifier", "Equals", "OpenParen", "CloseParen",
      "OpenStatement", "CloseStatement", "OpenExpression", "CloseExpression", "OpenSquareBracket",
      "CloseSquareBracket", "OpenCurlyBracket", "CloseCurlyBracket", "Comma", "Dot", "Colon", "Pipe",
      "AdditiveBinaryOperator", "MultiplicativeBinaryOperator", "ExponentiationBinaryOperator",
      "ComparisonBinaryOperator", "UnaryOperator", "Comment", "end of template"};
  return kNames[static_cast<size_t>(type)];
}

std::string describe_location(std::string_view source, uint32_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(source[i]) & 0xc0) != 0x80) {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

namespace {

// Preprocessed text with the original offset of every byte (and of the end).
struct Mapped {
  std::string text;
  std::vector<uint32_t> origin;

  void append(const Mapped& from, size_t begin, size_t end) {
    text.append(from.text, begin, end - begin);
    origin.insert(origin.end(), from.origin.begin() + static_cast<std::ptrdiff_t>(begin),
                  from.origin.begin() + static_cast<std::ptrdiff_t>(end));
  }
  void finish(const Mapped& from) { origin.push_back(from.origin.back()); }
};

bool is_line_start(const std::string& s, size_t i) {
  if (i == 0 || s[i - 1] == '\n' || s[i - 1] == '\r') return true;
  // U+2028 / U+2029 are line terminators for the reference's /^/m.
  return i >= 3 && s.compare(i - 3, 2, "\xe2\x80") == 0 && (s[i - 1] == '\xa8' || s[i - 1] == '\xa9');
}

// lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1".
Mapped lstrip_blocks(const Mapped& in) {
  Mapped out;
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size();) {
    if (is_line_start(s, i)) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
        out.append(in, j, j + 2);
        i = j + 2;
        continue;
      }
    }
    out.append(in, i, i + 1);
    ++i;
  }
  out.finish(in);
  return out;
}

// trim_blocks: /([#%-]})\n/g -> "$1".
Mapped trim_blocks(const Mapped& in) {
  Mapped out;
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size();) {
    if (i + 2 < s.size() && (s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' && s[i + 2] == '\n') {
      out.append(in, i, i + 2);
      i += 3;
      continue;
    }
    out.append(in, i, i + 1);
    ++i;
  }
  out.finish(in);
  return out;
}

size_t skip_space(const std::string& s, size_t i) {
  while (size_t n = js_space_length(s, i)) i += n;
  return i;
}

// Matches `{%-?\s*(end)?generation\s*-?%}` at s[i]; returns its end or 0.
size_t match_generation_tag(const std::string& s, size_t i, bool* strip_before, bool* strip_after) {
  if (s.compare(i, 2, "{%") != 0) return 0;
  size_t j = i + 2;
  *strip_before = j < s.size() && s[j] == '-';
  if (*strip_before) ++j;
  j = skip_space(s, j);
  if (s.compare(j, 3, "end") == 0 && s.compare(j + 3, 10, "generation") == 0) j += 3;
  if (s.compare(j, 10, "generation") != 0) return 0;
  j = skip_space(s, j + 10);
  *strip_after = j < s.size() && s[j] == '-';
  if (*strip_after) ++j;
  return s.compare(j, 2, "%}") == 0 ? j + 2 : 0;
}

// /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs: the tag goes, the whitespace around it stays
// unless the tag's dash strips it.
Mapped remove_generation_tags(const Mapped& in) {
  Mapped out;
  const std::string& s = in.text;
  size_t copied = 0;  // end of the text already copied (and of the last match)
  for (size_t i = 0; i < s.size(); ++i) {
    bool strip_before = false, strip_after = false;
    const size_t tag_end = s[i] == '{' ? match_generation_tag(s, i, &strip_before, &strip_after) : 0;
    if (tag_end == 0) continue;
    size_t before = i;
    while (before > copied) {
      const size_t n = js_space_length_before(s, before);
      if (n == 0 || before - n < copied) break;
      before -= n;
    }
    const size_t after = skip_space(s, tag_end);
    out.append(in, copied, strip_before ? before : i);
    if (!strip_after) out.append(in, tag_end, after);
    copied = after;
    i = after - 1;
  }
  out.append(in, copied, s.size());
  out.finish(in);
  return out;
}

Mapped preprocess(std::string_view source) {
  Mapped raw;
  raw.text.assign(source);
  if (!raw.text.empty() && raw.text.back() == '\n') raw.text.pop_back();
  raw.origin.resize(raw.text.size() + 1);
  for (size_t i = 0; i < raw.origin.size(); ++i) raw.origin[i] = static_cast<uint32_t>(i);
  return remove_generation_tags(trim_blocks(lstrip_blocks(raw)));
}

constexpr std::pair<std::string_view, TokenType> kMappingTable[] = {
    {"{%", TokenType::kOpenStatement},
    {"%}", TokenType::kCloseStatement},
    {"{{", TokenType::kOpenExpression},
    {"}}", TokenType::kCloseExpression},
    {"(", TokenType::kOpenParen},
    {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenCurlyBracket},
    {"}", TokenType::kCloseCurlyBracket},
    {"[", TokenType::kOpenSquareBracket},
    {"]", TokenType::kCloseSquareBracket},
    {",", TokenType::kComma},
    {".", TokenType::kDot},
    {":", TokenType::kColon},
    {"|", TokenType::kPipe},
    {"<=", TokenType::kComparisonBinaryOperator},
    {">=", TokenType::kComparisonBinaryOperator},
    {"==", TokenType::kComparisonBinaryOperator},
    {"!=", TokenType::kComparisonBinaryOperator},
    {"<", TokenType::kComparisonBinaryOperator},
    {">", TokenType::kComparisonBinaryOperator},
    {"+", TokenType::kAdditiveBinaryOperator},
    {"-", TokenType::kAdditiveBinaryOperator},
    {"~", TokenType::kAdditiveBinaryOperator},
    {"**", TokenType::kExponentiationBinaryOperator},
    {"*", TokenType::kMultiplicativeBinaryOperator},
    {"//", TokenType::kMultiplicativeBinaryOperator},
    {"/", TokenType::kMultiplicativeBinaryOperator},
    {"%", TokenType::kMultiplicativeBinaryOperator},
    {"=", TokenType::kEquals},
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(std::string_view original, Mapped source) : original_(original), mapped_(std::move(source)), src_(mapped_.text) {}

  Result<std::vector<Token>> run();

 private:
  bool starts_with(std::string_view s) const { return src_.compare(pos_, s.size(), s) == 0; }
  char at(size_t i) const { return i < src_.size() ? src_[i] : '\0'; }
  bool is_digit_at(size_t i) const { return i < src_.size() && src_[i] >= '0' && src_[i] <= '9'; }
  TokenType last_type() const { return tokens_.empty() ? TokenType::kEnd : tokens_.back().type; }
  void push(TokenType type, std::string value, size_t at_pos) {
    tokens_.push_back({type, std::move(value), mapped_.origin[at_pos]});
  }
  Status error(const std::string& message) const {
    return OG_ERROR("chat template ", describe_location(original_, mapped_.origin[std::min(pos_, src_.size())]), ": ", message);
  }
  void strip_trailing_whitespace();
  Status consume_digits(std::string* out);
  Status consume_spaces();
  Status consume_word(std::string* out);
  Status consume_string(char quote, std::string* out);
  Status lex_comment();
  Result<bool> lex_sign();

  std::string_view original_;
  Mapped mapped_;
  const std::string& src_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

void Lexer::strip_trailing_whitespace() {
  if (!tokens_.empty() && tokens_.back().type == TokenType::kText) {
    std::string& value = tokens_.back().value;
    value.resize(js_trim_end(value).size());
    if (value.empty()) tokens_.pop_back();
  }
}

// consumeWhile() throws when it consumes the last character of the template.
#define OG_LEX_ADVANCE(n)                                              \
  do {                                                                 \
    pos_ += (n);                                                       \
    if (pos_ >= src_.size()) return error("Unexpected end of input"); \
  } while (0)

Status Lexer::consume_digits(std::string* out) {
  while (is_digit_at(pos_)) {
    *out += src_[pos_];
    OG_LEX_ADVANCE(1);
  }
  return Status::ok();
}

Status Lexer::consume_spaces() {
  while (size_t n = js_space_length(src_, pos_)) OG_LEX_ADVANCE(n);
  return Status::ok();
}

Status Lexer::consume_word(std::string* out) {
  while (pos_ < src_.size() && is_ascii_word(src_[pos_])) {
    *out += src_[pos_];
    OG_LEX_ADVANCE(1);
  }
  return Status::ok();
}

Status Lexer::consume_string(char quote, std::string* out) {
  while (src_[pos_] != quote) {
    if (src_[pos_] != '\\') {
      *out += src_[pos_];
      OG_LEX_ADVANCE(1);
      continue;
    }
    OG_LEX_ADVANCE(1);
    const char escaped = src_[pos_++];
    if (escaped == 'x' || escaped == 'u') {
      const size_t length = escaped == 'x' ? 2 : 4;
      char32_t code = 0;
      for (size_t k = 0; k < length; ++k) {
        const int digit = hex_digit(at(pos_ + k));
        if (digit < 0 || pos_ + k >= src_.size()) {
          return error(std::string("Invalid hexadecimal escape sequence: \\") + escaped + src_.substr(pos_, length));
        }
        code = code * 16 + static_cast<char32_t>(digit);
      }
      pos_ += length;
      // A \uD8xx\uDCxx pair is one code point, as in a JavaScript string.
      if (code >= 0xd800 && code <= 0xdbff && starts_with("\\u")) {
        char32_t low = 0;
        bool valid = true;
        for (size_t k = 0; k < 4; ++k) {
          const int digit = hex_digit(at(pos_ + 2 + k));
          valid = valid && digit >= 0;
          low = low * 16 + static_cast<char32_t>(valid ? digit : 0);
        }
        if (valid && low >= 0xdc00 && low <= 0xdfff) {
          code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          pos_ += 6;
        }
      }
      append_utf8(*out, code);
    } else {
      static constexpr std::string_view kFrom = "ntrbfv'\"\\", kTo = "\n\t\r\b\f\v'\"\\";
      const size_t which = kFrom.find(escaped);
      if (which == std::string_view::npos) return error(std::string("Unexpected escaped character: ") + escaped);
      *out += kTo[which];
    }
    if (pos_ >= src_.size()) return error("Unexpected end of input");
  }
  return Status::ok();
}

Status Lexer::lex_comment() {
  const size_t start = pos_;
  pos_ += 2;
  const bool strip_before = at(pos_) == '-';
  if (strip_before) ++pos_;
  std::string comment;
  while (at(pos_) != '#' || at(pos_ + 1) != '}') {
    if (pos_ + 2 >= src_.size()) return error("Missing end of comment tag");
    comment += src_[pos_++];
  }
  const bool strip_after = !comment.empty() && comment.back() == '-';
  if (strip_after) comment.pop_back();
  if (strip_before) strip_trailing_whitespace();
  push(TokenType::kComment, std::move(comment), start);
  pos_ += 2;
  if (strip_after) pos_ = skip_space(src_, pos_);
  return Status::ok();
}

// A sign after an operator or opening token starts a unary operator or a signed number.
// Returns true when it produced a token.
Result<bool> Lexer::lex_sign() {
  const char sign = src_[pos_];
  switch (last_type()) {
    case TokenType::kText:
    case TokenType::kEnd: return error(std::string("Unexpected character: ") + sign);
    case TokenType::kIdentifier:
    case TokenType::kNumericLiteral:
    case TokenType::kStringLiteral:
    case TokenType::kCloseParen:
    case TokenType::kCloseSquareBracket: return false;
    default: break;
  }
  const size_t start = pos_++;
  std::string number;
  OG_RETURN_IF_ERROR(consume_digits(&number));
  if (!number.empty() && at(pos_) == '.' && is_digit_at(pos_ + 1)) {
    ++pos_;
    std::string fraction;
    OG_RETURN_IF_ERROR(consume_digits(&fraction));
    number += "." + fraction;
  }
  const TokenType type = number.empty() ? TokenType::kUnaryOperator : TokenType::kNumericLiteral;
  push(type, std::string(1, sign) + number, start);
  return true;
}

Result<std::vector<Token>> Lexer::run() {
  size_t curly_depth = 0;
  while (pos_ < src_.size()) {
    const TokenType last = last_type();
    if (last == TokenType::kEnd || last == TokenType::kCloseStatement || last == TokenType::kCloseExpression ||
        last == TokenType::kComment) {
      const size_t start = pos_;
      while (pos_ < src_.size() && !(src_[pos_] == '{' && (at(pos_ + 1) == '%' || at(pos_ + 1) == '{' || at(pos_ + 1) == '#'))) {
        ++pos_;
      }
      if (pos_ > start) {
        push(TokenType::kText, src_.substr(start, pos_ - start), start);
        continue;
      }
    }
    if (starts_with("{#")) {
      OG_RETURN_IF_ERROR(lex_comment());
      continue;
    }
    if (starts_with("{%-") || starts_with("{{-")) {
      strip_trailing_whitespace();
      const bool statement = src_[pos_ + 1] == '%';
      push(statement ? TokenType::kOpenStatement : TokenType::kOpenExpression, statement ? "{%" : "{{", pos_);
      if (!statement) curly_depth = 0;
      pos_ += 3;
      continue;
    }
    OG_RETURN_IF_ERROR(consume_spaces());
    if (starts_with("-%}") || starts_with("-}}")) {
      const bool statement = src_[pos_ + 1] == '%';
      push(statement ? TokenType::kCloseStatement : TokenType::kCloseExpression, statement ? "%}" : "}}", pos_);
      pos_ = skip_space(src_, pos_ + 3);
      continue;
    }
    const char c = src_[pos_];
    if (c == '-' || c == '+') {
      OG_ASSIGN_OR_RETURN(bool produced, lex_sign());
      if (produced) continue;
    }
    bool mapped = false;
    for (const auto& [text, type] : kMappingTable) {
      if (text == "}}" && curly_depth > 0) continue;
      if (!starts_with(text)) continue;
      push(type, std::string(text), pos_);
      if (type == TokenType::kOpenExpression) curly_depth = 0;
      if (type == TokenType::kOpenCurlyBracket) ++curly_depth;
      if (type == TokenType::kCloseCurlyBracket) --curly_depth;
      pos_ += text.size();
      mapped = true;
      break;
    }
    if (mapped) continue;
    const size_t start = pos_;
    if (c == '\'' || c == '"') {
      OG_LEX_ADVANCE(1);
      std::string value;
      OG_RETURN_IF_ERROR(consume_string(c, &value));
      push(TokenType::kStringLiteral, std::move(value), start);
      ++pos_;
      continue;
    }
    if (c >= '0' && c <= '9') {
      std::string number;
      OG_RETURN_IF_ERROR(consume_digits(&number));
      if (last_type() != TokenType::kDot && at(pos_) == '.' && is_digit_at(pos_ + 1)) {
        ++pos_;
        std::string fraction;
        OG_RETURN_IF_ERROR(consume_digits(&fraction));
        number += "." + fraction;
      }
      push(TokenType::kNumericLiteral, std::move(number), start);
      continue;
    }
    if (is_ascii_word(c)) {
      std::string word;
      OG_RETURN_IF_ERROR(consume_word(&word));
      push(TokenType::kIdentifier, std::move(word), start);
      continue;
    }
    char32_t code_point;
    decode_utf8(src_, pos_, &code_point);
    std::string shown;
    append_utf8(shown, code_point);
    return error("Unexpected character: " + shown);
  }
  tokens_.push_back({TokenType::kEnd, "", mapped_.origin.back()});
  return std::move(tokens_);
}

#undef OG_LEX_ADVANCE

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source) {
  return Lexer(source, preprocess(source)).run();
}

}  // namespace onnx_genai::chat_template
