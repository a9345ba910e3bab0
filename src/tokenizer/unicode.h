// UTF-8 helpers and the Unicode algorithms tokenizers need: normalization forms, lowercase,
// general categories, and the WHATWG lossy UTF-8 decoder that Hugging Face decoders use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace onnx_genai::unicode {

// Decodes the code point at s[i] and advances i. `s` must be valid UTF-8.
inline char32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const size_t length = b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  char32_t cp = b0 & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += length;
  return cp;
}

// Byte length of the UTF-8 sequence starting with lead byte `b0`.
inline size_t sequence_length(uint8_t b0) { return b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4; }

void append_utf8(std::string& out, char32_t cp);

// Byte offset of the first ill-formed UTF-8 sequence, or nullopt when `s` is valid.
std::optional<size_t> find_invalid_utf8(std::string_view s);

// Decodes bytes as UTF-8 replacing each maximal ill-formed subpart by U+FFFD, exactly as the
// WHATWG TextDecoder (fatal: false) does.
std::string decode_lossy(std::string_view bytes);

enum class Form { kNFC, kNFD, kNFKC, kNFKD };
std::string normalize(std::string_view s, Form form);

// Full lowercase mapping (one code point may map to several), final sigma included.
std::string to_lower(std::string_view s);

// General category, in the order of gen_unicode_tables.py's CATEGORIES.
enum class Category : uint8_t {
  Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe, Pi, Pf, Po, Sm, Sc, Sk, So,
  Zs, Zl, Zp, Cc, Cf, Cs, Co
};
Category category(char32_t cp);
inline bool is_letter(char32_t cp) {
  const Category c = category(cp);
  return c >= Category::Lu && c <= Category::Lo;
}
inline bool is_mark(char32_t cp) {
  const Category c = category(cp);
  return c >= Category::Mn && c <= Category::Me;
}
inline bool is_punctuation(char32_t cp) {
  const Category c = category(cp);
  return c >= Category::Pc && c <= Category::Po;
}
// The Unicode White_Space property.
bool is_white_space(char32_t cp);
// What JavaScript's \s and String.prototype.trim() treat as whitespace (White_Space minus
// U+0085, plus U+FEFF).
bool is_js_space(char32_t cp);

}  // namespace onnx_genai::unicode
