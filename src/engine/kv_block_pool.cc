#include "engine/kv_block_pool.h"

#include <algorithm>
#include <numeric>

namespace onnx_genai::engine {

namespace {

// 64-bit mix (splitmix64's finalizer): every input bit moves every output bit.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

KvBlockPool::KvBlockPool(int64_t num_blocks, int64_t block_size, bool prefix_caching)
    : block_size_(block_size),
      prefix_caching_(prefix_caching),
      refs_(static_cast<size_t>(num_blocks), 0),
      cached_(static_cast<size_t>(num_blocks)),
      free_(static_cast<size_t>(num_blocks)),
      lru_pos_(static_cast<size_t>(num_blocks)),
      in_lru_(static_cast<size_t>(num_blocks), false) {
  // Lowest ids handed out first (popped from the back).
  std::iota(free_.rbegin(), free_.rend(), 0);
}

uint64_t KvBlockPool::chain_key(uint64_t parent, std::span<const int32_t> tokens, uint64_t salt) const {
  uint64_t h = mix(parent ^ mix(salt + 0x9e3779b97f4a7c15ULL));
  for (const int32_t t : tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return h;
}

std::optional<int32_t> KvBlockPool::find(uint64_t key, uint64_t parent, std::span<const int32_t> tokens) const {
  const auto [first, last] = by_key_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    const CachedBlock& c = *cached_[static_cast<size_t>(it->second)];
    if (c.parent == parent && std::equal(c.tokens.begin(), c.tokens.end(), tokens.begin(), tokens.end())) return it->second;
  }
  return std::nullopt;
}

void KvBlockPool::take(int32_t block) {
  const auto b = static_cast<size_t>(block);
  if (in_lru_[b]) {
    evictable_.erase(lru_pos_[b]);
    in_lru_[b] = false;
  }
  ++refs_[b];
}

void KvBlockPool::uncache(int32_t block) {
  std::optional<CachedBlock>& c = cached_[static_cast<size_t>(block)];
  const auto [first, last] = by_key_.equal_range(c->key);
  for (auto it = first; it != last; ++it) {
    if (it->second == block) {
      by_key_.erase(it);
      break;
    }
  }
  c.reset();
}

std::vector<int32_t> KvBlockPool::match_prefix(std::span<const int32_t> tokens, uint64_t salt, int64_t max_blocks,
                                               std::vector<uint64_t>& keys) {
  std::vector<int32_t> hits;
  if (!prefix_caching_) return hits;
  const int64_t full = std::min(max_blocks, static_cast<int64_t>(tokens.size()) / block_size_);
  uint64_t parent = 0;
  for (int64_t b = 0; b < full; ++b) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(b * block_size_), static_cast<size_t>(block_size_));
    const uint64_t key = chain_key(parent, block_tokens, salt);
    ++counters_.queries;
    const std::optional<int32_t> found = find(key, parent, block_tokens);
    if (!found) break;
    ++counters_.hits;
    take(*found);
    hits.push_back(*found);
    keys.push_back(key);
    parent = key;
  }
  return hits;
}

bool KvBlockPool::allocate(int64_t n, std::vector<int32_t>& blocks) {
  if (n > available_blocks()) return false;
  for (int64_t i = 0; i < n; ++i) {
    int32_t block;
    if (!free_.empty()) {
      block = free_.back();
      free_.pop_back();
    } else {
      block = evictable_.front();
      evictable_.pop_front();
      in_lru_[static_cast<size_t>(block)] = false;
      uncache(block);
      ++counters_.evictions;
    }
    refs_[static_cast<size_t>(block)] = 1;
    blocks.push_back(block);
  }
  return true;
}

void KvBlockPool::commit_full_blocks(std::span<const int32_t> blocks, std::span<const int32_t> tokens, int64_t full,
                                     uint64_t salt, std::vector<uint64_t>& keys) {
  if (!prefix_caching_) return;
  for (auto b = static_cast<int64_t>(keys.size()); b < full; ++b) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(b * block_size_), static_cast<size_t>(block_size_));
    const uint64_t parent = b == 0 ? 0 : keys.back();
    const uint64_t key = chain_key(parent, block_tokens, salt);
    keys.push_back(key);
    const int32_t block = blocks[static_cast<size_t>(b)];
    if (cached_[static_cast<size_t>(block)] || find(key, parent, block_tokens)) continue;
    cached_[static_cast<size_t>(block)] = CachedBlock{key, parent, std::vector<int32_t>(block_tokens.begin(), block_tokens.end())};
    by_key_.emplace(key, block);
  }
}

void KvBlockPool::release(std::span<const int32_t> blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    const auto b = static_cast<size_t>(*it);
    if (--refs_[b] > 0) continue;
    if (cached_[b]) {
      lru_pos_[b] = evictable_.insert(evictable_.end(), *it);
      in_lru_[b] = true;
    } else {
      free_.push_back(*it);
    }
  }
}

}  // namespace onnx_genai::engine
