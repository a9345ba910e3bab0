// The engine through the C API (OgaEngine, OgaRequest), as onnxruntime-genai's examples drive it:
// requests with their own params join between steps, each step hands out one request with new
// tokens, and every request's tokens are those its own generator gives alone (the C API's
// Generator, itself held to the C++ API). Handles are counted, removal and release stop a
// request, and errors are results with the library's text. A config overlay's
// model.tensor_parallel shards the model for generators and the engine alike.
#include <cstdint>
#include <functional>

#include "capi_model_test.h"
#include "runtime/model_parity.h"

namespace onnx_genai {
namespace {

using namespace testing;

using RequestPtr = std::unique_ptr<OgaRequest, Deleter<OgaRequest, OgaDestroyRequest>>;
using EnginePtr = std::unique_ptr<OgaEngine, Deleter<OgaEngine, OgaDestroyEngine>>;

class CApiEngineTest : public CApiModelTest {
 protected:
  static void SetUpTestSuite() {
    CApiModelTest::SetUpTestSuite();
    engine_ = make_engine().release();
  }
  static void TearDownTestSuite() {
    OgaDestroyEngine(engine_);
    CApiModelTest::TearDownTestSuite();
  }

  static EnginePtr make_engine() {
    OgaEngine* engine = nullptr;
    EXPECT_EQ(message(OgaCreateEngine(model_, &engine)), "");
    return EnginePtr(engine);
  }

  // A request for `prompt` under `p`, with `index` as its opaque data.
  static RequestPtr request(OgaGeneratorParams* p, const std::vector<int32_t>& prompt, uintptr_t index) {
    OgaRequest* r = nullptr;
    EXPECT_EQ(message(OgaCreateRequest(p, &r)), "");
    RequestPtr owned(r);
    OgaSequences* s = nullptr;
    EXPECT_EQ(message(OgaCreateSequences(&s)), "");
    const SequencesPtr sequences(s);
    EXPECT_EQ(message(OgaAppendTokenSequence(prompt.data(), prompt.size(), s)), "");
    EXPECT_EQ(message(OgaRequestAddTokens(r, s)), "");
    EXPECT_EQ(message(OgaRequestSetOpaqueData(r, reinterpret_cast<void*>(index))), "");
    return owned;
  }

  // onnxruntime-genai's loop: step until no request is returned, reading each returned request's
  // unseen tokens into `tokens[its opaque index]`; `before_step(n)` runs before step n.
  static void run(OgaEngine* engine, std::vector<std::vector<int32_t>>& tokens,
                  const std::function<void(int)>& before_step = {}) {
    for (int step = 0; step < 1000; ++step) {
      if (before_step) before_step(step);
      OgaRequest* ready = nullptr;
      ASSERT_EQ(message(OgaEngineStep(engine, &ready)), "");
      if (ready == nullptr) return;
      const RequestPtr handle(ready);
      void* index = nullptr;
      ASSERT_EQ(message(OgaRequestGetOpaqueData(ready, &index)), "");
      bool more = false;
      while (message(OgaRequestHasUnseenTokens(ready, &more)).empty() && more) {
        int32_t token = 0;
        ASSERT_EQ(message(OgaRequestGetUnseenToken(ready, &token)), "");
        tokens.at(reinterpret_cast<uintptr_t>(index)).push_back(token);
      }
    }
    FAIL() << "the engine stopped making progress";
  }

  // What the C API's own generator gives after `prompt` under `p`.
  static std::vector<int32_t> alone(const OgaGeneratorParams* p, const std::vector<int32_t>& prompt) {
    const std::vector<int32_t> all = finish(start(p, prompt).get(), 1)[0];
    return {all.begin() + static_cast<std::ptrdiff_t>(prompt.size()), all.end()};
  }

  static bool flag(const OgaRequest* r, OgaResult* (*get)(const OgaRequest*, bool*)) {
    bool value = false;
    EXPECT_EQ(message(get(r, &value)), "");
    return value;
  }

  static inline OgaEngine* engine_ = nullptr;
};

TEST_F(CApiEngineTest, BatchedRequestsGiveEachItsOwnGeneratorsTokens) {
  const std::vector<std::vector<int32_t>> prompts = {encode("The Lord is my shepherd"), encode("In the beginning"),
                                                     encode("Blessed are the meek"), encode("Count the flock:")};
  std::vector<ParamsPtr> p;
  p.push_back(params({}));
  p.push_back(params({{"max_length", 24}}));
  p.push_back(params({{"top_k", 20}, {"temperature", 0.8}, {"random_seed", 7}}, /*do_sample=*/true));
  p.push_back(params({{"max_length", 60}}));
  ASSERT_EQ(message(OgaGeneratorParamsSetGuidance(p[3].get(), "regex", "(yes|no), [0-9]{2,4} (sheep|goats)\\.", false)),
            "");
  std::vector<RequestPtr> requests;
  for (size_t i = 0; i < prompts.size(); ++i) requests.push_back(request(p[i].get(), prompts[i], i));
  std::vector<std::vector<int32_t>> got(prompts.size());
  for (size_t i = 0; i < 3; ++i) ASSERT_EQ(message(OgaEngineAddRequest(engine_, requests[i].get())), "");
  run(engine_, got, [&](int step) {
    if (step == 2) {
      EXPECT_EQ(message(OgaEngineAddRequest(engine_, requests[3].get())), "");  // joins a running batch
    }
  });
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i], alone(p[i].get(), prompts[i])) << "request " << i;
    EXPECT_TRUE(flag(requests[i].get(), OgaRequestIsDone)) << "request " << i;
    EXPECT_TRUE(flag(requests[i].get(), OgaRequestIsTurnComplete)) << "request " << i;
    EXPECT_FALSE(flag(requests[i].get(), OgaRequestHasUnseenTokens)) << "request " << i;
  }
  bool pending = true;
  ASSERT_EQ(message(OgaEngineHasPendingRequests(engine_, &pending)), "");
  EXPECT_FALSE(pending);
  for (const RequestPtr& r : requests) EXPECT_EQ(message(OgaEngineRemoveRequest(engine_, r.get())), "");
}

TEST_F(CApiEngineTest, StepHandsOutTheAddedRequestWithAHandleOfItsOwn) {
  const auto p = params({{"max_length", 20}});
  OgaRequest* created = request(p.get(), encode("Hear, O Israel"), 0).release();
  ASSERT_EQ(message(OgaEngineAddRequest(engine_, created)), "");
  OgaRequest* ready = nullptr;
  ASSERT_EQ(message(OgaEngineStep(engine_, &ready)), "");
  EXPECT_EQ(ready, created);
  OgaDestroyRequest(created);  // the step's handle keeps it
  EXPECT_TRUE(flag(ready, OgaRequestHasUnseenTokens));
  ASSERT_EQ(message(OgaEngineRemoveRequest(engine_, ready)), "");
  ASSERT_EQ(message(OgaEngineRemoveRequest(engine_, ready)), "");  // no longer in an engine: nothing to do
  OgaDestroyRequest(ready);
}

TEST_F(CApiEngineTest, RemovingOrReleasingARequestStopsItAndTheOthersGoOn) {
  const std::vector<std::vector<int32_t>> prompts = {encode("The Lord is my shepherd"), encode("In the beginning"),
                                                     encode("Then Jesus answered")};
  const auto p = params({});
  std::vector<RequestPtr> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    requests.push_back(request(p.get(), prompts[i], i));
    ASSERT_EQ(message(OgaEngineAddRequest(engine_, requests[i].get())), "");
  }
  std::vector<std::vector<int32_t>> got(prompts.size());
  run(engine_, got, [&](int step) {
    if (step == 6) {
      EXPECT_EQ(message(OgaEngineRemoveRequest(engine_, requests[1].get())), "");
      requests[2].reset();  // its last handle: the engine aborts and frees it
    }
  });
  EXPECT_EQ(got[0], alone(p.get(), prompts[0]));
  const std::vector<int32_t> full = alone(p.get(), prompts[1]);
  ASSERT_FALSE(got[1].empty());
  EXPECT_LT(got[1].size(), full.size());
  EXPECT_EQ(got[1], std::vector<int32_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(got[1].size())));
  EXPECT_FALSE(flag(requests[1].get(), OgaRequestIsDone));
  EXPECT_EQ(message(OgaEngineRemoveRequest(engine_, requests[0].get())), "");
}

TEST_F(CApiEngineTest, RequestsOutliveTheirEngine) {
  EnginePtr engine = make_engine();
  const auto p = params({});
  RequestPtr r = request(p.get(), encode("And God said"), 0);
  ASSERT_EQ(message(OgaEngineAddRequest(engine.get(), r.get())), "");
  OgaRequest* ready = nullptr;
  ASSERT_EQ(message(OgaEngineStep(engine.get(), &ready)), "");
  OgaDestroyRequest(ready);
  engine.reset();
  int32_t token = -1;
  ASSERT_EQ(message(OgaRequestGetUnseenToken(r.get(), &token)), "");
  EXPECT_EQ(token, alone(p.get(), encode("And God said"))[0]);
  EXPECT_FALSE(flag(r.get(), OgaRequestIsDone));
}

TEST_F(CApiEngineTest, ErrorsAreResultsWithTheReason) {
  const auto p = params({});
  OgaRequest* raw = nullptr;
  ASSERT_EQ(message(OgaCreateRequest(p.get(), &raw)), "");
  RequestPtr empty(raw);
  EXPECT_EQ(message(OgaEngineAddRequest(engine_, empty.get())),
            "OgaEngineAddRequest: the request has no tokens (OgaRequestAddTokens first)");
  OgaSequences* s = nullptr;
  ASSERT_EQ(message(OgaCreateSequences(&s)), "");
  const SequencesPtr two(s);
  const int32_t ids[] = {1, 2};
  ASSERT_EQ(message(OgaAppendTokenSequence(ids, 2, s)), "");
  ASSERT_EQ(message(OgaAppendTokenSequence(ids, 1, s)), "");
  EXPECT_EQ(message(OgaRequestAddTokens(empty.get(), s)), "OgaRequestAddTokens: a request takes one sequence, got 2");
  int32_t token = 0;
  EXPECT_EQ(message(OgaRequestGetUnseenToken(empty.get(), &token)),
            "OgaRequestGetUnseenToken: no unseen tokens (all 0 generated tokens were read)");

  const auto beams = params({{"num_beams", 2}});
  EXPECT_EQ(message(OgaEngineAddRequest(engine_, request(beams.get(), {1, 2}, 0).get())),
            "OgaEngineAddRequest: an engine request is one sequence: num_beams must be 1, got 2");
  const std::string outside = message(OgaEngineAddRequest(engine_, request(p.get(), {1, 99999}, 0).get()));
  EXPECT_NE(outside.find("OgaEngineAddRequest: request: prompt token 1 is 99999, outside the vocabulary"),
            std::string::npos)
      << outside;

  RequestPtr added = request(p.get(), encode("Hear, O Israel"), 0);
  ASSERT_EQ(message(OgaEngineAddRequest(engine_, added.get())), "");
  EXPECT_EQ(message(OgaEngineAddRequest(engine_, added.get())),
            "OgaEngineAddRequest: the request was already added to an engine (a request runs once)");
  EXPECT_EQ(message(OgaRequestAddTokens(added.get(), two.get())), "OgaRequestAddTokens: a request takes one sequence, got 2");
  ASSERT_EQ(message(OgaEngineRemoveRequest(engine_, added.get())), "");

  OgaRequest* ready = nullptr;
  EXPECT_EQ(message(OgaEngineStep(nullptr, &ready)), "OgaEngineStep: engine is NULL");
  EXPECT_EQ(message(OgaEngineAddRequest(engine_, nullptr)), "OgaEngineAddRequest: request is NULL");
  EXPECT_EQ(message(OgaCreateEngine(nullptr, nullptr)), "OgaCreateEngine: model is NULL");
  // Nothing is left running: a step returns no request.
  ASSERT_EQ(message(OgaEngineStep(engine_, &ready)), "");
  EXPECT_EQ(ready, nullptr);
}

// {"model": {"tensor_parallel": N}} (an onnx-genai key): a llama preset with 4 KV heads from
// tools/build_model.py gives N = 1's greedy tokens at N = 2 and 4, through the engine (batched,
// one request joining late) and through a generator.
TEST_F(CApiEngineTest, TensorParallelOverlayKeepsOneRanksTokens) {
  ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const std::vector<std::string> args = {"--preset", "llama", "--set", "num_attention_heads=8", "--set",
                                         "num_key_value_heads=4", "--set", "vocab_size=300"};
  auto dir = build_fixture_model({"tp_capi", args, {}, 0, ""}, scratch.path());
  ASSERT_TRUE(dir.is_ok()) << dir.status().message();
  const std::vector<std::vector<int32_t>> prompts = {{5, 17, 42, 99, 7}, {8, 1, 64}, {120, 121, 122, 123, 9, 250, 11}};
  std::vector<std::vector<int32_t>> want, want_generator;
  for (const int ranks : {1, 2, 4}) {
    SCOPED_TRACE("N=" + std::to_string(ranks));
    OgaConfig* c = nullptr;
    ASSERT_EQ(message(OgaCreateConfig(dir->c_str(), &c)), "");
    const ConfigPtr config(c);
    const std::string overlay = R"({"model": {"tensor_parallel": )" + std::to_string(ranks) + "}}";
    ASSERT_EQ(message(OgaConfigOverlay(c, overlay.c_str())), "");
    OgaModel* m = nullptr;
    ASSERT_EQ(message(OgaCreateModelFromConfig(c, &m)), "");
    const ModelPtr model(m);
    OgaGeneratorParams* raw = nullptr;
    ASSERT_EQ(message(OgaCreateGeneratorParams(m, &raw)), "");
    const ParamsPtr p(raw);
    ASSERT_EQ(message(OgaGeneratorParamsSetSearchNumber(p.get(), "max_length", 24)), "");
    ASSERT_EQ(message(OgaGeneratorParamsSetSearchBool(p.get(), "do_sample", false)), "");
    OgaEngine* e = nullptr;
    ASSERT_EQ(message(OgaCreateEngine(m, &e)), "");
    const EnginePtr engine(e);
    std::vector<RequestPtr> requests;
    for (size_t i = 0; i < prompts.size(); ++i) requests.push_back(request(p.get(), prompts[i], i));
    for (size_t i = 0; i < 2; ++i) ASSERT_EQ(message(OgaEngineAddRequest(e, requests[i].get())), "");
    std::vector<std::vector<int32_t>> got(prompts.size());
    run(e, got, [&](int step) {
      if (step == 2) {
        EXPECT_EQ(message(OgaEngineAddRequest(e, requests[2].get())), "");
      }
    });
    OgaGenerator* g = nullptr;
    ASSERT_EQ(message(OgaCreateGenerator(m, p.get(), &g)), "");
    const GeneratorPtr generator(g);
    ASSERT_EQ(message(OgaGenerator_AppendTokens(g, prompts[2].data(), prompts[2].size())), "");
    const std::vector<int32_t> generated = finish(g, 1)[0];
    if (ranks == 1) {
      want = got;
      want_generator = {generated};
      EXPECT_EQ(std::vector<int32_t>(generated.begin() + static_cast<std::ptrdiff_t>(prompts[2].size()), generated.end()),
                got[2]);
    } else {
      EXPECT_EQ(got, want);
      EXPECT_EQ(std::vector<std::vector<int32_t>>{generated}, want_generator);
    }
    for (const RequestPtr& r : requests) EXPECT_EQ(message(OgaEngineRemoveRequest(e, r.get())), "");
  }

  OgaConfig* c = nullptr;
  ASSERT_EQ(message(OgaCreateConfig(kDefaultModel.c_str(), &c)), "");
  const ConfigPtr config(c);
  const std::string bad = message(OgaConfigOverlay(c, R"({"model": {"tensor_parallel": 0}})"));
  EXPECT_NE(bad.find("model.tensor_parallel must be a whole number in [1, 64], got 0"), std::string::npos) << bad;
  ASSERT_EQ(message(OgaConfigOverlay(c, R"({"model": {"tensor_parallel": 2}})")), "");
  OgaModel* m = nullptr;
  const std::string one_head = message(OgaCreateModelFromConfig(c, &m));
  EXPECT_NE(one_head.find("kv_num_heads"), std::string::npos) << one_head;
  EXPECT_EQ(m, nullptr);
}

}  // namespace
}  // namespace onnx_genai
