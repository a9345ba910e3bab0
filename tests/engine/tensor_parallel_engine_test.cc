// The serving engine on a tensor-parallel model (EngineOptions::model.tensor_parallel): a random
// llama-preset decoder from tools/build_model.py with 8 query heads and 4 KV heads, sharded into
// N = 2 and 4 ranks, each rank with block pools of 4 / N heads under the one pool's block ids.
//   - greedy requests with staggered arrivals, 8-token prefill chunks and a pool small enough to
//     preempt give each request the tokens it gets at N = 1 and from the contiguous Generator;
//   - prompts sharing a prefix hit the prefix cache and keep those tokens;
//   - prompt-lookup speculation keeps them; seeded sampling draws N = 1's tokens;
//   - every block is free afterwards; what cannot be split is refused in one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "engine/engine_test_util.h"
#include "onnx_genai/engine.h"
#include "runtime/model_parity.h"

namespace onnx_genai::genai {
namespace {

namespace fs = std::filesystem;
using testing::run_all;

constexpr int kNewTokens = 24;

class TensorParallelEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new testing::ScopedTempDir();
    const std::vector<std::string> args = {"--preset", "llama", "--set", "num_attention_heads=8", "--set",
                                           "num_key_value_heads=4", "--set", "vocab_size=300"};
    auto dir = testing::build_fixture_model({"tp_engine_f32", args, {}, 0, ""}, scratch_->path());
    if (dir.is_ok()) model_dir_ = new fs::path(*dir);
  }
  static void TearDownTestSuite() {
    delete model_dir_;
    delete scratch_;
  }
  void SetUp() override { ASSERT_NE(model_dir_, nullptr) << "tools/build_model.py failed"; }

  // Eight prompts of 5 to 20 tokens (fixed seed).
  static std::vector<std::vector<int32_t>> prompts() {
    std::mt19937 rng(26);
    std::vector<std::vector<int32_t>> ids(8);
    for (auto& p : ids) {
      p.resize(5 + rng() % 16);
      for (int32_t& t : p) t = static_cast<int32_t>(3 + rng() % 297);
    }
    return ids;
  }
  static RequestParams greedy() {
    RequestParams p;
    p.sampling.greedy = true;
    p.sampling.repetition_penalty = 1.0f;
    p.max_new_tokens = kNewTokens;
    p.ignore_eos = true;
    return p;
  }
  // Chunks of 8 tokens, at most 4 sequences, 8 blocks of 16 when `tight` (each request reaches
  // 3, so four running cannot all hold theirs); kv_cache_memory counts every rank's share, so N
  // does not change the number of blocks.
  static std::unique_ptr<Engine> load(int ranks, bool tight, bool prefix_caching = true) {
    EngineOptions o;
    o.model.num_threads = 1;
    o.model.tensor_parallel = ranks;
    o.prefix_caching = prefix_caching;
    o.block_size = 16;
    o.max_num_batched_tokens = tight ? 8 : 64;
    o.max_num_seqs = tight ? 4 : 8;
    if (tight) o.kv_cache_memory = 8 * int64_t{2 * 2 * 16 * 4 * 16 * 4};  // layers x K,V x 16 x 4 heads x 16 x f32
    auto engine = Engine::load(model_dir_->string(), o);
    EXPECT_TRUE(engine.is_ok()) << engine.status().message();
    if (!engine.is_ok()) return nullptr;
    EXPECT_TRUE((*engine)->stats().paged) << (*engine)->model().info().paged_kv_unavailable;
    EXPECT_EQ((*engine)->model().info().tensor_parallel, ranks);
    if (tight) {
      EXPECT_EQ((*engine)->stats().kv_blocks, 8);
    }
    return std::move(*engine);
  }
  static std::vector<std::vector<int32_t>> tokens_of(const std::vector<testing::Finished>& done) {
    std::vector<std::vector<int32_t>> out;
    for (const testing::Finished& f : done) out.push_back(f.tokens);
    return out;
  }

  static testing::ScopedTempDir* scratch_;
  static fs::path* model_dir_;
};

testing::ScopedTempDir* TensorParallelEngine::scratch_ = nullptr;
fs::path* TensorParallelEngine::model_dir_ = nullptr;

// Each prompt's greedy tokens from the contiguous-cache Generator of the unsharded model.
std::vector<std::vector<int32_t>> generator_tokens(const std::string& dir, const std::vector<std::vector<int32_t>>& ids) {
  auto model = Model::load(dir, ModelOptions{.num_threads = 1});
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  std::vector<std::vector<int32_t>> out;
  for (const auto& prompt : ids) {
    GeneratorParams gp;
    gp.sampling.greedy = true;
    gp.sampling.repetition_penalty = 1.0f;
    gp.ignore_eos = true;
    gp.max_new_tokens = kNewTokens;
    gp.prompts = {prompt};
    auto gen = Generator::create(**model, gp);
    EXPECT_TRUE(gen.is_ok() && (*gen)->generate(nullptr).is_ok());
    const std::span<const int32_t> all = (*gen)->tokens(0);
    out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(prompt.size()), all.end());
  }
  return out;
}

TEST_F(TensorParallelEngine, BatchedPreemptedAndChunkedGreedyTokensEqualOneRankAndTheGenerator) {
  const auto ids = prompts();
  const auto want = generator_tokens(model_dir_->string(), ids);
  const std::vector<int> arrivals{0, 0, 1, 3, 3, 7, 12, 20};
  for (const int ranks : {1, 2, 4}) {
    SCOPED_TRACE("N=" + std::to_string(ranks));
    auto engine = load(ranks, /*tight=*/true);
    ASSERT_NE(engine, nullptr);
    const auto got = tokens_of(run_all(*engine, ids, greedy(), arrivals));
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(got[i], want[i]) << "prompt " << i;
    const EngineStats s = engine->stats();
    EXPECT_GT(s.preemptions, 0);
    EXPECT_EQ(s.kv_blocks_used, 0);
  }
}

TEST_F(TensorParallelEngine, PrefixHitsKeepTheTokens) {
  // A shared 40-token prefix: later requests find its two full blocks cached.
  std::vector<int32_t> prefix;
  for (int32_t k = 0; k < 40; ++k) prefix.push_back(10 + (k * 7) % 280);
  std::vector<std::vector<int32_t>> ids;
  for (const auto& p : prompts()) {
    ids.push_back(prefix);
    ids.back().insert(ids.back().end(), p.begin(), p.end());
  }
  const auto want = generator_tokens(model_dir_->string(), ids);
  for (const int ranks : {2, 4}) {
    SCOPED_TRACE("N=" + std::to_string(ranks));
    auto engine = load(ranks, /*tight=*/false);
    ASSERT_NE(engine, nullptr);
    const auto done = run_all(*engine, ids, greedy(), {0, 2, 4, 6, 8, 10, 12, 14});
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(done[i].tokens, want[i]) << "prompt " << i;
      if (i > 0) {
        EXPECT_EQ(done[i].cached_prompt_tokens, 32) << "prompt " << i;
      }
    }
    EXPECT_GE(engine->stats().prefix_hits, 14);
    EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  }
}

// Prompt-lookup drafts verified over several rows of a step, rejected ones rewound on every rank.
TEST_F(TensorParallelEngine, SpeculatingRequestsKeepTheGeneratorsTokens) {
  const auto ids = prompts();
  const auto want = generator_tokens(model_dir_->string(), ids);
  std::vector<RequestParams> params(ids.size(), greedy());
  for (RequestParams& p : params) p.speculative.method = SpeculativeMethod::kNgram;
  for (const int ranks : {2, 4}) {
    SCOPED_TRACE("N=" + std::to_string(ranks));
    auto engine = load(ranks, /*tight=*/false);
    ASSERT_NE(engine, nullptr);
    const auto got = tokens_of(run_all(*engine, ids, {}, {0, 0, 1, 2, 2, 5, 9, 9}, &params));
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(got[i], want[i]) << "prompt " << i;
    EXPECT_GT(engine->stats().drafted_tokens, 0);
    EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  }
}

TEST_F(TensorParallelEngine, SeededSamplingDrawsOneRanksTokens) {
  const auto ids = prompts();
  std::vector<RequestParams> params(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    params[i].sampling.greedy = false;
    params[i].sampling.temperature = 0.9f;
    params[i].sampling.top_k = 40;
    params[i].sampling.seed = 100 + i;
    params[i].max_new_tokens = 20;
    params[i].ignore_eos = true;
  }
  const std::vector<int> arrivals{0, 0, 0, 1, 1, 2, 5, 9};
  std::vector<std::vector<int32_t>> want;
  for (const int ranks : {1, 2, 4}) {
    SCOPED_TRACE("N=" + std::to_string(ranks));
    auto engine = load(ranks, /*tight=*/false);
    ASSERT_NE(engine, nullptr);
    const auto got = tokens_of(run_all(*engine, ids, {}, arrivals, &params));
    if (ranks == 1) {
      want = got;
    } else {
      for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(got[i], want[i]) << "prompt " << i;
    }
    EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  }
}

// One line naming why: the default model has one KV head, 3 does not divide 4, no GPU ranks.
TEST_F(TensorParallelEngine, RefusesWhatCannotBeSplit) {
  const auto refused = [](const std::string& dir, int ranks, Device device, const std::string& why) {
    EngineOptions o;
    o.model.tensor_parallel = ranks;
    o.model.device = device;
    o.model.cpu_fallback = false;
    auto engine = Engine::load(dir, o);
    ASSERT_FALSE(engine.is_ok()) << dir << " N=" << ranks;
    const std::string& message = engine.status().message();
    EXPECT_NE(message.find(why), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  };
  const std::string default_model = (fs::path(testing::source_dir()) / "models" / "debian-prose-11m").string();
  refused(default_model, 2, Device::cpu(), "kv_num_heads");
  refused(model_dir_->string(), 3, Device::cpu(), "cannot split the model into 3 tensor-parallel ranks");
  refused(model_dir_->string(), 2, Device{DeviceType::kCuda, 0}, "runs on the CPU only");
}

}  // namespace
}  // namespace onnx_genai::genai
