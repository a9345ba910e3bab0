// The runtime-owned KV cache: unit tests of its layouts against a plain per-head list of rows,
// then whole generations: growth (from 8 positions, doubling) and pre-allocation give ONNX
// Runtime's greedy tokens, and regenerating after a rewind gives the same tokens again.
#include <gtest/gtest.h>

#include <cstring>

#include "genai/kv_cache.h"
#include "genai_test_util.h"

namespace onnx_genai {
namespace {

using genai::KvCache;
using genai::KvCacheLayout;
using genai::KvCacheOptions;
using testing::ParityFixture;

constexpr int64_t kBatch = 2, kHeads = 3, kHeadSize = 4;

KvCacheLayout small_layout(bool shared) {
  KvCacheLayout layout;
  layout.entries = 2;
  layout.batch = kBatch;
  layout.heads = kHeads;
  layout.head_size = kHeadSize;
  layout.shared = shared;
  return layout;
}

// What a cache entry should hold: rows[b][h] = the stored positions, each kHeadSize floats.
using Rows = std::vector<std::vector<std::vector<std::vector<float>>>>;

float value_of(size_t entry, int64_t b, int64_t h, int64_t position, int64_t i) {
  return static_cast<float>(entry * 100000 + b * 10000 + h * 1000 + position * 10 + i);
}

// Writes `fresh` new positions after `length` into present (as a graph would) and records them.
void write_step(KvCache& cache, std::vector<Rows>& expected, int64_t fresh) {
  const int64_t length = cache.length();
  ASSERT_TRUE(cache.reserve(length + fresh).is_ok());
  for (size_t e = 0; e < expected.size(); ++e) {
    Tensor past = cache.past(e, 0, kBatch);
    Tensor present = cache.present(e, 0, kBatch, fresh);
    const int64_t present_len = present.shape()[2], past_len = past.shape()[2];
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t h = 0; h < kHeads; ++h) {
        float* out = present.data<float>() + (b * kHeads + h) * present_len * kHeadSize;
        if (present.raw() != past.raw()) {  // concatenated: copy the past rows first
          std::memcpy(out, past.data<float>() + (b * kHeads + h) * past_len * kHeadSize,
                      static_cast<size_t>(length * kHeadSize) * sizeof(float));
        }
        for (int64_t s = length; s < length + fresh; ++s) {
          std::vector<float> row;
          for (int64_t i = 0; i < kHeadSize; ++i) row.push_back(out[s * kHeadSize + i] = value_of(e, b, h, s, i));
          expected[e][static_cast<size_t>(b)][static_cast<size_t>(h)].push_back(row);
        }
      }
    }
  }
  cache.advance(length + fresh);
}

void expect_holds(const KvCache& cache, const std::vector<Rows>& expected) {
  for (size_t e = 0; e < expected.size(); ++e) {
    const Tensor past = cache.past(e, 0, kBatch);
    const int64_t stride = past.shape()[2];
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t h = 0; h < kHeads; ++h) {
        const auto& rows = expected[e][static_cast<size_t>(b)][static_cast<size_t>(h)];
        ASSERT_EQ(static_cast<int64_t>(rows.size()), cache.length());
        for (size_t s = 0; s < rows.size(); ++s) {
          for (int64_t i = 0; i < kHeadSize; ++i) {
            ASSERT_EQ(past.data<float>()[((b * kHeads + h) * stride + static_cast<int64_t>(s)) * kHeadSize + i],
                      rows[s][static_cast<size_t>(i)])
                << "entry " << e << " batch " << b << " head " << h << " position " << s;
          }
        }
      }
    }
  }
}

std::vector<Rows> empty_rows() {
  return std::vector<Rows>(2, Rows(kBatch, std::vector<std::vector<std::vector<float>>>(kHeads)));
}

void truncate(std::vector<Rows>& expected, int64_t length) {
  for (Rows& entry : expected) {
    for (auto& batch : entry) {
      for (auto& head : batch) head.resize(static_cast<size_t>(length));
    }
  }
}

class KvCacheLayouts : public ::testing::TestWithParam<bool> {};

TEST_P(KvCacheLayouts, GrowsGeometricallyKeepingPositions) {
  KvCacheOptions options;
  options.initial_capacity = 2;
  auto cache = KvCache::create(small_layout(GetParam()), options);
  ASSERT_TRUE(cache.is_ok()) << cache.status().message();
  EXPECT_EQ(cache->capacity(), 2);
  EXPECT_EQ(cache->growths(), 0);
  std::vector<Rows> expected = empty_rows();
  write_step(*cache, expected, 2);  // a prefill of 2
  EXPECT_EQ(cache->capacity(), 2);
  const Tensor before = cache->past(0, 0, kBatch);
  for (int step = 0; step < 7; ++step) write_step(*cache, expected, 1);
  expect_holds(*cache, expected);
  EXPECT_EQ(cache->capacity(), 16);  // 2 -> 4 -> 8 -> 16 for 9 positions
  EXPECT_EQ(cache->growths(), 3);
  if (GetParam()) {  // shared: past is the whole capacity
    EXPECT_EQ(cache->past(0, 0, kBatch).shape(), (Shape{kBatch, kHeads, 16, kHeadSize}));
    EXPECT_NE(before.raw(), cache->past(0, 0, kBatch).raw());
  } else {
    EXPECT_EQ(cache->past(0, 0, kBatch).shape(), (Shape{kBatch, kHeads, 9, kHeadSize}));
  }
}

// Beam search's reorder: a swap (a cycle, through scratch), then both rows from one source; the
// cache keeps growing and holding the reordered rows after.
TEST_P(KvCacheLayouts, GathersRowsInPlace) {
  KvCacheOptions options;
  options.initial_capacity = 4;
  auto cache = KvCache::create(small_layout(GetParam()), options);
  ASSERT_TRUE(cache.is_ok());
  std::vector<Rows> expected = empty_rows();
  write_step(*cache, expected, 3);
  for (const std::vector<int64_t>& sources : {std::vector<int64_t>{1, 0}, std::vector<int64_t>{1, 1}}) {
    ASSERT_TRUE(cache->gather_rows(sources).is_ok());
    for (Rows& entry : expected) {
      const Rows before = entry;
      for (size_t b = 0; b < entry.size(); ++b) entry[b] = before[static_cast<size_t>(sources[b])];
    }
    expect_holds(*cache, expected);
    write_step(*cache, expected, 1);
  }
  expect_holds(*cache, expected);
  EXPECT_FALSE(cache->gather_rows(std::vector<int64_t>{0}).is_ok());
  EXPECT_FALSE(cache->gather_rows(std::vector<int64_t>{0, 2}).is_ok());
}

TEST_P(KvCacheLayouts, FixedStrideWhileNotGrowing) {
  KvCacheOptions options;
  options.initial_capacity = 32;
  auto cache = KvCache::create(small_layout(GetParam()), options);
  ASSERT_TRUE(cache.is_ok());
  std::vector<Rows> expected = empty_rows();
  write_step(*cache, expected, 3);
  const void* first = cache->past(1, 0, kBatch).raw();
  for (int step = 0; step < 10; ++step) write_step(*cache, expected, 1);
  EXPECT_EQ(cache->growths(), 0);
  if (GetParam()) {
    EXPECT_EQ(cache->past(1, 0, kBatch).raw(), first);  // shared: never moves
  }
  expect_holds(*cache, expected);
  // Row views: batch row 1 alone starts one row of heads further.
  const Tensor row1 = cache->past(1, 1, 1);
  EXPECT_EQ(row1.shape()[0], 1);
  EXPECT_EQ(row1.data<float>()[0], value_of(1, 1, 0, 0, 0));
}

TEST_P(KvCacheLayouts, RewindKeepsTheFirstPositions) {
  auto cache = KvCache::create(small_layout(GetParam()), KvCacheOptions{});
  ASSERT_TRUE(cache.is_ok());
  std::vector<Rows> expected = empty_rows();
  write_step(*cache, expected, 5);
  for (int step = 0; step < 4; ++step) write_step(*cache, expected, 1);
  ASSERT_TRUE(cache->rewind(6).is_ok());
  truncate(expected, 6);
  expect_holds(*cache, expected);
  // Writing after a rewind overwrites what was dropped.
  write_step(*cache, expected, 2);
  expect_holds(*cache, expected);
  ASSERT_TRUE(cache->rewind(0).is_ok());
  EXPECT_EQ(cache->length(), 0);
}

INSTANTIATE_TEST_SUITE_P(Disciplines, KvCacheLayouts, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "shared" : "concatenated"; });

TEST(KvCache, PreallocatesTheWholeLength) {
  KvCacheLayout layout = small_layout(true);
  layout.max_length = 40;
  KvCacheOptions options;
  options.preallocate = true;
  auto cache = KvCache::create(layout, options);
  ASSERT_TRUE(cache.is_ok());
  EXPECT_EQ(cache->capacity(), 40);
  ASSERT_TRUE(cache->reserve(40).is_ok());
  EXPECT_EQ(cache->growths(), 0);
}

TEST(KvCache, RejectsBadLayouts) {
  KvCacheLayout layout = small_layout(false);
  KvCacheOptions options;
  options.preallocate = true;
  auto unbounded = KvCache::create(layout, options);
  ASSERT_FALSE(unbounded.is_ok());
  EXPECT_NE(unbounded.status().message().find("context length"), std::string::npos) << unbounded.status().message();
  layout.heads = 0;
  auto no_heads = KvCache::create(layout, KvCacheOptions{});
  ASSERT_FALSE(no_heads.is_ok());
  EXPECT_NE(no_heads.status().message().find("heads 0"), std::string::npos) << no_heads.status().message();
  // Config-sized layouts whose byte count would overflow fail instead of allocating.
  layout.heads = layout.head_size = layout.batch = 1 << 20;
  KvCacheOptions first;
  first.initial_capacity = 1 << 20;
  auto huge = KvCache::create(layout, first);
  ASSERT_FALSE(huge.is_ok());
  EXPECT_NE(huge.status().message().find("too many to allocate"), std::string::npos) << huge.status().message();
}

// --- whole generations ---------------------------------------------------------------------

const std::vector<std::vector<int64_t>> kBatch3 = {{5, 17, 300, 42, 7, 99, 3}, {11, 12}, {800, 1, 2, 3, 4}};

class GeneratorCache : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.valid());
    fixture_ = ParityFixture{GetParam() + "_llama", {"--preset", "llama", "--style", GetParam()}, kBatch3, 0, ""};
    dir_ = testing::build_model_or_fail(fixture_, scratch_.path());
    ASSERT_FALSE(dir_.empty());
  }

  std::unique_ptr<genai::Model> load(const genai::ModelOptions& options) {
    auto model = genai::Model::load(dir_.string(), options);
    EXPECT_TRUE(model.is_ok()) << model.status().message();
    return model.is_ok() ? std::move(*model) : nullptr;
  }

  static genai::GeneratorParams greedy(const std::vector<std::vector<int32_t>>& prompts) {
    genai::GeneratorParams params;
    params.sampling.greedy = true;
    params.ignore_eos = true;
    params.prompts = prompts;
    return params;
  }

  static std::vector<int32_t> generated(const genai::Generator& g, size_t b) {
    const auto tokens = g.tokens(b);
    return std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(g.prompt_length(b)), tokens.end());
  }

  static void steps(genai::Generator& g, int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(g.generate_next().is_ok());
  }

  testing::ScopedTempDir scratch_;
  ParityFixture fixture_;
  std::filesystem::path dir_;
};

TEST_P(GeneratorCache, GrowingAndPreallocatedCachesGiveOnnxRuntimeTokens) {
  constexpr int kTokens = 100;
  auto ort = testing::ort_greedy_tokens(dir_, fixture_, kTokens, scratch_.path());
  ASSERT_TRUE(ort.is_ok()) << ort.status().message();
  for (const bool preallocate : {false, true}) {
    genai::ModelOptions options;
    options.num_threads = 2;
    options.initial_kv_capacity = 8;
    options.preallocate_kv = preallocate;
    auto model = load(options);
    ASSERT_TRUE(model);
    genai::GeneratorParams params = greedy(testing::to_int32(kBatch3));
    params.max_new_tokens = kTokens;
    auto g = genai::Generator::create(*model, params);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    ASSERT_TRUE((*g)->generate(nullptr).is_ok());
    for (size_t b = 0; b < kBatch3.size(); ++b) EXPECT_EQ(generated(**g, b), (*ort)[b]) << "sequence " << b;
    // Positions per row: the longest prompt (7) + 100 (left padding) or 100 + each row's prompt.
    const int64_t context = model->info().context_length;
    if (preallocate) {
      EXPECT_EQ((*g)->kv_growths(), 0);
      EXPECT_GE((*g)->kv_capacity(), context);
    } else {
      EXPECT_EQ((*g)->kv_capacity(), 128);  // 8 -> 16 -> 32 -> 64 -> 128
      EXPECT_EQ((*g)->kv_growths(), 4);
    }
  }
}

TEST_P(GeneratorCache, RegeneratingAfterRewindGivesTheSameTokens) {
  auto model = load(genai::ModelOptions{});
  ASSERT_TRUE(model);
  auto g = genai::Generator::create(*model, greedy(testing::to_int32(kBatch3)));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  steps(**g, 40);
  std::vector<std::vector<int32_t>> first;
  for (size_t b = 0; b < kBatch3.size(); ++b) first.push_back(generated(**g, b));
  // The longest sequence keeps its prompt (7) and 15 generated tokens; every row drops 25.
  ASSERT_TRUE((*g)->rewind(7 + 15).is_ok());
  for (size_t b = 0; b < kBatch3.size(); ++b) {
    EXPECT_EQ(generated(**g, b), std::vector<int32_t>(first[b].begin(), first[b].begin() + 15)) << "sequence " << b;
  }
  steps(**g, 25);
  for (size_t b = 0; b < kBatch3.size(); ++b) EXPECT_EQ(generated(**g, b), first[b]) << "sequence " << b;
}

TEST_P(GeneratorCache, RewindIntoThePromptEqualsAShorterPrompt) {
  auto model = load(genai::ModelOptions{});
  ASSERT_TRUE(model);
  const std::vector<int32_t> prompt(kBatch3[0].begin(), kBatch3[0].end());
  auto g = genai::Generator::create(*model, greedy({prompt}));
  ASSERT_TRUE(g.is_ok());
  steps(**g, 12);
  ASSERT_TRUE((*g)->rewind(4).is_ok());
  EXPECT_EQ((*g)->prompt_length(0), 4u);
  steps(**g, 10);

  auto fresh = genai::Generator::create(*model, greedy({std::vector<int32_t>(prompt.begin(), prompt.begin() + 4)}));
  ASSERT_TRUE(fresh.is_ok());
  steps(**fresh, 10);
  EXPECT_EQ(generated(**g, 0), generated(**fresh, 0));

  // rewind(0) then the same prompt again: a fresh start.
  ASSERT_TRUE((*g)->rewind(0).is_ok());
  EXPECT_TRUE((*g)->tokens(0).empty());
  EXPECT_FALSE((*g)->generate_next().is_ok());  // nothing to continue from
  ASSERT_TRUE((*g)->append_tokens(std::vector<int32_t>(prompt.begin(), prompt.begin() + 4)).is_ok());
  steps(**g, 10);
  EXPECT_EQ(generated(**g, 0), generated(**fresh, 0));
}

TEST_P(GeneratorCache, RewindRefusesToEmptyASequence) {
  auto model = load(genai::ModelOptions{});
  ASSERT_TRUE(model);
  auto g = genai::Generator::create(*model, greedy(testing::to_int32(kBatch3)));
  ASSERT_TRUE(g.is_ok());
  steps(**g, 3);
  // Dropping 6 of the longest row's 10 tokens would leave nothing of row 1 (2 + 3 tokens).
  const Status status = (*g)->rewind(4);
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("would empty sequence 1"), std::string::npos) << status.message();
  const Status too_long = (*g)->rewind(11);
  ASSERT_FALSE(too_long.is_ok());
  EXPECT_NE(too_long.message().find("longest sequence has 10"), std::string::npos) << too_long.message();
}

INSTANTIATE_TEST_SUITE_P(Styles, GeneratorCache, ::testing::Values("genai", "standard"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace onnx_genai
