// The KV block pool and its prefix cache: reference counts, chained keys (a block matches only
// after the same earlier blocks), LRU eviction of unreferenced cached blocks, and no leak over
// 10,000 random requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "engine/kv_block_pool.h"

namespace onnx_genai::engine {
namespace {

std::vector<int32_t> iota_tokens(int32_t first, int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

TEST(KvBlockPool, AllocatesDistinctBlocksAndRefusesWhatItLacks) {
  KvBlockPool pool(6, 4, false);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.allocate(4, a));
  EXPECT_FALSE(pool.allocate(3, b));
  EXPECT_TRUE(b.empty());  // nothing taken on failure
  ASSERT_TRUE(pool.allocate(2, b));
  std::set<int32_t> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  EXPECT_EQ(all.size(), 6u);
  EXPECT_EQ(pool.available_blocks(), 0);
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.available_blocks(), 6);
}

TEST(KvBlockPool, PrefixHitsNeedTheSameEarlierBlocksAndSalt) {
  KvBlockPool pool(8, 4, true);
  const std::vector<int32_t> tokens = iota_tokens(100, 10);  // 2 full blocks + 2
  std::vector<int32_t> blocks;
  std::vector<uint64_t> keys;
  ASSERT_TRUE(pool.allocate(3, blocks));
  pool.commit_full_blocks(blocks, tokens, 2, 0, keys);
  ASSERT_EQ(keys.size(), 2u);

  std::vector<uint64_t> hit_keys;
  std::vector<int32_t> hits = pool.match_prefix(tokens, 0, 10, hit_keys);
  EXPECT_EQ(hits, (std::vector<int32_t>{blocks[0], blocks[1]}));
  EXPECT_EQ(hit_keys, keys);
  pool.release(hits);

  // Same second block after a different first one: no hit at all.
  std::vector<int32_t> other = tokens;
  other[0] = 7;
  std::vector<uint64_t> none;
  EXPECT_TRUE(pool.match_prefix(other, 0, 10, none).empty());
  // Another salt shares nothing.
  EXPECT_TRUE(pool.match_prefix(tokens, 1, 10, none).empty());
  // max_blocks caps the match.
  std::vector<uint64_t> one_key;
  std::vector<int32_t> one = pool.match_prefix(tokens, 0, 1, one_key);
  EXPECT_EQ(one.size(), 1u);
  pool.release(one);
  EXPECT_EQ(pool.counters().hits, 3);
}

TEST(KvBlockPool, ReleasedCachedBlocksAreEvictedLeastRecentlyReleasedFirst) {
  KvBlockPool pool(4, 2, true);
  const std::vector<int32_t> first = iota_tokens(0, 4), second = iota_tokens(50, 4);
  std::vector<int32_t> a, b;
  std::vector<uint64_t> ka, kb;
  ASSERT_TRUE(pool.allocate(2, a));
  pool.commit_full_blocks(a, first, 2, 0, ka);
  ASSERT_TRUE(pool.allocate(2, b));
  pool.commit_full_blocks(b, second, 2, 0, kb);
  pool.release(a);  // a's tail block is the first candidate, then a's head
  pool.release(b);
  EXPECT_EQ(pool.available_blocks(), 4);
  std::vector<int32_t> c;
  ASSERT_TRUE(pool.allocate(1, c));
  EXPECT_EQ(c[0], a[1]);
  EXPECT_EQ(pool.counters().evictions, 1);
  // `first` lost its second block: only its first still matches; `second` is whole.
  std::vector<uint64_t> k1, k2;
  EXPECT_EQ(pool.match_prefix(first, 0, 2, k1).size(), 1u);
  EXPECT_EQ(pool.match_prefix(second, 0, 2, k2).size(), 2u);
}

TEST(KvBlockPool, SharedBlocksStayUntilTheLastHolderReleases) {
  KvBlockPool pool(3, 2, true);
  const std::vector<int32_t> tokens = iota_tokens(9, 4);
  std::vector<int32_t> a;
  std::vector<uint64_t> ka, kb;
  ASSERT_TRUE(pool.allocate(2, a));
  pool.commit_full_blocks(a, tokens, 2, 0, ka);
  std::vector<int32_t> b = pool.match_prefix(tokens, 0, 2, kb);
  ASSERT_EQ(b, a);
  pool.release(a);
  EXPECT_EQ(pool.available_blocks(), 1);  // b still holds both
  std::vector<int32_t> c;
  EXPECT_FALSE(pool.allocate(2, c));
  pool.release(b);
  EXPECT_EQ(pool.available_blocks(), 3);
}

TEST(KvBlockPool, TenThousandRandomRequestsLeakNothing) {
  constexpr int64_t kBlocks = 64, kBlockSize = 4;
  KvBlockPool pool(kBlocks, kBlockSize, true);
  std::mt19937 rng(5);
  struct Held {
    std::vector<int32_t> blocks;
  };
  std::vector<Held> live;
  const std::vector<int32_t> shared = iota_tokens(1000, 12);
  for (int i = 0; i < 10000; ++i) {
    if (!live.empty() && (rng() % 3 == 0 || pool.available_blocks() < 8)) {
      const size_t victim = rng() % live.size();
      pool.release(live[victim].blocks);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
      continue;
    }
    // Half the prompts start with a shared prefix; lengths are random.
    std::vector<int32_t> tokens = rng() % 2 ? shared : std::vector<int32_t>{};
    const int extra = static_cast<int>(rng() % 20) + 1;
    for (int j = 0; j < extra; ++j) tokens.push_back(static_cast<int32_t>(rng() % 50));
    Held h;
    std::vector<uint64_t> keys;
    h.blocks = pool.match_prefix(tokens, 0, static_cast<int64_t>(tokens.size() - 1) / kBlockSize, keys);
    const auto need = static_cast<int64_t>((tokens.size() + kBlockSize - 1) / kBlockSize) - static_cast<int64_t>(h.blocks.size());
    if (!pool.allocate(need, h.blocks)) {
      pool.release(h.blocks);
      continue;
    }
    pool.commit_full_blocks(h.blocks, tokens, static_cast<int64_t>(tokens.size()) / kBlockSize, 0, keys);
    live.push_back(std::move(h));
  }
  for (const Held& h : live) pool.release(h.blocks);
  EXPECT_EQ(pool.available_blocks(), kBlocks);
  EXPECT_GT(pool.counters().hits, 0);
  EXPECT_GT(pool.counters().evictions, 0);
}

}  // namespace
}  // namespace onnx_genai::engine
