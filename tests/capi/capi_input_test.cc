// The C API on bad input: NULL handles, malformed and unsupported config overlays, unknown search
// options and providers, out-of-range tokens, shapes and call orders. Each call must come back
// with a result naming what is wrong (never crash, never a silent success). Runs in the sanitizer
// build too.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "capi_test_util.h"
#include "oracle_io.h"

namespace onnx_genai {
namespace {

using namespace testing;

class CApiInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    OgaModel* model = nullptr;
    ASSERT_EQ(message(OgaCreateModel(kDefaultModel.c_str(), &model)), "");
    model_ = model;
  }
  static void TearDownTestSuite() { OgaDestroyModel(model_); }

  static ConfigPtr config() {
    OgaConfig* c = nullptr;
    EXPECT_EQ(message(OgaCreateConfig(kDefaultModel.c_str(), &c)), "");
    return ConfigPtr(c);
  }
  static ParamsPtr params() {
    OgaGeneratorParams* p = nullptr;
    EXPECT_EQ(message(OgaCreateGeneratorParams(model_, &p)), "");
    return ParamsPtr(p);
  }
  static GeneratorPtr generator(const OgaGeneratorParams* p) {
    OgaGenerator* g = nullptr;
    EXPECT_EQ(message(OgaCreateGenerator(model_, p, &g)), "");
    return GeneratorPtr(g);
  }

  static OgaModel* model_;
};

OgaModel* CApiInputTest::model_ = nullptr;

::testing::AssertionResult fails_with(OgaResult* result, const std::string& part) {
  const std::string text = message(result);
  if (text.empty()) return ::testing::AssertionFailure() << "succeeded; expected an error containing '" << part << "'";
  if (text.find(part) == std::string::npos) return ::testing::AssertionFailure() << "error '" << text << "' lacks '" << part << "'";
  return ::testing::AssertionSuccess();
}

TEST_F(CApiInputTest, NullArgumentsAreErrors) {
  OgaModel* model = nullptr;
  EXPECT_TRUE(fails_with(OgaCreateModel(nullptr, &model), "OgaCreateModel: config_path is NULL"));
  EXPECT_TRUE(fails_with(OgaCreateModel(kDefaultModel.c_str(), nullptr), "out is NULL"));
  EXPECT_TRUE(fails_with(OgaCreateTokenizer(nullptr, nullptr), "model is NULL"));
  EXPECT_TRUE(fails_with(OgaGenerator_GenerateNextToken(nullptr), "generator is NULL"));
  EXPECT_TRUE(fails_with(OgaConfigOverlay(nullptr, "{}"), "config is NULL"));
  EXPECT_TRUE(fails_with(OgaGeneratorParamsSetSearchNumber(nullptr, "top_k", 1), "params is NULL"));
  EXPECT_FALSE(OgaGenerator_IsDone(nullptr));
  EXPECT_EQ(OgaGenerator_GetSequenceCount(nullptr, 0), 0u);
  EXPECT_EQ(OgaGenerator_GetSequenceData(nullptr, 0), nullptr);
  EXPECT_EQ(OgaSequencesCount(nullptr), 0u);
  OgaDestroyModel(nullptr);
  OgaDestroyResult(nullptr);
  OgaDestroyString(nullptr);
}

TEST_F(CApiInputTest, MissingModelNamesThePath) {
  OgaModel* model = nullptr;
  EXPECT_TRUE(fails_with(OgaCreateModel("/nonexistent/model", &model), "/nonexistent/model"));
  EXPECT_EQ(model, nullptr);
}

TEST_F(CApiInputTest, OverlaysChangeOnlyWhatIsApplied) {
  auto c = config();
  EXPECT_TRUE(fails_with(OgaConfigOverlay(c.get(), "{\"search\": "), "not valid JSON"));
  EXPECT_TRUE(fails_with(OgaConfigOverlay(c.get(), "[1, 2]"), "must be a JSON object"));
  EXPECT_TRUE(fails_with(OgaConfigOverlay(c.get(), R"({"model": {"context_length": 1024}})"), "/model/context_length"));
  EXPECT_TRUE(fails_with(OgaConfigOverlay(c.get(), R"({"search": {"top_q": 3}})"), "unknown search option 'top_q'"));
  EXPECT_TRUE(fails_with(OgaConfigOverlay(c.get(), R"({"search": {"top_p": 7}})"), "top_p must be in"));
  EXPECT_TRUE(fails_with(OgaConfigOverlay(c.get(), R"({"search": {"top_k": "x"}})"), "must be a number or a bool"));
  // Equal to the package's value: not a change.
  EXPECT_EQ(message(OgaConfigOverlay(c.get(), R"({"model": {"context_length": 512}})")), "");
  EXPECT_EQ(message(OgaConfigOverlay(c.get(), R"({"search": {"max_length": 20, "do_sample": true}})")), "");
  EXPECT_EQ(message(OgaConfigOverlay(c.get(), R"({"model": {"decoder": {"session_options": {"intra_op_num_threads": 1}}}})")), "");
  OgaModel* m = nullptr;
  ASSERT_EQ(message(OgaCreateModelFromConfig(c.get(), &m)), "");
  ModelPtr model(m);
  OgaGeneratorParams* p = nullptr;
  ASSERT_EQ(message(OgaCreateGeneratorParams(m, &p)), "");
  ParamsPtr owned(p);
  double max_length = 0;
  bool do_sample = false;
  ASSERT_EQ(message(OgaGeneratorParamsGetSearchNumber(p, "max_length", &max_length)), "");
  ASSERT_EQ(message(OgaGeneratorParamsGetSearchBool(p, "do_sample", &do_sample)), "");
  EXPECT_EQ(max_length, 20);
  EXPECT_TRUE(do_sample);
}

// A package whose genai_config.json has no search section or session options: an overlay adds
// those subtrees whole, and what it adds there is still applied.
TEST_F(CApiInputTest, OverlaysAddSubtreesThePackageLacks) {
  ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  for (const auto& entry : std::filesystem::directory_iterator(kDefaultModel)) {
    if (entry.path().filename() != "genai_config.json") {
      std::filesystem::create_symlink(entry.path(), scratch.path() / entry.path().filename());
    }
  }
  nlohmann::json config = nlohmann::json::parse(std::ifstream(kDefaultModel + "/genai_config.json"));
  config.erase("search");
  config["model"]["decoder"].erase("session_options");
  std::ofstream(scratch.path() / "genai_config.json") << config.dump();
  OgaConfig* c = nullptr;
  ASSERT_EQ(message(OgaCreateConfig(scratch.path().c_str(), &c)), "");
  ConfigPtr owned(c);
  EXPECT_EQ(message(OgaConfigOverlay(c, R"({"search": {"max_length": 24}})")), "");
  EXPECT_EQ(message(OgaConfigAppendProvider(c, "cpu")), "");
  EXPECT_TRUE(fails_with(OgaConfigOverlay(c, R"({"model": {"decoder": {"session_options": {"log_id": "x"}}}})"),
                         "/model/decoder/session_options/log_id"));
  EXPECT_TRUE(fails_with(OgaConfigOverlay(c, R"({"model": {"type": null}})"), "/model/type"));
  OgaModel* m = nullptr;
  ASSERT_EQ(message(OgaCreateModelFromConfig(c, &m)), "");
  ModelPtr model(m);
  OgaGeneratorParams* p = nullptr;
  ASSERT_EQ(message(OgaCreateGeneratorParams(m, &p)), "");
  ParamsPtr params(p);
  double max_length = 0;
  ASSERT_EQ(message(OgaGeneratorParamsGetSearchNumber(p, "max_length", &max_length)), "");
  EXPECT_EQ(max_length, 24);
}

TEST_F(CApiInputTest, ProvidersWeLackAreErrors) {
  auto c = config();
  EXPECT_TRUE(fails_with(OgaConfigAppendProvider(c.get(), "dml"), "execution provider 'dml' is not available"));
  EXPECT_TRUE(fails_with(OgaConfigSetProviderOption(c.get(), "webgpu", "x", "y"), "'webgpu' is not available"));
  EXPECT_TRUE(fails_with(OgaConfigSetProviderOption(c.get(), "cuda", "arena", "1"), "cuda provider option 'arena'"));
  EXPECT_TRUE(fails_with(OgaConfigSetProviderOption(c.get(), "cuda", "device_id", "x"), "cuda:x"));
  EXPECT_TRUE(fails_with(OgaConfigOverlay(c.get(), R"({"model": {"decoder": {"session_options": {"provider_options": [{"qnn": {}}]}}}})"),
                         "'qnn' is not available"));
  EXPECT_EQ(message(OgaConfigAppendProvider(c.get(), "cpu")), "");
  EXPECT_EQ(message(OgaConfigClearProviders(c.get())), "");
  OgaModel* m = nullptr;
  ASSERT_EQ(message(OgaCreateModelFromConfig(c.get(), &m)), "");
  const char* device = nullptr;
  ASSERT_EQ(message(OgaModelGetDeviceType(m, &device)), "");
  EXPECT_EQ(take_string(device), "CPU");
  OgaDestroyModel(m);
}

TEST_F(CApiInputTest, SearchOptionsAreChecked) {
  auto p = params();
  EXPECT_TRUE(fails_with(OgaGeneratorParamsSetSearchNumber(p.get(), "top_q", 1), "unknown search option 'top_q'"));
  EXPECT_TRUE(fails_with(OgaGeneratorParamsSetSearchNumber(p.get(), "do_sample", 1), "'do_sample' is not a number"));
  EXPECT_TRUE(fails_with(OgaGeneratorParamsSetSearchBool(p.get(), "top_k", true), "'top_k' is not a bool"));
  EXPECT_TRUE(fails_with(OgaGeneratorParamsSetSearchNumber(p.get(), "top_k", 2.5), "whole number"));
  EXPECT_TRUE(fails_with(OgaGeneratorParamsSetSearchNumber(p.get(), "temperature", -1), "temperature must be in"));
  EXPECT_TRUE(fails_with(OgaGeneratorParamsSetSearchNumber(p.get(), "max_length", 0.0 / 0.0), "max_length must be in"));
  EXPECT_TRUE(fails_with(OgaGeneratorParamsSetSearchNumber(p.get(), "batch_size", 1e9), "batch_size must be in"));
  ASSERT_EQ(message(OgaGeneratorParamsSetSearchNumber(p.get(), "num_beams", 4)), "");
  ASSERT_EQ(message(OgaGeneratorParamsSetSearchNumber(p.get(), "num_return_sequences", 5)), "");
  OgaGenerator* g = nullptr;
  EXPECT_TRUE(fails_with(OgaCreateGenerator(model_, p.get(), &g), "num_return_sequences must be in [1, num_beams 4], got 5"));
  EXPECT_EQ(g, nullptr);
  ASSERT_EQ(message(OgaGeneratorParamsSetSearchNumber(p.get(), "num_return_sequences", 2)), "");
  ASSERT_EQ(message(OgaGeneratorParamsSetSearchBool(p.get(), "do_sample", true)), "");
  EXPECT_TRUE(fails_with(OgaCreateGenerator(model_, p.get(), &g), "beam search (num_beams 4) cannot be combined with sampling"));
  ASSERT_EQ(message(OgaGeneratorParamsSetSearchBool(p.get(), "do_sample", false)), "");
  ASSERT_EQ(message(OgaGeneratorParamsSetSearchNumber(p.get(), "diversity_penalty", 0.5)), "");
  EXPECT_TRUE(fails_with(OgaCreateGenerator(model_, p.get(), &g), "group beam search"));
  ASSERT_EQ(message(OgaGeneratorParamsSetSearchNumber(p.get(), "diversity_penalty", 0)), "");
  EXPECT_TRUE(fails_with(OgaGeneratorParamsSetSearchNumber(p.get(), "num_beams", 0), "num_beams must be in"));
  EXPECT_EQ(g, nullptr);
}

TEST_F(CApiInputTest, TokensAndShapesAreChecked) {
  auto p = params();
  ASSERT_EQ(message(OgaGeneratorParamsSetSearchNumber(p.get(), "batch_size", 2)), "");
  auto g = generator(p.get());
  OgaTensor* logits = nullptr;
  EXPECT_TRUE(fails_with(OgaGenerator_GetLogits(g.get(), &logits), "append_tokens first"));
  EXPECT_TRUE(fails_with(OgaGenerator_GenerateNextToken(g.get()), "append_tokens first"));
  const int32_t odd[] = {5, 6, 7};
  EXPECT_TRUE(fails_with(OgaGenerator_AppendTokens(g.get(), odd, 3), "batch_size 2"));
  const int32_t outside[] = {5, 99999, 7, 8};
  EXPECT_TRUE(fails_with(OgaGenerator_AppendTokens(g.get(), outside, 4), "outside the vocabulary"));
  const int32_t padding[] = {5, 6, 0, 0};
  EXPECT_TRUE(fails_with(OgaGenerator_AppendTokens(g.get(), padding, 4), "sequence 1 has no tokens"));
  const int32_t rows[] = {5, 6, 7, 8};
  ASSERT_EQ(message(OgaGenerator_AppendTokens(g.get(), rows, 4)), "");
  EXPECT_TRUE(fails_with(OgaGenerator_AppendTokens(g.get(), rows, 4), "same tokens"));
  std::vector<float> small(10);
  const int64_t shape[] = {10};
  OgaTensor* tensor = nullptr;
  ASSERT_EQ(message(OgaCreateTensorFromBuffer(small.data(), shape, 1, OgaElementType_float32, &tensor)), "");
  TensorPtr owned(tensor);
  EXPECT_TRUE(fails_with(OgaGenerator_SetLogits(g.get(), tensor), "16384 expected"));
  EXPECT_TRUE(fails_with(OgaGenerator_RewindTo(g.get(), 50), "cannot rewind"));
  const int64_t negative[] = {2, -1};
  EXPECT_TRUE(fails_with(OgaCreateTensorFromBuffer(nullptr, negative, 2, OgaElementType_int32, &tensor), "dimension 1"));
  const int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_TRUE(fails_with(OgaCreateTensorFromBuffer(nullptr, huge, 2, OgaElementType_float32, &tensor), "too large"));
  EXPECT_TRUE(fails_with(OgaCreateTensorFromBuffer(nullptr, shape, 1, OgaElementType_float16, &tensor), "not float32"));
}

TEST_F(CApiInputTest, TokenizerRejectsBadText) {
  OgaTokenizer* t = nullptr;
  ASSERT_EQ(message(OgaCreateTokenizer(model_, &t)), "");
  TokenizerPtr tokenizer(t);
  OgaSequences* s = nullptr;
  ASSERT_EQ(message(OgaCreateSequences(&s)), "");
  SequencesPtr sequences(s);
  EXPECT_TRUE(fails_with(OgaTokenizerEncode(t, "bad \xff byte", s), "UTF-8"));
  const int32_t ids[] = {1, 999999};
  const char* text = nullptr;
  EXPECT_TRUE(fails_with(OgaTokenizerDecode(t, ids, 2, &text), "999999"));
  int32_t id = 0;
  EXPECT_TRUE(fails_with(OgaTokenizerToTokenId(t, "no such token at all", &id), "not a token"));
  EXPECT_TRUE(fails_with(OgaTokenizerApplyChatTemplate(t, nullptr, "not json", nullptr, true, &text), ""));
  EXPECT_TRUE(fails_with(OgaTokenizerApplyChatTemplate(t, "{% for %}", "[]", nullptr, true, &text), ""));
  OgaTokenizerStream* stream = nullptr;
  ASSERT_EQ(message(OgaCreateTokenizerStream(t, &stream)), "");
  StreamPtr owned(stream);
  EXPECT_TRUE(fails_with(OgaTokenizerStreamDecode(stream, -3, &text), "-3"));
  EXPECT_TRUE(fails_with(OgaAppendTokenToSequence(1, s, 5), "sequence_index 5"));
  EXPECT_EQ(OgaSequencesGetSequenceData(s, 9), nullptr);
}

}  // namespace
}  // namespace onnx_genai
