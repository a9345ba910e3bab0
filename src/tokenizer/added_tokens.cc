#include "tokenizer/added_tokens.h"

#include "tokenizer/components.h"
#include "tokenizer/unicode.h"

namespace onnx_genai::tokenizer {

void AddedTokenMatcher::add(const AddedToken& token, std::string_view pattern) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (char c : pattern) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
    auto it = edges_.find(key);
    if (it == edges_.end()) {
      it = edges_.emplace(key, static_cast<int32_t>(nodes_.size())).first;
      nodes_.push_back(Node{});
    }
    node = it->second;
  }
  first_byte_[static_cast<uint8_t>(pattern[0])] = true;
  nodes_[node].token = static_cast<int32_t>(tokens_.size());
  tokens_.push_back(token);
}

namespace {

// A word character for single_word tokens (Rust tokenizers: alphanumeric or '_').
bool is_word_char(char32_t cp) {
  if (cp == '_') return true;
  const unicode::Category c = unicode::category(cp);
  return (c >= unicode::Category::Lu && c <= unicode::Category::Lo) ||
         (c >= unicode::Category::Nd && c <= unicode::Category::No);
}

bool word_char_before(std::string_view text, size_t pos) {
  if (pos == 0) return false;
  size_t start = pos - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return is_word_char(unicode::next_code_point(text, start));
}

bool word_char_at(std::string_view text, size_t pos) {
  return pos < text.size() && is_word_char(unicode::next_code_point(text, pos));
}

}  // namespace

int32_t AddedTokenMatcher::match_at(std::string_view text, size_t pos, size_t& length) const {
  int32_t node = 0, found = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]));
    if (it == edges_.end()) break;
    node = it->second;
    if (nodes_[node].token >= 0) {
      found = nodes_[node].token;
      length = i + 1 - pos;
    }
  }
  return found;
}

std::vector<Section> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Section> sections;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    size_t length = 0;
    const int32_t found = first_byte_[static_cast<uint8_t>(text[i])] ? match_at(text, i, length) : -1;
    if (found < 0 || (tokens_[found].single_word && (word_char_before(text, i) || word_char_at(text, i + length)))) {
      ++i;
      continue;
    }
    if (i > start) sections.push_back({text.substr(start, i - start), -1});
    sections.push_back({text.substr(i, length), found});
    i += length;
    start = i;
  }
  if (start < text.size()) sections.push_back({text.substr(start), -1});
  // lstrip / rstrip eat the whitespace next to the token, as JavaScript's trimEnd/trimStart.
  for (size_t k = 0; k < sections.size(); ++k) {
    if (sections[k].token < 0) continue;
    const AddedToken& token = tokens_[sections[k].token];
    if (token.lstrip && k > 0 && sections[k - 1].token < 0) sections[k - 1].text = js_trim_end(sections[k - 1].text);
    if (token.rstrip && k + 1 < sections.size() && sections[k + 1].token < 0) {
      sections[k + 1].text = js_trim_start(sections[k + 1].text);
    }
  }
  return sections;
}

}  // namespace onnx_genai::tokenizer
