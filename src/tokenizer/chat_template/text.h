// Text helpers with JavaScript semantics, because the reference renderer (@huggingface/jinja) is
// JavaScript: its whitespace is /\s/, its string lengths count UTF-16 code units, and its slices
// and joins walk code points. Our strings are UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace onnx_genai::chat_template {

// Decodes the code point starting at s[i]; returns its byte length (1 for an invalid byte,
// which then decodes as U+FFFD).
size_t decode_utf8(std::string_view s, size_t i, char32_t* code_point);
void append_utf8(std::string& out, char32_t code_point);

// JavaScript's /\s/ (WhiteSpace and LineTerminator).
bool is_js_space(char32_t c);
// Length of the whitespace code point at s[i] (0 when s[i] does not start one).
size_t js_space_length(std::string_view s, size_t i);
// Length of the whitespace code point that ends just before s[end] (0 when none).
size_t js_space_length_before(std::string_view s, size_t end);

std::string_view js_trim_start(std::string_view s);
std::string_view js_trim_end(std::string_view s);
inline std::string_view js_trim(std::string_view s) { return js_trim_end(js_trim_start(s)); }

// String.prototype.length: UTF-16 code units.
size_t utf16_length(std::string_view s);
// Three-way comparison in UTF-16 code unit order (JavaScript's < on strings).
int compare_utf16(std::string_view a, std::string_view b);
// Array.from(string): one entry per code point.
std::vector<std::string_view> split_code_points(std::string_view s);
// String.prototype.at(index) on UTF-16 code units; a lone surrogate half becomes U+FFFD, as
// Node writes it. Returns false when out of range.
bool utf16_at(std::string_view s, double index, std::string* out);

// ASCII case mapping (toUpperCase/toLowerCase beyond ASCII is not mirrored).
std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);
inline bool is_ascii_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Number.prototype.toString() and JSON.stringify for numbers.
std::string js_number_to_string(double value);
// parseInt(s, 10) and parseFloat(s); NaN when nothing parses.
double js_parse_int(std::string_view s);
double js_parse_float(std::string_view s);
// Number(s) (used by loose equality); NaN when not numeric.
double js_string_to_number(std::string_view s);

// JSON.stringify(string), optionally with every code unit >= 0x7f escaped (ensure_ascii).
std::string json_quote(std::string_view s, bool ensure_ascii);

}  // namespace onnx_genai::chat_template
