// The serving engine's KV block manager: which of the pool's blocks each sequence holds, and the
// automatic prefix cache over them. It owns no KV memory (the model runner's cache tensors are
// [blocks, block_size, kv_heads, head_size] per layer); it hands out block ids.
//
// Prefix caching: a block whose positions are all computed is keyed by a chained hash, the hash
// of its parent block's key, its tokens and a salt (what else changes its contents: the model is
// fixed per pool, so only the caller's salt), and the block's tokens and parent key are kept to
// confirm a match exactly (no trust in 64 bits alone). A sequence whose prompt starts with cached
// blocks takes references to them and skips computing them. Blocks are reference counted; one no
// sequence holds stays cached and becomes evictable, least recently released first; allocation
// takes never-cached free blocks before evicting.
//
// Not thread-safe: the engine's step loop owns it.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace onnx_genai::engine {

struct PrefixCacheCounters {
  int64_t queries = 0;        // blocks looked up
  int64_t hits = 0;           // blocks found
  int64_t evictions = 0;      // cached blocks reused for other contents
};

class KvBlockPool {
 public:
  KvBlockPool(int64_t num_blocks, int64_t block_size, bool prefix_caching);

  int64_t num_blocks() const { return static_cast<int64_t>(refs_.size()); }
  int64_t block_size() const { return block_size_; }
  // Blocks allocate() can hand out now (free ones and evictable cached ones).
  int64_t available_blocks() const { return static_cast<int64_t>(free_.size() + evictable_.size()); }
  int64_t used_blocks() const { return num_blocks() - available_blocks(); }
  bool prefix_caching() const { return prefix_caching_; }
  const PrefixCacheCounters& counters() const { return counters_; }

  // The longest run of cached full blocks that `tokens` starts with (at most `max_blocks`), a
  // reference taken on each; `keys` receives their chained keys (for commit_full_blocks).
  std::vector<int32_t> match_prefix(std::span<const int32_t> tokens, uint64_t salt, int64_t max_blocks,
                                    std::vector<uint64_t>& keys);
  // `n` blocks with one reference each, appended to `blocks`; false (and nothing taken) when the
  // pool has fewer.
  bool allocate(int64_t n, std::vector<int32_t>& blocks);
  // Registers blocks [keys.size(), full) of a sequence whose first `full` blocks hold computed
  // `tokens`, extending `keys`; a block whose key another block already has stays uncached.
  void commit_full_blocks(std::span<const int32_t> blocks, std::span<const int32_t> tokens, int64_t full, uint64_t salt,
                          std::vector<uint64_t>& keys);
  // Drops one reference on each block. Cached blocks nobody holds become evictable, the last of
  // `blocks` first (a sequence's tail is the least likely to be shared); others become free.
  void release(std::span<const int32_t> blocks);

 private:
  struct CachedBlock {
    uint64_t key = 0, parent = 0;
    std::vector<int32_t> tokens;
  };

  uint64_t chain_key(uint64_t parent, std::span<const int32_t> tokens, uint64_t salt) const;
  std::optional<int32_t> find(uint64_t key, uint64_t parent, std::span<const int32_t> tokens) const;
  void take(int32_t block);  // a reference on a cached block, evictable or not
  void uncache(int32_t block);

  int64_t block_size_;
  bool prefix_caching_;
  std::vector<int32_t> refs_;
  std::vector<std::optional<CachedBlock>> cached_;  // per block, when it is in the prefix cache
  std::unordered_multimap<uint64_t, int32_t> by_key_;
  std::vector<int32_t> free_;                  // never cached or uncached, refs 0
  std::list<int32_t> evictable_;               // cached, refs 0, least recently released first
  std::vector<std::list<int32_t>::iterator> lru_pos_;  // per block, valid while evictable
  std::vector<bool> in_lru_;
  PrefixCacheCounters counters_;
};

}  // namespace onnx_genai::engine
