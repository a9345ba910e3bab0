#include "tokenizer/chat_template/sort.h"

#include "tokenizer/chat_template/text.h"

namespace onnx_genai::chat_template {

namespace {
// Primary weight of an ASCII character in ICU's root collation order; other code points sort
// after ASCII by code point.
int primary_weight(char32_t c) {
  static constexpr std::string_view kPunctuationOrder = "\t\n\v\f\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";
  if (c < 0x80) {
    if (c >= 'A' && c <= 'Z') c = c - 'A' + 'a';
    const size_t punctuation = kPunctuationOrder.find(static_cast<char>(c));
    if (punctuation != std::string_view::npos) return static_cast<int>(punctuation);
    if (c >= '0' && c <= '9') return 100 + static_cast<int>(c - '0');
    if (c >= 'a' && c <= 'z') return 200 + static_cast<int>(c - 'a');
    return 300 + static_cast<int>(c);
  }
  return 1000 + static_cast<int>(c);
}
}  // namespace

int locale_compare(std::string_view a, std::string_view b) {
  int tertiary = 0;  // first case difference: lowercase sorts before uppercase
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    char32_t x, y;
    i += decode_utf8(a, i, &x);
    j += decode_utf8(b, j, &y);
    const int wx = primary_weight(x), wy = primary_weight(y);
    if (wx != wy) return wx < wy ? -1 : 1;
    if (tertiary == 0 && x != y) tertiary = (x >= 'a' && x <= 'z') ? -1 : 1;
  }
  if (i < a.size()) return 1;
  if (j < b.size()) return -1;
  return tertiary;
}

}  // namespace onnx_genai::chat_template
