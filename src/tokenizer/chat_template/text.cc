#include "tokenizer/chat_template/text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace onnx_genai::chat_template {

size_t decode_utf8(std::string_view s, size_t i, char32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 0;
  if (length == 1) {
    *code_point = lead;
    return 1;
  }
  if (length == 0 || i + length > s.size()) {
    *code_point = 0xfffd;
    return 1;
  }
  char32_t value = lead & (0x7f >> length);
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) {
      *code_point = 0xfffd;
      return 1;
    }
    value = (value << 6) | (byte(i + k) & 0x3f);
  }
  *code_point = value;
  return length;
}

void append_utf8(std::string& out, char32_t c) {
  if ((c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff) c = 0xfffd;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

bool is_js_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
         c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000 || c == 0xfeff;
}

size_t js_space_length(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  char32_t c;
  const size_t length = decode_utf8(s, i, &c);
  return is_js_space(c) ? length : 0;
}

size_t js_space_length_before(std::string_view s, size_t end) {
  if (end == 0) return 0;
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
  char32_t c;
  const size_t length = decode_utf8(s, start, &c);
  return start + length == end && is_js_space(c) ? length : 0;
}

std::string_view js_trim_start(std::string_view s) {
  size_t i = 0;
  while (size_t n = js_space_length(s, i)) i += n;
  return s.substr(i);
}

std::string_view js_trim_end(std::string_view s) {
  size_t end = s.size();
  while (size_t n = js_space_length_before(s, end)) end -= n;
  return s.substr(0, end);
}

size_t utf16_length(std::string_view s) {
  size_t units = 0;
  for (size_t i = 0; i < s.size();) {
    char32_t c;
    i += decode_utf8(s, i, &c);
    units += c >= 0x10000 ? 2 : 1;
  }
  return units;
}

namespace {
// Appends the UTF-16 code units of s.
std::vector<char16_t> to_utf16(std::string_view s) {
  std::vector<char16_t> units;
  for (size_t i = 0; i < s.size();) {
    char32_t c;
    i += decode_utf8(s, i, &c);
    if (c >= 0x10000) {
      units.push_back(static_cast<char16_t>(0xd800 + ((c - 0x10000) >> 10)));
      units.push_back(static_cast<char16_t>(0xdc00 + ((c - 0x10000) & 0x3ff)));
    } else {
      units.push_back(static_cast<char16_t>(c));
    }
  }
  return units;
}
}  // namespace

int compare_utf16(std::string_view a, std::string_view b) {
  const std::vector<char16_t> ua = to_utf16(a), ub = to_utf16(b);
  for (size_t i = 0; i < ua.size() && i < ub.size(); ++i) {
    if (ua[i] != ub[i]) return ua[i] < ub[i] ? -1 : 1;
  }
  return ua.size() < ub.size() ? -1 : ua.size() > ub.size() ? 1 : 0;
}

std::vector<std::string_view> split_code_points(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    char32_t c;
    const size_t n = decode_utf8(s, i, &c);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

bool utf16_at(std::string_view s, double index, std::string* out) {
  const std::vector<char16_t> units = to_utf16(s);
  double position = std::trunc(index);
  if (position < 0) position += static_cast<double>(units.size());
  if (!(position >= 0) || position >= static_cast<double>(units.size())) return false;
  const char16_t unit = units[static_cast<size_t>(position)];
  out->clear();
  append_utf8(*out, (unit >= 0xd800 && unit <= 0xdfff) ? 0xfffd : unit);
  return true;
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string js_number_to_string(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0) return "0";
  // Shortest round-trip digits, then ECMAScript Number::toString layout (spec 6.1.6.1.20).
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), std::fabs(value), std::chars_format::scientific);
  const std::string_view text(buffer, static_cast<size_t>(result.ptr - buffer));
  const size_t e_pos = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e_pos)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::atoi(std::string(text.substr(e_pos + 1)).c_str());
  const int k = static_cast<int>(digits.size());
  const int n = exponent + 1;
  std::string out = value < 0 ? "-" : "";
  if (k <= n && n <= 21) {
    out += digits;
    out.append(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out.append(digits, 0, static_cast<size_t>(n));
    out += '.';
    out.append(digits, static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-n), '0');
    out += digits;
  } else {
    out += digits[0];
    if (k > 1) {
      out += '.';
      out.append(digits, 1);
    }
    out += n - 1 >= 0 ? "e+" : "e-";
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

double js_parse_int(std::string_view s) {
  s = js_trim_start(s);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  double value = 0;
  const size_t start = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') value = value * 10 + (s[i++] - '0');
  if (i == start) return std::numeric_limits<double>::quiet_NaN();
  return negative ? -value : value;
}

namespace {
// Length of the StrDecimalLiteral prefix of s (sign, digits, fraction, exponent or Infinity).
size_t decimal_literal_length(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (s.substr(i, 8) == "Infinity") return i + 8;
  const auto digits = [&] {
    const size_t from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - from;
  };
  size_t mantissa = digits();
  if (i < s.size() && s[i] == '.') {
    const size_t dot = i++;
    const size_t fraction = digits();
    if (mantissa + fraction == 0) i = dot;
    mantissa += fraction;
  }
  if (mantissa == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    const size_t mark = i++;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) i = mark;
  }
  return i;
}

double parse_decimal(std::string_view literal) {
  const std::string text(literal);
  if (text.find("Infinity") != std::string::npos) {
    return text[0] == '-' ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  return std::strtod(text.c_str(), nullptr);
}
}  // namespace

double js_parse_float(std::string_view s) {
  s = js_trim_start(s);
  const size_t length = decimal_literal_length(s);
  return length == 0 ? std::numeric_limits<double>::quiet_NaN() : parse_decimal(s.substr(0, length));
}

double js_string_to_number(std::string_view s) {
  s = js_trim(s);
  if (s.empty()) return 0;
  if (s.size() > 2 && s[0] == '0') {
    const int base = (s[1] == 'x' || s[1] == 'X') ? 16 : (s[1] == 'o' || s[1] == 'O') ? 8 : (s[1] == 'b' || s[1] == 'B') ? 2 : 0;
    if (base != 0) {
      double value = 0;
      for (char c : s.substr(2)) {
        const int digit = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : 99;
        if (digit >= base) return std::numeric_limits<double>::quiet_NaN();
        value = value * base + digit;
      }
      return value;
    }
  }
  const size_t length = decimal_literal_length(s);
  if (length != s.size()) return std::numeric_limits<double>::quiet_NaN();
  return parse_decimal(s);
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  char hex[16];
  for (size_t i = 0; i < s.size();) {
    char32_t c;
    const size_t n = decode_utf8(s, i, &c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7f && c < 0x10000)) {
          std::snprintf(hex, sizeof(hex), "\\u%04x", static_cast<unsigned>(c));
          out += hex;
        } else if (ensure_ascii && c >= 0x10000) {
          std::snprintf(hex, sizeof(hex), "\\u%04x", static_cast<unsigned>(0xd800 + ((c - 0x10000) >> 10)));
          out += hex;
          std::snprintf(hex, sizeof(hex), "\\u%04x", static_cast<unsigned>(0xdc00 + ((c - 0x10000) & 0x3ff)));
          out += hex;
        } else if (c == 0xfffd && n == 1) {
          append_utf8(out, c);  // an invalid byte, written as Node writes a lone surrogate
        } else {
          out.append(s.substr(i, n));
        }
    }
    i += n;
  }
  return out + "\"";
}

}  // namespace onnx_genai::chat_template
