// A model's vocabulary as bytes, arranged as a trie for computing token masks.
//
// Every token's bytes come from the tokenizer (Tokenizer::token_bytes: byte-level BPE and
// SentencePiece byte-fallback tokens as raw bytes). Special tokens and tokens without bytes are
// left out: a grammar never allows them; stop tokens are allowed only by the matcher, and only
// when the text is complete. The trie is stored in preorder, each node knowing where its subtree
// ends, so a mask is one forward pass that skips a whole subtree when its first byte is refused
// (the layout llguidance's token trie uses).
//
// Inside a string nearly every token is allowed, and walking all ~330k nodes is the slowest mask
// there is. Which tokens stay inside does not depend on the parser's state beyond the ASCII
// bytes that keep it there (XGrammar's context-independent tokens): inside() gives, per such
// byte set, the mask of tokens spelled with those bytes and whole UTF-8 characters, and a trie
// of the rest, the only tokens a mask there must still walk.
#pragma once

#include <bitset>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
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
  struct Inside {
    std::vector<uint64_t> mask;  // tokens of `stays` bytes and UTF-8 characters (valid prefixes)
    std::unique_ptr<TokenTrie> others;
  };
  // For the ASCII bytes `stays` that keep a string's inside where it is; computed on first use
  // and kept (thread-safe).
  const Inside& inside(const std::bitset<128>& stays) const;
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
  struct InsideCache {
    std::mutex mutex;
    std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<Inside>> by_stays;
  };
  std::unique_ptr<InsideCache> inside_ = std::make_unique<InsideCache>();

  // Nodes and tokens for the tokens `order` (sorted by their bytes, `bytes` by id).
  void link(const std::vector<int32_t>& order, const std::vector<std::string>& bytes);
};

}  // namespace onnx_genai::constraints
