// The serving engine on the shipped default model (models/debian-prose-11m, GroupQueryAttention,
// int4): continuous batching must not change any request's tokens.
//   - greedy tokens of each request, run alone, equal the contiguous-cache Generator's;
//   - run together with staggered arrivals, chunked prefill, a pool so small that requests are
//     preempted, and shared prompt prefixes (prefix-cache hits), they are the same again;
//   - seeded sampling draws the same tokens alone and batched;
//   - speculating requests (prompt lookup, a draft model) batched with plain ones keep their tokens;
//   - fast-forwarded constrained requests keep their tokens in fewer steps;
//   - abort and finish free every block; bad requests are refused with a message;
//   - warm_up() compiles every step shape without touching the pool or any token;
//   - mixture-of-experts models (tools/build_model.py presets) batch like dense ones.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>

#include "engine/engine_test_util.h"
#include "onnx_genai/engine.h"
#include "runtime/model_parity.h"

namespace onnx_genai::genai {
namespace {

using testing::Finished;
using testing::run_all;

const std::string kModel = (std::filesystem::path(testing::source_dir()) / "models" / "debian-prose-11m").string();

std::vector<std::string> prompts() {
  return {"And God said", "In the beginning", "The LORD is my shepherd; I shall not want.",
          "And it came to pass, when the king heard the words", "Blessed are the poor in spirit",
          "In the beginning was the Word, and the Word was with God", "Then Jesus answered", "Hear, O Israel"};
}

class EngineTest : public ::testing::Test {
 protected:
  static std::vector<std::vector<int32_t>> encode_all(const Model& model) {
    std::vector<std::vector<int32_t>> ids;
    for (const std::string& p : prompts()) ids.push_back(model.encode(p).value());
    return ids;
  }
  static RequestParams greedy(int64_t new_tokens) {
    RequestParams p;
    p.sampling.greedy = true;
    p.sampling.repetition_penalty = 1.0f;
    p.max_new_tokens = new_tokens;
    return p;
  }
  static EngineOptions options() {
    EngineOptions o;
    o.model.num_threads = 2;
    return o;
  }
  // An engine without prefix caching, to run requests alone on.
  static std::unique_ptr<Engine> alone_engine() {
    EngineOptions o = options();
    o.prefix_caching = false;
    auto engine = Engine::load(kModel, o);
    EXPECT_TRUE(engine.is_ok()) << engine.status().message();
    return engine.is_ok() ? std::move(*engine) : nullptr;
  }
  // Each prompt's greedy tokens, run alone.
  static std::vector<std::vector<int32_t>> each_alone(Engine& engine, const std::vector<std::vector<int32_t>>& ids,
                                                      int64_t new_tokens) {
    std::vector<std::vector<int32_t>> tokens;
    for (const auto& p : ids) tokens.push_back(run_all(engine, {p}, greedy(new_tokens), {0})[0].tokens);
    return tokens;
  }
  // Seeded sampling requests (temperature 0.9, top-k 40, 20 tokens), seeds from `first_seed` on.
  static std::vector<RequestParams> seeded_sampling(size_t count, uint64_t first_seed) {
    std::vector<RequestParams> params(count);
    for (size_t i = 0; i < count; ++i) {
      params[i].sampling.greedy = false;
      params[i].sampling.temperature = 0.9f;
      params[i].sampling.top_k = 40;
      params[i].sampling.seed = first_seed + i;
      params[i].max_new_tokens = 20;
    }
    return params;
  }
  // Each request's tokens alone equal its tokens batched with the others, arriving staggered.
  static void expect_alone_equals_batched(Engine& engine, const std::vector<std::vector<int32_t>>& ids,
                                          const std::vector<RequestParams>& params) {
    std::vector<std::vector<int32_t>> alone;
    for (size_t i = 0; i < ids.size(); ++i) alone.push_back(run_all(engine, {ids[i]}, params[i], {0})[0].tokens);
    const auto batched = run_all(engine, ids, {}, {0, 0, 0, 1, 1, 2, 5, 9}, &params);
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(batched[i].tokens, alone[i]) << "prompt " << i;
  }
};

TEST_F(EngineTest, AloneEachRequestMatchesTheContiguousGenerator) {
  auto engine = Engine::load(kModel, options());
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  ASSERT_TRUE((*engine)->stats().paged) << (*engine)->model().info().paged_kv_unavailable;
  auto model = Model::load(kModel, ModelOptions{.num_threads = 2});
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const auto ids = encode_all(**model);
  for (size_t i = 0; i < ids.size(); ++i) {
    GeneratorParams gp;
    gp.sampling.greedy = true;
    gp.sampling.repetition_penalty = 1.0f;
    gp.max_new_tokens = 24;
    gp.prompts = {ids[i]};
    auto gen = Generator::create(**model, gp);
    ASSERT_TRUE(gen.is_ok());
    ASSERT_TRUE((*gen)->generate(nullptr).is_ok());
    const std::span<const int32_t> all = (*gen)->tokens(0);
    const std::vector<int32_t> want(all.begin() + static_cast<std::ptrdiff_t>(ids[i].size()), all.end());
    const auto got = run_all(**engine, {ids[i]}, greedy(24), {0});
    EXPECT_EQ(got[0].tokens, want) << "prompt " << i;
  }
  EXPECT_EQ((*engine)->stats().kv_blocks_used, 0);
}

TEST_F(EngineTest, BatchingPreemptionChunksAndPrefixHitsLeaveGreedyTokensUnchanged) {
  const std::unique_ptr<Engine> alone = alone_engine();
  ASSERT_TRUE(alone);
  const auto ids = encode_all(alone->model());
  const std::vector<std::vector<int32_t>> want = each_alone(*alone, ids, 32);

  // Chunks of 8 tokens per step, at most 4 sequences, a pool of 8 blocks of 16 (each request
  // reaches 3): four running requests cannot all hold theirs, and some get preempted.
  EngineOptions tight = options();
  tight.max_num_batched_tokens = 8;
  tight.max_num_seqs = 4;
  tight.block_size = 16;
  tight.kv_cache_memory = 8 * 64 * 1024;  // 8 layers x K,V x 16 x 1 head x 64 x f32 = 64 KiB per block
  auto batched = Engine::load(kModel, tight);
  ASSERT_TRUE(batched.is_ok()) << batched.status().message();
  ASSERT_EQ((*batched)->stats().kv_blocks, 8);
  const std::vector<int> arrivals{0, 0, 1, 3, 3, 7, 12, 20};
  const auto got = run_all(**batched, ids, greedy(32), arrivals);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(got[i].tokens, want[i]) << "prompt " << i;
  const EngineStats s = (*batched)->stats();
  EXPECT_GT(s.preemptions, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);

  // A shared 40-token prefix: later requests find its two full blocks cached.
  EngineOptions roomy = options();
  roomy.max_num_batched_tokens = 64;
  auto cached = Engine::load(kModel, roomy);
  ASSERT_TRUE(cached.is_ok());
  std::vector<int32_t> prefix;
  for (int k = 0; k < 5; ++k) prefix.insert(prefix.end(), ids[2].begin(), ids[2].end());
  prefix.resize(40);
  std::vector<std::vector<int32_t>> prefixed;
  for (const auto& p : ids) {
    std::vector<int32_t> t = prefix;
    t.insert(t.end(), p.begin() + 1, p.end());  // without the second BOS
    prefixed.push_back(std::move(t));
  }
  std::vector<std::vector<int32_t>> want_prefixed;
  for (const auto& p : prefixed) want_prefixed.push_back(run_all(*alone, {p}, greedy(16), {0})[0].tokens);
  const auto got_prefixed = run_all(**cached, prefixed, greedy(16), {0, 2, 4, 6, 8, 10, 12, 14});
  for (size_t i = 0; i < prefixed.size(); ++i) {
    EXPECT_EQ(got_prefixed[i].tokens, want_prefixed[i]) << "prompt " << i;
    if (i > 0) {
      EXPECT_EQ(got_prefixed[i].cached_prompt_tokens, 32) << "prompt " << i;
    }
  }
  EXPECT_GE((*cached)->stats().prefix_hits, 14);
  EXPECT_EQ((*cached)->stats().kv_blocks_used, 0);
}

// warm_up() runs every step shape once with no request: afterwards serving compiles no plan, the
// pool is untouched, and the tokens are the ones an engine without it gives.
TEST_F(EngineTest, WarmUpCompilesEveryStepShapeAndChangesNoToken) {
  const std::unique_ptr<Engine> alone = alone_engine();
  ASSERT_TRUE(alone);
  const auto ids = encode_all(alone->model());
  const std::vector<std::vector<int32_t>> want = each_alone(*alone, ids, 24);
  EngineOptions o = options();
  o.max_num_batched_tokens = 48;  // buckets 1, 2, 4, ..., 64
  o.max_num_seqs = 4;
  auto engine = Engine::load(kModel, o);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  auto shapes = (*engine)->warm_up();
  ASSERT_TRUE(shapes.is_ok()) << shapes.status().message();
  EXPECT_EQ(*shapes, 7);
  EXPECT_EQ((*engine)->stats().kv_blocks_used, 0);
  const int64_t plans = (*engine)->model().session_stats().plans_compiled;
  EXPECT_GE(plans, 7);
  const auto got = run_all(**engine, ids, greedy(24), {0, 0, 0, 1, 2, 3, 5, 8});
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(got[i].tokens, want[i]) << "prompt " << i;
  EXPECT_EQ((*engine)->model().session_stats().plans_compiled, plans) << "a step shape the warm-up missed";
  EXPECT_EQ((*engine)->stats().kv_blocks_used, 0);
}

TEST_F(EngineTest, SpeculativeRequestsKeepTheirTokensBesidePlainOnes) {
  const std::unique_ptr<Engine> alone = alone_engine();
  ASSERT_TRUE(alone);
  const auto ids = encode_all(alone->model());
  const std::vector<std::vector<int32_t>> want = each_alone(*alone, ids, 40);

  // Prompt lookup, the model as its own draft (a copy loaded without paging: a draft decodes in
  // a Generator of its own), and no speculation, in turn; a step budget of 12 tokens drops drafts
  // that do not fit, and a pool of 10 blocks preempts (and drops drafts).
  auto draft_model = Model::load(kModel, ModelOptions{.num_threads = 2});
  ASSERT_TRUE(draft_model.is_ok()) << draft_model.status().message();
  EngineOptions tight = options();
  tight.max_num_batched_tokens = 12;
  tight.max_num_seqs = 4;
  tight.kv_cache_memory = 10 * 64 * 1024;
  for (const bool roomy : {false, true}) {
    auto engine = Engine::load(kModel, roomy ? options() : tight);
    ASSERT_TRUE(engine.is_ok()) << engine.status().message();
    std::vector<RequestParams> params(ids.size(), greedy(40));
    for (size_t i = 0; i < ids.size(); ++i) {
      SpeculativeParams& s = params[i].speculative;
      if (i % 3 == 0) s.method = SpeculativeMethod::kNgram;
      if (i % 3 == 1) {
        s.method = SpeculativeMethod::kDraftModel;
        s.draft_model = draft_model->get();
      }
      s.draft_tokens = 3 + static_cast<int32_t>(i % 4);
    }
    const auto got = run_all(**engine, ids, greedy(40), {0, 0, 1, 2, 2, 5, 9, 9}, &params);
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(got[i].tokens, want[i]) << "prompt " << i << ", roomy " << roomy;
    const EngineStats s = (*engine)->stats();
    EXPECT_GT(s.accepted_tokens, 0);
    EXPECT_LE(s.accepted_tokens, s.drafted_tokens);
    EXPECT_TRUE(roomy || s.preemptions > 0);
    EXPECT_EQ(s.kv_blocks_used, 0);
  }
}

TEST_F(EngineTest, SpeculationPausesWhileTheBatchIsFull) {
  const std::unique_ptr<Engine> alone = alone_engine();
  ASSERT_TRUE(alone);
  const auto ids = encode_all(alone->model());
  const std::vector<std::vector<int32_t>> want = each_alone(*alone, ids, 24);
  std::vector<RequestParams> params(ids.size(), greedy(24));
  for (RequestParams& p : params) p.speculative.method = SpeculativeMethod::kNgram;
  for (const int64_t most : {int64_t{1}, static_cast<int64_t>(ids.size()) + 1}) {
    EngineOptions o = options();
    o.speculative_disable_by_batch_size = most;
    auto engine = Engine::load(kModel, o);
    ASSERT_TRUE(engine.is_ok()) << engine.status().message();
    const auto got = run_all(**engine, ids, greedy(24), {0, 0, 1, 2, 2, 5, 9, 9}, &params);
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(got[i].tokens, want[i]) << "prompt " << i << ", most " << most;
    // One running request is already a full batch of one: nothing is drafted; above the batch, drafts.
    EXPECT_EQ((*engine)->stats().drafted_tokens > 0, most > 1) << "most " << most;
  }
}

TEST_F(EngineTest, SampledDraftsRepeatForASeedAloneAndBatched) {
  // The model as its own draft, sampling as each request samples: the drafts are nearly all
  // accepted, and a seed gives a request the same tokens alone and beside others.
  auto draft_model = Model::load(kModel, ModelOptions{.num_threads = 2});
  ASSERT_TRUE(draft_model.is_ok()) << draft_model.status().message();
  auto engine = Engine::load(kModel, options());
  ASSERT_TRUE(engine.is_ok());
  const auto ids = encode_all((*engine)->model());
  std::vector<RequestParams> params = seeded_sampling(ids.size(), 300);
  for (RequestParams& p : params) {
    p.speculative.method = SpeculativeMethod::kDraftModel;
    p.speculative.draft_model = draft_model->get();
    p.speculative.draft_tokens = 3;
  }
  expect_alone_equals_batched(**engine, ids, params);
  const EngineStats s = (*engine)->stats();
  ASSERT_GT(s.drafted_tokens, 0);
  EXPECT_GT(static_cast<double>(s.accepted_tokens), 0.9 * static_cast<double>(s.drafted_tokens));
}

TEST_F(EngineTest, SeededSamplingDrawsTheSameTokensAloneAndBatched) {
  auto engine = Engine::load(kModel, options());
  ASSERT_TRUE(engine.is_ok());
  const auto ids = encode_all((*engine)->model());
  expect_alone_equals_batched(**engine, ids, seeded_sampling(ids.size(), 100));
}

// Structured output inside the engine: each constrained request, batched with unconstrained ones,
// gives the tokens the contiguous Generator gives under the same constraint.
TEST_F(EngineTest, ConstrainedRequestsMatchTheGenerator) {
  auto engine = Engine::load(kModel, options());
  ASSERT_TRUE(engine.is_ok());
  auto model = Model::load(kModel, ModelOptions{.num_threads = 2});
  ASSERT_TRUE(model.is_ok());
  const auto ids = encode_all(**model);
  const std::vector<ConstraintSpec> specs = {{ConstraintKind::kJsonObject, ""},
                                             {ConstraintKind::kRegex, "[0-9]{3}-[a-z]+ (yes|no)"},
                                             {ConstraintKind::kJsonSchema, R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})"}};
  std::vector<RequestParams> params(ids.size(), greedy(24));
  std::vector<std::vector<int32_t>> want(ids.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    params[i].constraint = specs[i];
    GeneratorParams gp;
    gp.sampling = params[i].sampling;
    gp.max_new_tokens = 24;
    gp.constraint = specs[i];
    gp.prompts = {ids[i]};
    auto gen = Generator::create(**model, gp);
    ASSERT_TRUE(gen.is_ok()) << gen.status().message();
    ASSERT_TRUE((*gen)->generate(nullptr).is_ok());
    const std::span<const int32_t> all = (*gen)->tokens(0);
    want[i].assign(all.begin() + static_cast<std::ptrdiff_t>(ids[i].size()), all.end());
  }
  const auto got = run_all(**engine, ids, {}, {0, 0, 1, 0, 2, 3, 3, 4}, &params);
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(got[i].tokens, want[i]) << "constraint " << i;
  // Speculating under the constraint: drafts the grammar refuses are rejected, the tokens stay.
  for (size_t i = 0; i < specs.size(); ++i) params[i].speculative.method = SpeculativeMethod::kNgram;
  const auto speculated = run_all(**engine, ids, {}, {0, 0, 1, 0, 2, 3, 3, 4}, &params);
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(speculated[i].tokens, want[i]) << "speculating, constraint " << i;
}

// Fast-forward (SpeculativeParams::fast_forward): constrained requests batched with plain ones
// keep their greedy tokens and take fewer steps; seeded sampling draws the same tokens alone and
// batched, also in an engine busy enough to stop other drafts (forced text is still drafted).
const char* const kLongKeys =
    R"({"type":"object","properties":{"customer_identification_number":{"type":"integer","minimum":0,"maximum":999},)"
    R"("shipping_address_first_line":{"type":"string","maxLength":12},"is_priority_delivery":{"type":"boolean"}},)"
    R"("required":["customer_identification_number","shipping_address_first_line","is_priority_delivery"],)"
    R"("additionalProperties":false})";

TEST_F(EngineTest, FastForwardKeepsTheTokensInFewerSteps) {
  auto engine = Engine::load(kModel, options());
  ASSERT_TRUE(engine.is_ok());
  const auto ids = encode_all((*engine)->model());
  std::vector<RequestParams> params(ids.size(), greedy(80));
  for (size_t i = 0; i < ids.size(); i += 2) params[i].constraint = ConstraintSpec{ConstraintKind::kJsonSchema, kLongKeys};
  const std::vector<int> arrivals = {0, 0, 1, 0, 2, 3, 3, 4};
  const EngineStats before = (*engine)->stats();
  const auto plain = run_all(**engine, ids, {}, arrivals, &params);
  const EngineStats middle = (*engine)->stats();
  for (size_t i = 0; i < ids.size(); i += 2) params[i].speculative.fast_forward = true;
  const auto fast = run_all(**engine, ids, {}, arrivals, &params);
  const EngineStats after = (*engine)->stats();
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(fast[i].tokens, plain[i].tokens) << "prompt " << i;
  EXPECT_EQ(middle.drafted_tokens, before.drafted_tokens);
  EXPECT_GT(after.forced_accepted_tokens, 0);
  EXPECT_EQ(after.forced_drafted_tokens, after.drafted_tokens);
  // Alone (the batch's steps are its longest request's), a fast-forwarded request takes fewer.
  int64_t steps[2];
  for (const bool forward : {false, true}) {
    params[0].speculative.fast_forward = forward;
    const int64_t start = (*engine)->stats().steps;
    EXPECT_EQ(run_all(**engine, {ids[0]}, params[0], {0})[0].tokens, plain[0].tokens);
    steps[forward] = (*engine)->stats().steps - start;
  }
  EXPECT_LT(steps[1], steps[0]);

  for (const int64_t busy : {0, 2}) {
    EngineOptions o = options();
    o.speculative_disable_by_batch_size = busy;
    auto sampling = Engine::load(kModel, o);
    ASSERT_TRUE(sampling.is_ok());
    std::vector<RequestParams> seeded = seeded_sampling(ids.size(), 700);
    for (RequestParams& p : seeded) {
      p.max_new_tokens = 60;
      p.constraint = ConstraintSpec{ConstraintKind::kJsonSchema, kLongKeys};
      p.speculative.fast_forward = true;
    }
    expect_alone_equals_batched(**sampling, ids, seeded);
    EXPECT_GT((*sampling)->stats().forced_accepted_tokens, 0) << "busy " << busy;
  }
}

TEST_F(EngineTest, AbortFreesBlocksAndReportsTheRequest) {
  auto engine = Engine::load(kModel, options());
  ASSERT_TRUE(engine.is_ok());
  const auto ids = encode_all((*engine)->model());
  const uint64_t keep = (*engine)->add_request(ids[0], greedy(8)).value();
  const uint64_t stop = (*engine)->add_request(ids[1], greedy(200)).value();
  ASSERT_TRUE((*engine)->step().is_ok());
  EXPECT_GT((*engine)->stats().kv_blocks_used, 0);
  (*engine)->abort(stop);
  bool aborted = false, kept = false;
  while ((*engine)->has_work()) {
    auto outputs = (*engine)->step();
    ASSERT_TRUE(outputs.is_ok());
    for (const RequestOutput& out : *outputs) {
      if (out.id == stop && out.finished) aborted = out.reason == FinishReason::kAborted;
      if (out.id == keep && out.finished) kept = out.reason == FinishReason::kLength;
    }
  }
  EXPECT_TRUE(aborted);
  EXPECT_TRUE(kept);
  EXPECT_EQ((*engine)->stats().kv_blocks_used, 0);
}

TEST_F(EngineTest, BadRequestsAreRefusedWithTheReason) {
  EngineOptions o = options();
  o.kv_cache_memory = 4 * 64 * 1024;  // 4 blocks of 16 positions
  auto engine = Engine::load(kModel, o);
  ASSERT_TRUE(engine.is_ok());
  const auto contains = [](const Status& s, const std::string& what) {
    return !s.is_ok() && s.message().find(what) != std::string::npos;
  };
  EXPECT_TRUE(contains((*engine)->add_request({}, greedy(4)).status(), "prompt is empty"));
  EXPECT_TRUE(contains((*engine)->add_request({1, 99999}, greedy(4)).status(), "outside the vocabulary"));
  EXPECT_TRUE(contains((*engine)->add_request(std::vector<int32_t>(600, 5), greedy(4)).status(), "context holds 512"));
  EXPECT_TRUE(contains((*engine)->add_request({1, 2}, greedy(100)).status(), "KV blocks"));
  RequestParams bad = greedy(4);
  bad.sampling.greedy = false;
  bad.sampling.top_p = 2.0f;
  EXPECT_FALSE((*engine)->add_request({1, 2}, bad).is_ok());
  RequestParams speculative = greedy(4);
  speculative.speculative.method = SpeculativeMethod::kDraftModel;
  EXPECT_TRUE(contains((*engine)->add_request({1, 2}, speculative).status(), "needs a draft model"));
  speculative.speculative.draft_model = &(*engine)->model();
  EXPECT_TRUE(contains((*engine)->add_request({1, 2}, speculative).status(), "load it with Model::load"));
  speculative.speculative.method = SpeculativeMethod::kNgram;
  speculative.speculative.draft_tokens = 16;
  EXPECT_TRUE(contains((*engine)->add_request({1, 2}, speculative).status(), "draft_tokens must be in [1, 15]"));
  RequestParams unconstrained = greedy(4);
  unconstrained.speculative.fast_forward = true;
  EXPECT_TRUE(contains((*engine)->add_request({1, 2}, unconstrained).status(), "no constraint is set"));
  EngineOptions zero = options();
  zero.max_num_seqs = 0;
  EXPECT_TRUE(contains(Engine::load(kModel, zero).status(), "max_num_seqs"));
}

// Mixture-of-experts models run batched like dense ones: six requests of different lengths,
// arriving over several steps, chunked prefills beside decodes (so an expert sees 1 row in one step
// and many in the next, through QMoE's GEMV and GEMM paths), each with the greedy tokens it gets
// alone. Qwen3-MoE with int4 experts (8, top 4) and gpt-oss with MXFP4 experts, sinks and windows.
TEST_F(EngineTest, MixtureOfExpertsModelsBatchLikeDenseOnes) {
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const std::vector<testing::ParityFixture> models = {
      {"qwen3_moe_int4", {"--preset", "qwen3_moe", "--weights", "int4", "--block-size", "32"}, {}, 0, ""},
      {"gpt_oss_mxfp4", {"--preset", "gpt_oss", "--moe-weights", "mxfp4"}, {}, 0, ""},
  };
  const std::vector<std::vector<int32_t>> ids = {{5, 17, 300, 42, 7, 99, 3},  {11, 12},
                                                 {800, 1, 3, 4, 600, 31, 9, 250, 77, 13, 14, 8}, {400},
                                                 {9, 250, 31, 400, 5, 77}, {64, 65, 66, 67, 68}};
  RequestParams params = greedy(24);
  params.ignore_eos = true;
  for (const testing::ParityFixture& fixture : models) {
    SCOPED_TRACE(fixture.name);
    auto dir = testing::build_fixture_model(fixture, scratch.path());
    ASSERT_TRUE(dir.is_ok()) << dir.status().message();
    EngineOptions alone_options = options();
    alone_options.prefix_caching = false;
    auto alone = Engine::load(dir->string(), alone_options);
    ASSERT_TRUE(alone.is_ok()) << alone.status().message();
    std::vector<std::vector<int32_t>> want;
    for (const auto& p : ids) want.push_back(run_all(**alone, {p}, params, {0})[0].tokens);

    EngineOptions batched_options = options();
    batched_options.max_num_batched_tokens = 8;
    auto batched = Engine::load(dir->string(), batched_options);
    ASSERT_TRUE(batched.is_ok()) << batched.status().message();
    ASSERT_TRUE((*batched)->stats().paged) << (*batched)->model().info().paged_kv_unavailable;
    const auto got = run_all(**batched, ids, params, {0, 0, 1, 2, 2, 5});
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(want[i].size(), 24u) << "prompt " << i;
      EXPECT_EQ(got[i].tokens, want[i]) << "prompt " << i;
    }
    EXPECT_EQ((*batched)->stats().kv_blocks_used, 0);
  }
}

}  // namespace
}  // namespace onnx_genai::genai
