// A minimal pull reader over JSON text, used for the large parts of tokenizer.json (vocab,
// merges) that nlohmann::json would take too long to build as a DOM. Everything small is
// handed to nlohmann as a raw span.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "onnx_genai/status.h"

namespace onnx_genai::tokenizer {

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  // Skips whitespace and reports whether the next character is `c` (without consuming it).
  // (Inline, as are skip_space and consume: they run several times per vocabulary entry.)
  bool peek(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  // Skips whitespace and consumes `c`, or fails naming the offset.
  Status expect(char c);
  // Consumes `c` if it is next; reports whether it did.
  bool consume(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  Result<std::string> read_string();
  // Reads a string into `out` (replacing its contents), reusing its buffer.
  Status read_string_into(std::string& out);
  Result<int64_t> read_integer();
  Result<double> read_number();
  // Containers nested deeper than this are rejected (by skip_value).
  static constexpr size_t kMaxDepth = 256;

  // Skips one value of any type and returns its raw text. Brackets are only counted, not
  // matched: the text is parsed properly later.
  Result<std::string_view> skip_value();
  size_t offset() const { return pos_; }

  // Iterates an object's members: calls `on_member(key)`, which must consume the value.
  template <typename OnMember>
  Status read_object(OnMember&& on_member) {
    OG_RETURN_IF_ERROR(expect('{'));
    if (consume('}')) return Status::ok();
    do {
      OG_ASSIGN_OR_RETURN(std::string key, read_string());
      OG_RETURN_IF_ERROR(expect(':'));
      OG_RETURN_IF_ERROR(on_member(key));
    } while (consume(','));
    return expect('}');
  }

  // Like read_object, reading each key into `key` (reusing its buffer) before `on_member()`.
  template <typename OnMember>
  Status read_object_into(std::string& key, OnMember&& on_member) {
    OG_RETURN_IF_ERROR(expect('{'));
    if (consume('}')) return Status::ok();
    do {
      OG_RETURN_IF_ERROR(read_string_into(key));
      OG_RETURN_IF_ERROR(expect(':'));
      OG_RETURN_IF_ERROR(on_member());
    } while (consume(','));
    return expect('}');
  }

  // Iterates an array's elements: calls `on_element()`, which must consume the element.
  template <typename OnElement>
  Status read_array(OnElement&& on_element) {
    OG_RETURN_IF_ERROR(expect('['));
    if (consume(']')) return Status::ok();
    do {
      OG_RETURN_IF_ERROR(on_element());
    } while (consume(','));
    return expect(']');
  }

 private:
  static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }
  Status skip_string();
  Status error(std::string_view what) const;

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace onnx_genai::tokenizer
