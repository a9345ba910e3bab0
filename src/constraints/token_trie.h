// A model's vocabulary as bytes, arranged as a trie for computing token masks.
//
// Every token's bytes come from the tokenizer (Tokenizer::token_bytes: byte-level BPE and
// SentencePiece byte-fallback tokens as raw bytes). Special tokens and tokens without bytes are
// left out: a grammar never allows them; stop tokens are allowed only by the matcher, and only
// when the text is complete. The trie is stored in preorder, each node knowing where its subtree
// ends, so a mask is one forward pass that skips a whole subtree when its first byte is refused
// (the layout llguidance's token trie uses).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "onnx_genai/status.h"
#include "onnx_genai/tokenizer.h"

namespace onnx_genai::constraints {

class TokenTrie {
 public:
  struct Node {
    uint8_t byte;
    uint16_t depth;          // 1 for a token's first byte
    int32_t subtree_end;     // index of the first node after this one's subtree
    int32_t first_token;     // tokens_[first_token, first_token + token_count) end here
    int32_t token_count;
  };

  // `vocab_size` is the logits width (it may exceed the tokenizer's: padded embeddings), and
  // `stop_ids` the tokens that end generation (EOS and the generation config's others).
  static Result<TokenTrie> build(const Tokenizer& tokenizer, int32_t vocab_size, std::vector<int32_t> stop_ids);

  int32_t vocab_size() const { return vocab_size_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& node_tokens() const { return tokens_; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  size_t max_depth() const { return max_depth_; }
  // The bytes of token `id` ("" for special and unknown tokens).
  const std::string& bytes(int32_t id) const;
  bool is_stop(int32_t id) const;

 private:
  int32_t vocab_size_ = 0;
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> stop_ids_;
  size_t max_depth_ = 0;
};

}  // namespace onnx_genai::constraints
