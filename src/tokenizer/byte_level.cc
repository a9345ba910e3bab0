#include "tokenizer/byte_level.h"

#include "tokenizer/unicode.h"

namespace onnx_genai::tokenizer {
namespace {

// Printable bytes map to themselves; the rest to 256 + n in byte order (GPT-2's bytes_to_unicode).
std::array<char32_t, 256> byte_code_points() {
  std::array<char32_t, 256> cps{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    cps[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return cps;
}

}  // namespace

const std::array<std::string, 256>& byte_to_char() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    const auto cps = byte_code_points();
    for (int b = 0; b < 256; ++b) unicode::append_utf8(t[b], cps[b]);
    return t;
  }();
  return table;
}

int char_to_byte(char32_t cp) {
  static const std::array<int16_t, 324> table = [] {
    std::array<int16_t, 324> t;
    t.fill(-1);
    const auto cps = byte_code_points();
    for (int b = 0; b < 256; ++b) t[cps[b]] = static_cast<int16_t>(b);
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

std::string bytes_to_chars(std::string_view text) {
  const auto& table = byte_to_char();
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) out += table[static_cast<uint8_t>(c)];
  return out;
}

}  // namespace onnx_genai::tokenizer
