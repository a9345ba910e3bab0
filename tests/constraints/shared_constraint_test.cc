// One compiled constraint shared by many sequences at once (a server's requests with one schema):
// threads that learn new states side by side get the masks a constraint of their own gives (also
// when its mask cache is full and drops masks), and the cache hands repeated specs the same
// compiled constraint.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "constraint_test_util.h"
#include "constraints/compiled_state.h"

namespace onnx_genai::testing {
namespace {

constexpr const char* kSchema =
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"tags":{"type":"array",)"
    R"("items":{"type":"string","pattern":"^[a-z]+$"},"maxItems":3},"n":{"type":"integer","minimum":-40,"maximum":9000},)"
    R"("ok":{"type":"boolean"}},"required":["name","n"],"additionalProperties":false})";

struct Walk {
  std::vector<int32_t> tokens;
  std::vector<std::vector<uint64_t>> masks;  // before each token, and after the last
  std::string error;
};

// A seeded random walk of up to `steps` tokens, each drawn from the mask before it (single-byte
// tokens favoured so that strings and arrays close; eos ends it where allowed).
Walk random_walk(const std::shared_ptr<CompiledConstraint>& compiled, int32_t eos, uint64_t seed, int steps) {
  Walk walk;
  std::mt19937_64 rng(seed);
  ConstraintMatcher matcher(compiled);
  const ConstraintVocabulary& vocabulary = compiled->vocabulary();
  for (int step = 0; step <= steps; ++step) {
    std::vector<uint64_t> mask(matcher.mask_words());
    if (Status s = matcher.compute_mask(mask); !s.is_ok()) {
      walk.error = s.message();
      return walk;
    }
    walk.masks.push_back(mask);
    if (step == steps || (mask_has(mask, eos) && rng() % 4 == 0)) break;
    std::vector<int32_t> allowed, single;
    for (int32_t id = 0; id < vocabulary.vocab_size(); ++id) {
      if (!mask_has(mask, id) || id == eos) continue;
      allowed.push_back(id);
      if (vocabulary.token_bytes(id).size() == 1) single.push_back(id);
    }
    if (allowed.empty()) break;
    const std::vector<int32_t>& from = !single.empty() && rng() % 2 == 0 ? single : allowed;
    const int32_t token = from[rng() % from.size()];
    if (Status s = matcher.accept_token(token); !s.is_ok()) {
      walk.error = s.message();
      return walk;
    }
    walk.tokens.push_back(token);
  }
  return walk;
}

// `threads` random walks at once over `shared`, each then replayed through a constraint of its
// own: every mask must be the one it gives.
void expect_walks_get_their_own_masks(const std::shared_ptr<CompiledConstraint>& shared, const ConstraintSpec& spec,
                                      int threads, int steps) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  std::vector<Walk> walks(static_cast<size_t>(threads));
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] { walks[static_cast<size_t>(t)] = random_walk(shared, v.eos, 100 + static_cast<uint64_t>(t), steps); });
  }
  for (std::thread& t : running) t.join();
  size_t masks = 0;
  for (int t = 0; t < threads; ++t) {
    const Walk& walk = walks[static_cast<size_t>(t)];
    ASSERT_TRUE(walk.error.empty()) << "thread " << t << ": " << walk.error;
    // The same tokens through a constraint nobody else touched, one thread.
    auto alone = CompiledConstraint::compile(spec, v.vocabulary);
    ASSERT_TRUE(alone.is_ok());
    ConstraintMatcher matcher(*alone);
    std::vector<uint64_t> mask(matcher.mask_words());
    for (size_t k = 0; k < walk.masks.size(); ++k) {
      ASSERT_TRUE(matcher.compute_mask(mask).is_ok());
      ASSERT_EQ(mask, walk.masks[k]) << "thread " << t << " step " << k;
      if (k < walk.tokens.size()) {
        ASSERT_TRUE(matcher.accept_token(walk.tokens[k]).is_ok());
      }
    }
    masks += walk.masks.size();
  }
  EXPECT_GT(masks, static_cast<size_t>(threads) * static_cast<size_t>(steps) / 3) << "the walks stopped early; they test little";
}

TEST(SharedConstraint, ThreadsLearningStatesTogetherGetTheMasksOfTheirOwnConstraint) {
  const ConstraintSpec spec{ConstraintKind::kJsonSchema, kSchema};
  auto shared = CompiledConstraint::compile(spec, test_vocabulary("qwen3").vocabulary);
  ASSERT_TRUE(shared.is_ok()) << shared.status().message();
  expect_walks_get_their_own_masks(*shared, spec, 8, 60);
}

TEST(SharedConstraint, MasksDroppedFromAFullCacheComeBackTheSame) {
  const ConstraintSpec spec{ConstraintKind::kJsonSchema, kSchema};
  auto shared = CompiledConstraint::compile(spec, test_vocabulary("qwen3").vocabulary);
  ASSERT_TRUE(shared.is_ok()) << shared.status().message();
  constraints::CompiledState& state = (*shared)->state();
  state.max_cached_masks = 8;  // the walks meet far more states: masks are dropped and recomputed
  expect_walks_get_their_own_masks(*shared, spec, 4, 60);
  EXPECT_LE(state.masks.size(), state.max_cached_masks);
  EXPECT_GT(state.automaton.state_count(), 4 * state.max_cached_masks) << "too few states met to fill the cache";
}

TEST(ConstraintCache, RepeatedSpecsShareOneCompiledConstraint) {
  const TestVocabulary& v = test_vocabulary("qwen3");
  ConstraintCache cache(v.vocabulary, 2);
  const ConstraintSpec schema{ConstraintKind::kJsonSchema, kSchema};
  ConstraintSpec compact = schema;
  compact.compact_json = true;
  const ConstraintSpec regex{ConstraintKind::kRegex, "[0-9]+"};
  auto first = cache.compile(schema);
  auto again = cache.compile(schema);
  auto other = cache.compile(compact);
  ASSERT_TRUE(first.is_ok() && again.is_ok() && other.is_ok());
  EXPECT_EQ(first->get(), again->get());
  EXPECT_NE(first->get(), other->get());  // another layout is another language
  EXPECT_EQ(cache.hits(), 1u);
  // Capacity 2: the regex pushes out the least recently used (schema, used before compact).
  ASSERT_TRUE(cache.compile(regex).is_ok());
  EXPECT_EQ(cache.compile(compact)->get(), other->get());
  EXPECT_NE(cache.compile(schema)->get(), first->get());
  // Errors are returned each time, never kept.
  const ConstraintSpec bad{ConstraintKind::kJsonSchema, R"j({"type":"string","pattern":"(?=a)"})j"};
  EXPECT_FALSE(cache.compile(bad).is_ok());
  EXPECT_FALSE(cache.compile(bad).is_ok());
}

}  // namespace
}  // namespace onnx_genai::testing
