// A model's vocabulary as bytes, arranged as a trie for computing token masks.
//
// Every token's bytes come from the tokenizer (Tokenizer::token_bytes: byte-level BPE and
// SentencePiece byte-fallback tokens as raw bytes). Special tokens and tokens without bytes are
// left out: no text spells them (a grammar may name one, which the mask then allows by id); stop
// tokens are allowed only by the matcher, and only when the text is complete. The trie is stored in preorder, each node knowing where its subtree
// ends, so a mask is one forward pass that skips a whole subtree when its first byte is refused
// (the layout llguidance's token trie uses).
//
// Inside a string nearly every token is allowed, and walking all ~330k nodes is the slowest mask
// there is. Which tokens stay inside does not depend on the parser's state beyond the bytes that
// keep it there and how many characters may still come (XGrammar's context-independent tokens):
// inside() gives, per such byte set, the mask of the tokens spelled with them, the subtrees
// holding only such tokens, which a mask there skips, and where few tokens leave (a JSON
// string's inside: 3% of Qwen's vocabulary), each of those cut where it leaves, so that a mask
// walks only what follows the cut, from the run's state there.
#pragma once

#include <bitset>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
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
  // A token not spelled with a run's bytes: its first `chars` whole characters are (the first
  // `prefix` bytes), the rest begins with `exit`, a byte that leaves the run or a character cut
  // by one. Inside the run it is allowed iff the rest goes on from the run's state after `chars`.
  struct Leaving {
    int32_t id;
    int32_t chars;
    uint16_t prefix;
    uint8_t exit;
    int32_t rest = 0;  // the same for tokens with equal rests: the list index of the first
  };
  // Inside a string (Automaton::string_run): the tokens spelled with the ASCII bytes `stays` and
  // (when `unicode`) whole UTF-8 characters beyond ASCII (the last may be cut), of at most
  // `chars` characters (-1: any); the nodes whose subtrees hold only such tokens (a bit per
  // node); and every other token as it leaves (sorted by the bytes after the cut, then `chars`,
  // so that equal rests are neighbours), null where more than kMaxLeaving do (an ASCII-only
  // run: the trie walk shares their prefixes). Built on first use per byte set and kept
  // (thread-safe); null once kMaxInsideTables are kept (the caller walks the whole trie).
  struct InsideView {
    const std::vector<uint64_t>* mask = nullptr;
    const std::vector<uint64_t>* whole = nullptr;
    const std::vector<Leaving>* leaving = nullptr;
  };
  static constexpr size_t kMaxLeaving = 8192;
  InsideView inside(const std::bitset<128>& stays, bool unicode, int32_t chars) const;
  static constexpr size_t kMaxInsideTables = 32;
  // The bytes of token `id` ("" for special and unknown tokens). Inline: mask walks read it
  // for every token leaving a string.
  const std::string& bytes(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < bytes_.size() ? bytes_[static_cast<size_t>(id)] : kNoBytes;
  }
  bool is_stop(int32_t id) const;

 private:
  static inline const std::string kNoBytes;
  int32_t vocab_size_ = 0;
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> stop_ids_;
  size_t max_depth_ = 0;
  struct Inside {
    std::vector<int32_t> tokens;  // spelled with `stays`, by number of characters
    std::vector<size_t> up_to;    // up_to[c]: how many of them have at most c characters
    std::map<int32_t, std::vector<uint64_t>> masks;  // by character budget, -1 any
    std::vector<uint64_t> whole;  // per node: its subtree's tokens are all the table's
    std::vector<Leaving> leaving;
  };
  struct InsideCache {
    std::mutex mutex;
    std::map<std::tuple<uint64_t, uint64_t, bool>, std::unique_ptr<Inside>> by_stays;
  };
  std::unique_ptr<InsideCache> inside_ = std::make_unique<InsideCache>();

  // The table for `stays` (the cache's mutex held).
  Inside build_inside(const std::bitset<128>& stays, bool unicode) const;
  // Nodes and tokens for the tokens `order` (sorted by their bytes, `bytes` by id).
  void link(const std::vector<int32_t>& order, const std::vector<std::string>& bytes);
};

}  // namespace onnx_genai::constraints
