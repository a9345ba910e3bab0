// Finds added tokens (special tokens like "<|im_start|>", or extra words) inside text: at
// each position the longest token wins, scanning left to right.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace onnx_genai::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A piece of text between added tokens, or one added token (token >= 0).
struct Section {
  std::string_view text;
  int32_t token = -1;  // index into the matcher's token list, -1 for plain text
};

class AddedTokenMatcher {
 public:
  void add(const AddedToken& token, std::string_view pattern);
  bool empty() const { return tokens_.empty(); }
  // Splits `text` into plain sections and added-token sections. Empty plain sections are
  // dropped; lstrip/rstrip trim the neighbouring plain text.
  std::vector<Section> split(std::string_view text) const;
  const AddedToken& token(int32_t index) const { return tokens_[index]; }

 private:
  // Longest token matching at `pos`: its index and byte length, or -1.
  int32_t match_at(std::string_view text, size_t pos, size_t& length) const;

  struct Node {
    int32_t token = -1;  // token ending here
  };
  std::vector<Node> nodes_{Node{}};
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child node
  bool first_byte_[256] = {};
  std::vector<AddedToken> tokens_;
};

}  // namespace onnx_genai::tokenizer
