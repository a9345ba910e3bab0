// The fixture of the C API's generation tests: the default model through the C API and through
// the C++ API (the reference), and helpers that make params, encode, generate and read back.
#pragma once

#include <optional>
#include <span>

#include "capi_test_util.h"
#include "onnx_genai/genai.h"

namespace onnx_genai::testing {

constexpr double kMaxLength = 40;

class CApiModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    OgaModel* model = nullptr;
    ASSERT_EQ(message(OgaCreateModel(kDefaultModel.c_str(), &model)), "");
    model_ = model;
    OgaTokenizer* tokenizer = nullptr;
    ASSERT_EQ(message(OgaCreateTokenizer(model_, &tokenizer)), "");
    tokenizer_ = tokenizer;
    auto cpp = genai::Model::load(kDefaultModel);
    ASSERT_TRUE(cpp.is_ok()) << cpp.status().message();
    cpp_ = cpp->release();
  }
  static void TearDownTestSuite() {
    OgaDestroyTokenizer(tokenizer_);
    OgaDestroyModel(model_);
    delete cpp_;
  }

  static ParamsPtr params(std::initializer_list<std::pair<const char*, double>> numbers, bool do_sample = false) {
    OgaGeneratorParams* p = nullptr;
    EXPECT_EQ(message(OgaCreateGeneratorParams(model_, &p)), "");
    EXPECT_EQ(message(OgaGeneratorParamsSetSearchNumber(p, "max_length", kMaxLength)), "");
    EXPECT_EQ(message(OgaGeneratorParamsSetSearchBool(p, "do_sample", do_sample)), "");
    for (const auto& [name, value] : numbers) EXPECT_EQ(message(OgaGeneratorParamsSetSearchNumber(p, name, value)), "");
    return ParamsPtr(p);
  }

  static std::vector<int32_t> encode(const char* text) {
    SequencesPtr sequences;
    OgaSequences* s = nullptr;
    EXPECT_EQ(message(OgaCreateSequences(&s)), "");
    sequences.reset(s);
    EXPECT_EQ(message(OgaTokenizerEncode(tokenizer_, text, s)), "");
    const int32_t* data = OgaSequencesGetSequenceData(s, 0);
    return {data, data + OgaSequencesGetSequenceCount(s, 0)};
  }

  static GeneratorPtr start(const OgaGeneratorParams* p, std::span<const int32_t> ids) {
    OgaGenerator* g = nullptr;
    EXPECT_EQ(message(OgaCreateGenerator(model_, p, &g)), "");
    GeneratorPtr generator(g);
    EXPECT_EQ(message(OgaGenerator_AppendTokens(g, ids.data(), ids.size())), "");
    return generator;
  }

  // Generates until done; with `read_logits`, reads the logits before every step.
  static std::vector<std::vector<int32_t>> finish(OgaGenerator* g, size_t batch, bool read_logits = false) {
    while (!OgaGenerator_IsDone(g)) {
      if (read_logits) {
        OgaTensor* logits = nullptr;
        EXPECT_EQ(message(OgaGenerator_GetLogits(g, &logits)), "");
        OgaDestroyTensor(logits);
      }
      const std::string error = message(OgaGenerator_GenerateNextToken(g));
      EXPECT_EQ(error, "");
      if (!error.empty()) break;
    }
    std::vector<std::vector<int32_t>> sequences;
    for (size_t b = 0; b < batch; ++b) sequences.push_back(sequence(g, b));
    return sequences;
  }

  // The C++ API's sequences for `prompts` with the package defaults, max_length, `sampling` and
  // `constraint`.
  static std::vector<std::vector<int32_t>> reference(std::vector<std::vector<int32_t>> prompts,
                                                     void (*adjust)(SamplingParams&),
                                                     std::optional<ConstraintSpec> constraint = {},
                                                     double max_length = kMaxLength) {
    genai::GeneratorParams p = cpp_->default_params();
    p.max_new_tokens = 0;
    p.max_length = static_cast<int64_t>(max_length);
    p.prompts = std::move(prompts);
    p.sampling.greedy = true;
    p.constraint = std::move(constraint);
    if (adjust != nullptr) adjust(p.sampling);
    auto g = genai::Generator::create(*cpp_, p);
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    if (!g.is_ok()) return {};
    const Status status = (*g)->generate(nullptr);
    EXPECT_TRUE(status.is_ok()) << status.message();
    std::vector<std::vector<int32_t>> sequences;
    for (size_t b = 0; b < (*g)->batch_size(); ++b) {
      const auto tokens = (*g)->tokens(b);
      sequences.emplace_back(tokens.begin(), tokens.end());
    }
    return sequences;
  }

  static void seeded(SamplingParams& s) {
    s.greedy = false;
    s.top_k = 20;
    s.top_p = 0.9f;
    s.temperature = 0.8f;
    s.seed = 7;
  }

  static inline OgaModel* model_ = nullptr;
  static inline OgaTokenizer* tokenizer_ = nullptr;
  static inline genai::Model* cpp_ = nullptr;
};

}  // namespace onnx_genai::testing
