// onnx_genai PagedAttention against the contiguous GroupQueryAttention kernel (itself pinned to
// ONNX Runtime by tests/runtime/attention_ort_test.cc): several sequences, each with a cached past
// and new tokens, packed into one call over a block pool with fragmented, shuffled block tables,
// shared prefix blocks and lengths that are not multiples of the block. Each sequence run alone
// through GroupQueryAttention (batch 1, its past as a contiguous buffer) must give the same
// output rows and the same new cache rows. Attention sinks (head_sink, gpt-oss) too.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "ops/attention_test_util.h"
#include "ops/schema/paged_attention.h"

namespace onnx_genai::testing {
namespace {

struct PagedSequence {
  int64_t cached = 0;  // positions already in the cache
  int64_t fresh = 0;   // new tokens this call
  int64_t shares_prefix_of = -1;  // >= 0: its first full blocks are that sequence's (same contents)
};

struct PagedCase {
  std::vector<PagedSequence> seqs;
  int64_t heads = 4, kv_heads = 2, head = 16, block = 4, spare_blocks = 5, padding_tokens = 0;
  int64_t rotary_dim = 16, window = -1;
  float softcap = 0.0f;
  bool packed = false;
  bool sinks = false;  // a head_sink input
};

template <typename T>
void check_paged(const PagedCase& c, uint32_t seed, float tol) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    const int64_t d = c.head, nkv = c.kv_heads, bs = c.block, rows = nkv * d;
    const auto n_seqs = static_cast<int64_t>(c.seqs.size());
    int64_t tokens = 0, max_len = 0;
    for (const PagedSequence& s : c.seqs) {
      tokens += s.fresh;
      max_len = std::max(max_len, s.cached + s.fresh);
    }
    const int64_t max_blocks = (max_len + bs - 1) / bs;
    // Block ids: a shuffled pool, so neighbouring positions land in scattered blocks.
    const int64_t pool_blocks = n_seqs * max_blocks + c.spare_blocks;
    std::vector<int32_t> free_ids(static_cast<size_t>(pool_blocks));
    std::iota(free_ids.begin(), free_ids.end(), 0);
    std::shuffle(free_ids.begin(), free_ids.end(), rng);
    std::vector<int32_t> tables(static_cast<size_t>(n_seqs * max_blocks), 0);
    std::vector<std::vector<float>> past_k(c.seqs.size()), past_v(c.seqs.size());  // [pos][nkv*d] per sequence
    for (int64_t s = 0; s < n_seqs; ++s) {
      const PagedSequence& q = c.seqs[static_cast<size_t>(s)];
      const int64_t shared = q.shares_prefix_of >= 0 ? q.cached / bs : 0;  // full blocks only
      for (int64_t b = 0; b < max_blocks; ++b) {
        int32_t id;
        if (b < shared) {
          id = tables[static_cast<size_t>(q.shares_prefix_of * max_blocks + b)];
        } else {
          id = free_ids.back();
          free_ids.pop_back();
        }
        tables[static_cast<size_t>(s * max_blocks + b)] = id;
      }
      for (int64_t i = 0; i < q.cached * rows; ++i) {
        const bool from_shared = i / rows < shared * bs;
        const size_t owner = static_cast<size_t>(q.shares_prefix_of);
        past_k[static_cast<size_t>(s)].push_back(from_shared ? past_k[owner][static_cast<size_t>(i)] : round_to<T>(1.5f * unit(rng)));
        past_v[static_cast<size_t>(s)].push_back(from_shared ? past_v[owner][static_cast<size_t>(i)] : round_to<T>(unit(rng)));
      }
    }
    std::vector<float> cache_k(static_cast<size_t>(pool_blocks * bs * rows)), cache_v(cache_k.size());
    for (float& x : cache_k) x = round_to<T>(unit(rng));  // garbage where nothing was written
    for (float& x : cache_v) x = round_to<T>(unit(rng));
    const auto slot = [&](int64_t s, int64_t pos) {
      return static_cast<size_t>((tables[static_cast<size_t>(s * max_blocks + pos / bs)] * bs + pos % bs) * rows);
    };
    for (int64_t s = 0; s < n_seqs; ++s) {
      for (int64_t pos = 0; pos < c.seqs[static_cast<size_t>(s)].cached; ++pos) {
        std::copy_n(past_k[static_cast<size_t>(s)].begin() + pos * rows, rows, cache_k.begin() + static_cast<ptrdiff_t>(slot(s, pos)));
        std::copy_n(past_v[static_cast<size_t>(s)].begin() + pos * rows, rows, cache_v.begin() + static_cast<ptrdiff_t>(slot(s, pos)));
      }
    }
    const int64_t q_row = (c.packed ? c.heads + 2 * nkv : c.heads) * d;
    const int64_t all_tokens = tokens + c.padding_tokens;
    std::vector<float> q(static_cast<size_t>(all_tokens * q_row)), k(static_cast<size_t>(all_tokens * rows)), v(k.size());
    for (float& x : q) x = round_to<T>(1.5f * unit(rng));
    for (float& x : k) x = round_to<T>(1.5f * unit(rng));
    for (float& x : v) x = round_to<T>(unit(rng));
    const int64_t rotary_rows = max_len + 3;
    std::vector<float> cos, sin;
    for (int64_t i = 0; i < rotary_rows * c.rotary_dim / 2; ++i) {
      const float a = 6.3f * (unit(rng) + 1.0f) / 2.0f;
      cos.push_back(round_to<T>(std::cos(a)));
      sin.push_back(round_to<T>(std::sin(a)));
    }
    std::vector<float> sinks;
    for (int64_t h = 0; c.sinks && h < c.heads; ++h) sinks.push_back(round_to<T>(2.0f * unit(rng)));
    std::vector<int32_t> starts{0}, lens;
    for (const PagedSequence& s : c.seqs) {
      starts.push_back(starts.back() + static_cast<int32_t>(s.fresh));
      lens.push_back(static_cast<int32_t>(s.cached + s.fresh));
    }

    OpCall paged(PagedAttentionParams::kOpType, 1, PagedAttentionParams::kDomain, 3);
    paged.attr_int("num_heads", c.heads).attr_int("kv_num_heads", nkv);
    if (c.rotary_dim > 0) paged.attr_int("do_rotary", 1);
    if (c.window >= 0) paged.attr_int("local_window_size", c.window);
    if (c.softcap > 0) paged.attr_float("softcap", c.softcap);
    std::vector<Tensor> in(11);
    in[0] = cast_tensor<T>(Shape{1, all_tokens, q_row}, q);
    if (!c.packed) {
      in[1] = cast_tensor<T>(Shape{1, all_tokens, rows}, k);
      in[2] = cast_tensor<T>(Shape{1, all_tokens, rows}, v);
    }
    in[3] = cast_tensor<T>(Shape{pool_blocks, bs, nkv, d}, cache_k);
    in[4] = cast_tensor<T>(Shape{pool_blocks, bs, nkv, d}, cache_v);
    in[5] = Tensor::from_vector<int32_t>(Shape{n_seqs, max_blocks}, tables);
    in[6] = Tensor::from_vector<int32_t>(Shape{n_seqs + 1}, starts);
    in[7] = Tensor::from_vector<int32_t>(Shape{n_seqs}, lens);
    if (c.rotary_dim > 0) {
      in[8] = cast_tensor<T>(Shape{rotary_rows, c.rotary_dim / 2}, cos);
      in[9] = cast_tensor<T>(Shape{rotary_rows, c.rotary_dim / 2}, sin);
    }
    if (c.sinks) in[10] = cast_tensor<T>(Shape{c.heads}, sinks);
    while (!in.back().defined()) in.pop_back();
    ThreadPool pool(2);
    auto paged_out = paged.run(in, &pool);
    ASSERT_TRUE(paged_out.is_ok()) << paged_out.status().message();
    const std::vector<float> out = to_floats<T>((*paged_out)[0]);
    const std::vector<float> new_k = to_floats<T>((*paged_out)[1]);
    const std::vector<float> new_v = to_floats<T>((*paged_out)[2]);
    for (int64_t t = tokens; t < all_tokens; ++t) {
      for (int64_t i = 0; i < c.heads * d; ++i) EXPECT_EQ(out[static_cast<size_t>(t * c.heads * d + i)], 0.0f);
    }

    for (int64_t s = 0; s < n_seqs; ++s) {
      const PagedSequence& seq = c.seqs[static_cast<size_t>(s)];
      if (seq.fresh == 0) continue;
      GqaCase g;
      g.batch = 1;
      g.seq = seq.fresh;
      g.heads = c.heads;
      g.kv_heads = nkv;
      g.head = d;
      g.past = seq.cached;
      g.total = seq.cached + seq.fresh;
      g.seqlens = {static_cast<int32_t>(g.total - 1)};
      g.rotary_dim = c.rotary_dim;
      g.rotary_rows = rotary_rows;
      g.window = c.window;
      g.softcap = c.softcap;
      g.packed = c.packed;
      g.sink = c.sinks;
      GqaData x;
      x.sink = sinks;
      const int64_t first = starts[static_cast<size_t>(s)];
      x.q.assign(q.begin() + first * q_row, q.begin() + (first + seq.fresh) * q_row);
      if (!c.packed) {
        x.k.assign(k.begin() + first * rows, k.begin() + (first + seq.fresh) * rows);
        x.v.assign(v.begin() + first * rows, v.begin() + (first + seq.fresh) * rows);
      }
      // Past as [1, nkv, cached, d] (head-major).
      for (int64_t h = 0; h < nkv; ++h) {
        for (int64_t pos = 0; pos < seq.cached; ++pos) {
          for (int64_t i = 0; i < d; ++i) {
            x.past_k.push_back(past_k[static_cast<size_t>(s)][static_cast<size_t>(pos * rows + h * d + i)]);
            x.past_v.push_back(past_v[static_cast<size_t>(s)][static_cast<size_t>(pos * rows + h * d + i)]);
          }
        }
      }
      x.cos = cos;
      x.sin = sin;
      OpCall gqa = gqa_call();
      auto alone = gqa.run(gqa_inputs<T>(g, x, gqa), &pool);
      ASSERT_TRUE(alone.is_ok()) << alone.status().message();
      const std::vector<float> want = to_floats<T>((*alone)[0]);
      const std::vector<float> got(out.begin() + first * c.heads * d, out.begin() + (first + seq.fresh) * c.heads * d);
      SCOPED_TRACE("sequence " + std::to_string(s));
      expect_near_all(got, want, tol);
      // The new rows went where the block table says, as GQA's present holds them.
      const std::vector<float> present_k = to_floats<T>((*alone)[1]);
      const std::vector<float> present_v = to_floats<T>((*alone)[2]);
      const int64_t present_len = g.total;
      for (int64_t pos = seq.cached; pos < g.total; ++pos) {
        for (int64_t h = 0; h < nkv; ++h) {
          for (int64_t i = 0; i < d; ++i) {
            const size_t at = slot(s, pos) + static_cast<size_t>(h * d + i);
            const auto p = static_cast<size_t>((h * present_len + pos) * d + i);
            ASSERT_EQ(new_k[at], present_k[p]) << "key, position " << pos;
            ASSERT_EQ(new_v[at], present_v[p]) << "value, position " << pos;
          }
        }
      }
    }
}

template <typename T>
class PagedAttentionTest : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, Float16, BFloat16>;
TYPED_TEST_SUITE(PagedAttentionTest, StorageTypes);

// Tolerance per storage type: outputs are rounded to it.
template <typename T>
float tolerance() {
  return std::is_same_v<T, float> ? 2e-5f : std::is_same_v<T, Float16> ? 2e-3f : 1.6e-2f;
}

TYPED_TEST(PagedAttentionTest, DecodesAndPrefillChunksInOneCall) {
  PagedCase c;
  c.seqs = {{0, 7}, {9, 1}, {5, 3}, {12, 1}, {0, 1}, {4, 4}};
  c.padding_tokens = 3;
  check_paged<TypeParam>(c, 1, tolerance<TypeParam>());
}

TYPED_TEST(PagedAttentionTest, SharedPrefixBlocks) {
  PagedCase c;
  c.seqs = {{10, 2}, {10, 1, 0}, {9, 5, 0}, {3, 1}};
  check_paged<TypeParam>(c, 2, tolerance<TypeParam>());
}

TEST(PagedAttention, PackedQkvWindowSoftcapAndGroups) {
  PagedCase c;
  c.seqs = {{17, 1}, {0, 9}, {6, 6}};
  c.heads = 8;
  c.kv_heads = 2;
  c.packed = true;
  c.window = 5;
  c.softcap = 2.0f;
  c.block = 16;
  check_paged<float>(c, 3, 2e-5f);
}

TEST(PagedAttention, HeadSinksWithWindowAndWithout) {
  PagedCase c;
  c.seqs = {{9, 1}, {0, 6}, {5, 3}};
  c.sinks = true;
  check_paged<float>(c, 5, 2e-5f);
  c.window = 4;
  c.rotary_dim = 0;
  check_paged<float>(c, 6, 2e-5f);
}

TEST(PagedAttention, WithoutRotaryAndBlocksOfOne) {
  PagedCase c;
  c.seqs = {{3, 2}, {0, 4}, {7, 1}};
  c.rotary_dim = 0;
  c.block = 1;
  check_paged<float>(c, 4, 2e-5f);
}

TEST(PagedAttention, BadMetadataIsAnErrorNamingTheSequence) {
  OpCall call(PagedAttentionParams::kOpType, 1, PagedAttentionParams::kDomain, 3);
  call.attr_int("num_heads", 2).attr_int("kv_num_heads", 1);
  const auto cache = f32(Shape{2, 4, 1, 8}, std::vector<float>(64, 0.0f));
  const auto run = [&](std::vector<int32_t> table, std::vector<int32_t> starts, std::vector<int32_t> lens) {
    return call.run({f32(Shape{1, 2, 16}, std::vector<float>(32, 0.5f)), f32(Shape{1, 2, 8}, std::vector<float>(16, 0.5f)),
                     f32(Shape{1, 2, 8}, std::vector<float>(16, 0.5f)), cache, cache,
                     Tensor::from_vector<int32_t>(Shape{1, 2}, table), Tensor::from_vector<int32_t>(Shape{2}, starts),
                     Tensor::from_vector<int32_t>(Shape{1}, lens)});
  };
  ASSERT_TRUE(run({0, 1}, {0, 2}, {6}).is_ok());
  const auto bad_block = run({0, 7}, {0, 2}, {6});
  ASSERT_FALSE(bad_block.is_ok());
  EXPECT_NE(bad_block.status().message().find("block_tables[0][1] = 7"), std::string::npos) << bad_block.status().message();
  const auto too_long = run({0, 1}, {0, 2}, {9});
  ASSERT_FALSE(too_long.is_ok());
  EXPECT_NE(too_long.status().message().find("seq_lens[0] = 9"), std::string::npos) << too_long.status().message();
  const auto short_len = run({0, 1}, {0, 2}, {1});
  ASSERT_FALSE(short_len.is_ok());
  const auto past_end = run({0, 1}, {0, 3}, {6});
  ASSERT_FALSE(past_end.is_ok());
  EXPECT_NE(past_end.status().message().find("sequence 0"), std::string::npos) << past_end.status().message();
}

}  // namespace
}  // namespace onnx_genai::testing
