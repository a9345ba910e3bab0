#include "constraints/token_trie.h"

#include <algorithm>

#include "constraints/utf8.h"

namespace onnx_genai::constraints {

Result<TokenTrie> TokenTrie::build(const Tokenizer& tokenizer, int32_t vocab_size, std::vector<int32_t> stop_ids) {
  if (vocab_size <= 0 || vocab_size > (1 << 24)) return OG_ERROR("token trie: vocabulary size ", vocab_size, " is out of range");
  for (const int32_t id : stop_ids) {
    if (id < 0 || id >= vocab_size) return OG_ERROR("token trie: stop token ", id, " is outside the vocabulary");
  }
  TokenTrie trie;
  trie.vocab_size_ = vocab_size;
  std::sort(stop_ids.begin(), stop_ids.end());
  stop_ids.erase(std::unique(stop_ids.begin(), stop_ids.end()), stop_ids.end());
  trie.stop_ids_ = std::move(stop_ids);
  trie.bytes_.resize(static_cast<size_t>(vocab_size));
  const int32_t known = std::min(vocab_size, tokenizer.vocab_size());
  std::vector<int32_t> order;
  for (int32_t id = 0; id < known; ++id) {
    if (tokenizer.is_special(id) || trie.is_stop(id)) continue;
    std::string bytes = tokenizer.token_bytes(id);
    if (bytes.empty() || bytes.size() > UINT16_MAX) continue;
    trie.bytes_[static_cast<size_t>(id)] = std::move(bytes);
    order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return trie.bytes_[static_cast<size_t>(a)] < trie.bytes_[static_cast<size_t>(b)] ||
           (trie.bytes_[static_cast<size_t>(a)] == trie.bytes_[static_cast<size_t>(b)] && a < b);
  });
  trie.link(order, trie.bytes_);
  return trie;
}

void TokenTrie::link(const std::vector<int32_t>& order, const std::vector<std::string>& bytes) {
  // Sorted strings give the preorder directly: each token shares its longest common prefix with
  // the one before, closes the nodes below that prefix, and opens nodes for the rest.
  std::vector<int32_t> path;  // node index per depth - 1
  const std::string* previous = nullptr;
  for (const int32_t id : order) {
    const std::string& s = bytes[static_cast<size_t>(id)];
    size_t common = 0;
    if (previous != nullptr) {
      while (common < s.size() && common < previous->size() && s[common] == (*previous)[common]) ++common;
    }
    while (path.size() > common) {
      nodes_[static_cast<size_t>(path.back())].subtree_end = static_cast<int32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<int32_t>(nodes_.size()));
      nodes_.push_back(Node{static_cast<uint8_t>(s[d]), static_cast<uint16_t>(d + 1), 0, 0, 0});
    }
    Node& end = nodes_[static_cast<size_t>(path.back())];
    if (end.token_count == 0) end.first_token = static_cast<int32_t>(tokens_.size());
    tokens_.push_back(id);
    ++end.token_count;
    max_depth_ = std::max(max_depth_, s.size());
    previous = &s;
  }
  while (!path.empty()) {
    nodes_[static_cast<size_t>(path.back())].subtree_end = static_cast<int32_t>(nodes_.size());
    path.pop_back();
  }
}

const TokenTrie::Inside& TokenTrie::inside(const std::bitset<128>& stays) const {
  const auto key = std::make_pair((stays >> 64).to_ullong(), (stays & std::bitset<128>(~0ull)).to_ullong());
  std::lock_guard lock(inside_->mutex);
  std::unique_ptr<Inside>& found = inside_->by_stays[key];
  if (found) return *found;
  found = std::make_unique<Inside>();
  found->mask.assign((static_cast<size_t>(vocab_size_) + 63) / 64, 0);
  found->others = std::make_unique<TokenTrie>();
  found->others->vocab_size_ = vocab_size_;
  std::vector<int32_t> others;
  for (const int32_t id : tokens_) {  // in byte order already
    int8_t at = utf8::kBoundary;
    for (const char c : bytes_[static_cast<size_t>(id)]) {
      const auto b = static_cast<uint8_t>(c);
      at = b < 0x80 && !stays.test(b) ? int8_t{utf8::kInvalid} : utf8::step(at, b);
      if (at == utf8::kInvalid) break;
    }
    if (at == utf8::kInvalid) {
      others.push_back(id);
    } else {
      found->mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
  }
  found->others->link(others, bytes_);
  return *found;
}

const std::string& TokenTrie::bytes(int32_t id) const {
  static const std::string kNone;
  return id >= 0 && static_cast<size_t>(id) < bytes_.size() ? bytes_[static_cast<size_t>(id)] : kNone;
}

bool TokenTrie::is_stop(int32_t id) const { return std::binary_search(stop_ids_.begin(), stop_ids_.end(), id); }

}  // namespace onnx_genai::constraints
