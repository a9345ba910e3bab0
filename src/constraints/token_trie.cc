#include "constraints/token_trie.h"

#include <algorithm>
#include <string_view>
#include <tuple>

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

TokenTrie::Inside TokenTrie::build_inside(const std::bitset<128>& stays, bool unicode) const {
  // Forward (preorder): whether each node's path is spelled with the run's bytes, and in how
  // many characters; its tokens go to the table by that count. Below the first node that is
  // not, every token leaves the run after the path's last whole character.
  Inside in;
  const size_t n = nodes_.size();
  std::vector<uint8_t> spelled(n);
  std::vector<int8_t> at_depth(max_depth_ + 1, utf8::kBoundary);
  std::vector<int32_t> chars_at(max_depth_ + 1, 0);
  std::vector<std::vector<int32_t>> by_chars;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = nodes_[i];
    const bool refused = node.byte < 0x80 ? !stays.test(node.byte) : !unicode;
    const int8_t at = refused ? int8_t{utf8::kInvalid} : utf8::step(at_depth[node.depth - 1u], node.byte);
    if (at == utf8::kInvalid) {
      size_t whole = node.depth - 1u;
      while (at_depth[whole] != utf8::kBoundary) --whole;
      const auto end = static_cast<size_t>(node.subtree_end);
      for (size_t j = i; j < end && in.leaving.size() <= kMaxLeaving; ++j) {
        for (int32_t k = nodes_[j].first_token; k < nodes_[j].first_token + nodes_[j].token_count; ++k) {
          const int32_t id = tokens_[static_cast<size_t>(k)];
          const auto exit = static_cast<uint8_t>(bytes_[static_cast<size_t>(id)][whole]);
          in.leaving.push_back(Leaving{id, chars_at[whole], static_cast<uint16_t>(whole), exit});
        }
      }
      i = end - 1;
      continue;
    }
    at_depth[node.depth] = at;
    chars_at[node.depth] = chars_at[node.depth - 1u] + (node.byte < 0x80 || node.byte >= 0xC0);
    spelled[i] = 1;
    if (node.token_count == 0) continue;
    const auto chars = static_cast<size_t>(chars_at[node.depth]);
    if (by_chars.size() <= chars) by_chars.resize(chars + 1);
    by_chars[chars].insert(by_chars[chars].end(), tokens_.begin() + node.first_token,
                           tokens_.begin() + node.first_token + node.token_count);
  }
  for (const std::vector<int32_t>& ids : by_chars) {
    in.tokens.insert(in.tokens.end(), ids.begin(), ids.end());
    in.up_to.push_back(in.tokens.size());
  }
  // A subtree is the table's when no node in it is unspelled: the first unspelled node at or
  // after each node lies past its subtree (one backward pass).
  in.whole.assign((n + 63) / 64, 0);
  size_t unspelled = n;
  for (size_t i = n; i-- > 0;) {
    if (!spelled[i]) unspelled = i;
    if (unspelled >= static_cast<size_t>(nodes_[i].subtree_end)) in.whole[i >> 6] |= uint64_t{1} << (i & 63);
  }
  if (in.leaving.size() > kMaxLeaving) {
    in.leaving = {};
    return in;
  }
  const auto rest = [&](const Leaving& t) { return std::string_view(bytes_[static_cast<size_t>(t.id)]).substr(t.prefix); };
  std::sort(in.leaving.begin(), in.leaving.end(), [&](const Leaving& a, const Leaving& b) {
    return std::make_tuple(rest(a), a.chars, a.id) < std::make_tuple(rest(b), b.chars, b.id);
  });
  for (size_t k = 1; k < in.leaving.size(); ++k) {
    const bool same = rest(in.leaving[k]) == rest(in.leaving[k - 1]);
    in.leaving[k].rest = same ? in.leaving[k - 1].rest : static_cast<int32_t>(k);
  }
  return in;
}

TokenTrie::InsideView TokenTrie::inside(const std::bitset<128>& stays, bool unicode, int32_t chars) const {
  const auto key = std::make_tuple((stays >> 64).to_ullong(), (stays & std::bitset<128>(~0ull)).to_ullong(), unicode);
  std::lock_guard lock(inside_->mutex);
  auto it = inside_->by_stays.find(key);
  if (it == inside_->by_stays.end()) {
    if (inside_->by_stays.size() >= kMaxInsideTables) return {};
    it = inside_->by_stays.emplace(key, std::make_unique<Inside>(build_inside(stays, unicode))).first;
  }
  Inside& in = *it->second;
  if (chars < 0 || static_cast<size_t>(chars) >= in.up_to.size()) chars = -1;  // every token fits
  std::vector<uint64_t>& mask = in.masks[chars];
  if (mask.empty()) {
    mask.assign((static_cast<size_t>(vocab_size_) + 63) / 64, 0);
    const size_t count = chars < 0 ? in.tokens.size() : in.up_to[static_cast<size_t>(chars)];
    for (size_t k = 0; k < count; ++k) {
      const auto id = static_cast<uint32_t>(in.tokens[k]);
      mask[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }
  return {&mask, &in.whole, in.leaving.empty() ? nullptr : &in.leaving};
}

bool TokenTrie::is_stop(int32_t id) const { return std::binary_search(stop_ids_.begin(), stop_ids_.end(), id); }

}  // namespace onnx_genai::constraints
