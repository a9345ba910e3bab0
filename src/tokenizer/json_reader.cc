#include "tokenizer/json_reader.h"

#include <array>
#include <charconv>
#include <cstring>

#include "tokenizer/unicode.h"

namespace onnx_genai::tokenizer {

Status JsonReader::error(std::string_view what) const {
  return OG_ERROR("JSON syntax error at offset ", pos_, ": ", what);
}

Status JsonReader::expect(char c) {
  if (consume(c)) return Status::ok();
  return error(std::string("expected '") + c + "'");
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<std::string> JsonReader::read_string() {
  std::string out;
  OG_RETURN_IF_ERROR(read_string_into(out));
  return out;
}

Status JsonReader::read_string_into(std::string& out) {
  OG_RETURN_IF_ERROR(expect('"'));
  out.clear();
  while (true) {
    // Copy the run up to the next quote or escape in one go. Token texts must be valid UTF-8
    // (everything downstream relies on it), so a run with non-ASCII bytes is checked.
    const char* start = text_.data() + pos_;
    const char* end = text_.data() + text_.size();
    const char* p = start;
    uint8_t high_bits = 0;
    while (p < end && *p != '"' && *p != '\\') high_bits |= static_cast<uint8_t>(*p++);
    if (high_bits & 0x80) {
      if (auto bad = unicode::find_invalid_utf8(std::string_view(start, p - start))) {
        pos_ += *bad;
        return error("invalid UTF-8 in string");
      }
    }
    out.append(start, p);
    pos_ = p - text_.data();
    if (p == end) return error("unterminated string");
    if (*p == '"') {
      ++pos_;
      return Status::ok();
    }
    if (pos_ + 1 >= text_.size()) return error("unterminated escape");
    const char e = text_[pos_ + 1];
    pos_ += 2;
    switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        auto read_hex4 = [&]() -> int {
          if (pos_ + 4 > text_.size()) return -1;
          int v = 0;
          for (int k = 0; k < 4; ++k) {
            const int h = hex_value(text_[pos_ + k]);
            if (h < 0) return -1;
            v = v * 16 + h;
          }
          pos_ += 4;
          return v;
        };
        int cp = read_hex4();
        if (cp < 0) return error("bad \\u escape");
        if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
          const size_t saved = pos_;
          pos_ += 2;
          const int low = read_hex4();
          if (low >= 0xDC00 && low < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else {
            pos_ = saved;
          }
        }
        // A lone surrogate cannot be UTF-8; it becomes U+FFFD like a lossy UTF-16 decode.
        if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;
        unicode::append_utf8(out, static_cast<char32_t>(cp));
        break;
      }
      default:
        return error("bad escape");
    }
  }
}

Result<int64_t> JsonReader::read_integer() {
  skip_space();
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), value);
  if (ec != std::errc()) return error("expected an integer");
  pos_ = ptr - text_.data();
  return value;
}

Result<double> JsonReader::read_number() {
  skip_space();
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), value);
  if (ec != std::errc()) return error("expected a number");
  pos_ = ptr - text_.data();
  return value;
}

Status JsonReader::skip_string() {
  ++pos_;  // the opening quote
  while (true) {
    const void* hit = std::memchr(text_.data() + pos_, '"', text_.size() - pos_);
    if (hit == nullptr) return error("unterminated string");
    const size_t quote = static_cast<const char*>(hit) - text_.data();
    size_t backslashes = 0;
    while (quote - backslashes > pos_ && text_[quote - backslashes - 1] == '\\') ++backslashes;
    pos_ = quote + 1;
    if (backslashes % 2 == 0) return Status::ok();
  }
}

Result<std::string_view> JsonReader::skip_value() {
  // The bytes that matter inside a container; everything else is skipped in a tight loop
  // (this scans the whole "model" object, most of a large tokenizer.json).
  static constexpr auto kStructural = [] {
    std::array<bool, 256> table{};
    for (const char c : {'"', '{', '}', '[', ']'}) table[static_cast<uint8_t>(c)] = true;
    return table;
  }();
  skip_space();
  const size_t start = pos_;
  if (pos_ >= text_.size()) return error("expected a value");
  const char first = text_[pos_];
  if (first == '"') {
    OG_RETURN_IF_ERROR(skip_string());
  } else if (first == '{' || first == '[') {
    size_t depth = 0;
    do {
      while (pos_ < text_.size() && !kStructural[static_cast<uint8_t>(text_[pos_])]) ++pos_;
      if (pos_ >= text_.size()) return error("unterminated object or array");
      const char c = text_[pos_];
      if (c == '"') {
        OG_RETURN_IF_ERROR(skip_string());
        continue;
      }
      ++pos_;
      if (c == '{' || c == '[') {
        // Bounded so that no later recursive walk over the value can exhaust the stack.
        if (++depth > kMaxDepth) return error("nesting deeper than " + std::to_string(kMaxDepth));
      } else {
        --depth;
      }
    } while (depth > 0);
  } else {
    while (pos_ < text_.size() && std::string_view(",}] \n\r\t").find(text_[pos_]) == std::string_view::npos) ++pos_;
    if (pos_ == start) return error("expected a value");
  }
  return text_.substr(start, pos_ - start);
}

}  // namespace onnx_genai::tokenizer
