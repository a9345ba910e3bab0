// The C API generating with the default model, held to the C++ API's tokens on the same
// parameters and seed: greedy, seeded sampling, batches, logits read and replaced, rewind, chat
// turns and token streams.
#include <algorithm>
#include <span>

#include "capi_model_test.h"

namespace onnx_genai {
namespace {

using namespace testing;

using CApiGenerationTest = CApiModelTest;

TEST_F(CApiGenerationTest, GreedyMatchesTheCppApi) {
  const std::vector<int32_t> prompt = encode("The Lord is my shepherd");
  auto generator = start(params({}).get(), prompt);
  const auto got = finish(generator.get(), 1);
  EXPECT_EQ(got, reference({prompt}, nullptr));
  EXPECT_EQ(got[0].size(), static_cast<size_t>(kMaxLength));
  EXPECT_EQ(OgaGenerator_TokenCount(generator.get()), got[0].size());
}

TEST_F(CApiGenerationTest, SeededSamplingMatchesTheCppApiAndRepeats) {
  const std::vector<int32_t> prompt = encode("In the beginning");
  const auto p = params({{"top_k", 20}, {"top_p", 0.9}, {"temperature", 0.8}, {"random_seed", 7}}, true);
  const auto first = finish(start(p.get(), prompt).get(), 1);
  EXPECT_EQ(first, reference({prompt}, seeded));
  EXPECT_EQ(finish(start(p.get(), prompt).get(), 1), first);
  const auto other = params({{"top_k", 20}, {"top_p", 0.9}, {"temperature", 0.8}, {"random_seed", 8}}, true);
  EXPECT_NE(finish(start(other.get(), prompt).get(), 1), first);
}

// min_length counts the prompt; the C++ API's min_new_tokens counts generated tokens only.
TEST_F(CApiGenerationTest, MinLengthHoldsEosBackAsMinNewTokensDoes) {
  const std::vector<int32_t> prompt = encode("The Lord is");
  const auto unbounded = finish(start(params({{"max_length", 64}}).get(), prompt).get(), 1)[0];
  ASSERT_LT(unbounded.size(), 40u) << "the prompt should reach eos early for this test to mean something";
  const auto p = params({{"max_length", 64}, {"min_length", 40}});
  const auto held = finish(start(p.get(), prompt).get(), 1)[0];
  EXPECT_GE(held.size(), 40u);
  genai::GeneratorParams reference_params = cpp_->default_params();
  reference_params.sampling.greedy = true;
  reference_params.max_new_tokens = 0;
  reference_params.max_length = 64;
  reference_params.min_new_tokens = 40 - static_cast<int64_t>(prompt.size());
  reference_params.prompts = {prompt};
  auto g = genai::Generator::create(*cpp_, reference_params);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_TRUE((*g)->generate(nullptr).is_ok());
  const auto tokens = (*g)->tokens(0);
  EXPECT_EQ(held, std::vector<int32_t>(tokens.begin(), tokens.end()));
}

TEST_F(CApiGenerationTest, PaddedBatchMatchesTheCppApi) {
  const char* prompts[] = {"The Lord is my shepherd", "A fortune:"};
  OgaTensor* tensor = nullptr;
  ASSERT_EQ(message(OgaTokenizerEncodeBatch(tokenizer_, prompts, 2, &tensor)), "");
  TensorPtr padded(tensor);
  int64_t shape[2] = {};
  ASSERT_EQ(message(OgaTensorGetShape(tensor, shape, 2)), "");
  const std::vector<int32_t> a = encode(prompts[0]), b = encode(prompts[1]);
  ASSERT_EQ(shape[0], 2);
  ASSERT_EQ(shape[1], static_cast<int64_t>(std::max(a.size(), b.size())));
  void* data = nullptr;
  ASSERT_EQ(message(OgaTensorGetData(tensor, &data)), "");
  const auto p = params({{"batch_size", 2}});
  auto generator = start(p.get(), std::span<const int32_t>(static_cast<const int32_t*>(data), 2 * shape[1]));
  EXPECT_EQ(finish(generator.get(), 2), reference({a, b}, nullptr));
}

// onnxruntime-genai's beam search layout: batch_size * num_return_sequences sequences, prompt p's
// k-th best at p * num_return_sequences + k, the same as the C++ API's.
TEST_F(CApiGenerationTest, BeamSearchMatchesTheCppApi) {
  const std::vector<int32_t> a = encode("The Lord is my shepherd"), b = encode("In the beginning");
  SequencesPtr prompts;
  OgaSequences* s = nullptr;
  ASSERT_EQ(message(OgaCreateSequences(&s)), "");
  prompts.reset(s);
  ASSERT_EQ(message(OgaAppendTokenSequence(a.data(), a.size(), s)), "");
  ASSERT_EQ(message(OgaAppendTokenSequence(b.data(), b.size(), s)), "");
  const auto p = params({{"batch_size", 2}, {"max_length", 20}, {"num_beams", 3}, {"num_return_sequences", 2},
                         {"length_penalty", 0.8}});
  ASSERT_EQ(message(OgaGeneratorParamsSetSearchBool(p.get(), "early_stopping", false)), "");
  OgaGenerator* raw = nullptr;
  ASSERT_EQ(message(OgaCreateGenerator(model_, p.get(), &raw)), "");
  GeneratorPtr g(raw);
  ASSERT_EQ(message(OgaGenerator_AppendTokenSequences(g.get(), s)), "");
  OgaTensor* logits = nullptr;
  EXPECT_NE(message(OgaGenerator_GetLogits(g.get(), &logits)).find("not available with beam search"), std::string::npos);
  ASSERT_EQ(message(OgaGenerator_GenerateNextToken(g.get())), "");
  const int32_t* next = nullptr;
  size_t count = 0;
  ASSERT_EQ(message(OgaGenerator_GetNextTokens(g.get(), &next, &count)), "");
  EXPECT_EQ(count, 4u);
  EXPECT_NE(message(OgaGenerator_RewindTo(g.get(), 3)).find("not available with beam search"), std::string::npos);
  const auto got = finish(g.get(), 4);

  genai::GeneratorParams want = cpp_->default_params();
  want.sampling.greedy = true;
  want.max_new_tokens = 0;
  want.max_length = 20;
  want.beam = {3, 0.8f, genai::EarlyStopping::kHeuristic, 2};
  want.prompts = {a, b};
  auto cpp = genai::Generator::create(*cpp_, want);
  ASSERT_TRUE(cpp.is_ok()) << cpp.status().message();
  ASSERT_TRUE((*cpp)->generate(nullptr).is_ok());
  ASSERT_EQ((*cpp)->batch_size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const auto tokens = (*cpp)->tokens(i);
    EXPECT_EQ(got[i], std::vector<int32_t>(tokens.begin(), tokens.end())) << "sequence " << i;
  }
  EXPECT_EQ(sequence(g.get(), 4), std::vector<int32_t>{});
}

TEST_F(CApiGenerationTest, LogitsAreTheRowTheNextTokenIsPickedFrom) {
  const std::vector<int32_t> prompt = encode("Blessed are the meek");
  // Without penalties the greedy token is the raw row's argmax (lowest id on ties).
  const auto p = params({{"repetition_penalty", 1}, {"no_repeat_ngram_size", 0}});
  auto generator = start(p.get(), prompt);
  OgaGenerator* g = generator.get();
  for (int step = 0; step < 8; ++step) {
    const size_t length = OgaGenerator_GetSequenceCount(g, 0);
    OgaTensor* tensor = nullptr;
    ASSERT_EQ(message(OgaGenerator_GetLogits(g, &tensor)), "");
    TensorPtr logits(tensor);
    int64_t shape[3] = {};
    ASSERT_EQ(message(OgaTensorGetShape(tensor, shape, 3)), "");
    EXPECT_EQ(shape[0], 1);
    EXPECT_EQ(shape[1], 1);
    EXPECT_EQ(shape[2], 8192);
    void* data = nullptr;
    ASSERT_EQ(message(OgaTensorGetData(tensor, &data)), "");
    const auto* row = static_cast<const float*>(data);
    const int32_t argmax = static_cast<int32_t>(std::max_element(row, row + shape[2]) - row);
    // Reading the logits runs the step ahead but shows nothing of it.
    EXPECT_EQ(OgaGenerator_GetSequenceCount(g, 0), length);
    EXPECT_EQ(OgaGenerator_TokenCount(g), length);
    EXPECT_FALSE(OgaGenerator_IsDone(g));
    ASSERT_EQ(message(OgaGenerator_GenerateNextToken(g)), "");
    const int32_t* next = nullptr;
    size_t count = 0;
    ASSERT_EQ(message(OgaGenerator_GetNextTokens(g, &next, &count)), "");
    ASSERT_EQ(count, 1u);
    EXPECT_EQ(next[0], argmax) << "step " << step;
    EXPECT_EQ(OgaGenerator_GetSequenceCount(g, 0), length + 1);
  }
}

TEST_F(CApiGenerationTest, ReadingLogitsLeavesSeededTokensAlone) {
  const std::vector<int32_t> prompt = encode("In the beginning");
  const auto p = params({{"top_k", 20}, {"temperature", 0.8}, {"random_seed", 3}}, true);
  EXPECT_EQ(finish(start(p.get(), prompt).get(), 1, /*read_logits=*/true), finish(start(p.get(), prompt).get(), 1));
}

TEST_F(CApiGenerationTest, SetLogitsDecidesTheNextToken) {
  const std::vector<int32_t> prompt = encode("The Lord is my shepherd");
  for (const bool read_first : {true, false}) {
    auto generator = start(params({}).get(), prompt);
    OgaGenerator* g = generator.get();
    if (read_first) {
      OgaTensor* read = nullptr;
      ASSERT_EQ(message(OgaGenerator_GetLogits(g, &read)), "");
      OgaDestroyTensor(read);
    }
    constexpr int32_t kForced = 4321;
    std::vector<float> rows(8192, -1e9f);
    rows[kForced] = 0.0f;
    const int64_t shape[3] = {1, 1, 8192};
    OgaTensor* tensor = nullptr;
    ASSERT_EQ(message(OgaCreateTensorFromBuffer(rows.data(), shape, 3, OgaElementType_float32, &tensor)), "");
    TensorPtr replacement(tensor);
    ASSERT_EQ(message(OgaGenerator_SetLogits(g, tensor)), "");
    ASSERT_EQ(message(OgaGenerator_GenerateNextToken(g)), "");
    std::vector<int32_t> expected = prompt;
    expected.push_back(kForced);
    EXPECT_EQ(sequence(g, 0), expected) << "read first: " << read_first;
    // Generation goes on from the forced token as the C++ API continues that sequence.
    const auto rest = finish(g, 1);
    EXPECT_EQ(rest, reference({expected}, nullptr));
  }
}

TEST_F(CApiGenerationTest, RewindThenRegenerateGivesTheSameTokens) {
  const std::vector<int32_t> prompt = encode("Blessed are the meek");
  auto generator = start(params({}).get(), prompt);
  const auto full = finish(generator.get(), 1)[0];
  const size_t keep = prompt.size() + 5;
  ASSERT_EQ(message(OgaGenerator_RewindTo(generator.get(), keep)), "");
  EXPECT_EQ(sequence(generator.get(), 0), std::vector<int32_t>(full.begin(), full.begin() + keep));
  EXPECT_FALSE(OgaGenerator_IsDone(generator.get()));
  EXPECT_EQ(finish(generator.get(), 1)[0], full);
}

TEST_F(CApiGenerationTest, ChatTurnsStreamTheDecodedText) {
  const char* messages = R"([{"role": "user", "content": "Who is my shepherd?"}])";
  const char* rendered = nullptr;
  ASSERT_EQ(message(OgaTokenizerApplyChatTemplate(tokenizer_, nullptr, messages, nullptr, true, &rendered)), "");
  EXPECT_EQ(take_string(rendered), "user: Who is my shepherd?\nassistant:");
  ASSERT_EQ(message(OgaTokenizerApplyChatTemplate(tokenizer_, "{{ messages[0]['content'] }}!", messages, nullptr,
                                                  false, &rendered)),
            "");
  EXPECT_EQ(take_string(rendered), "Who is my shepherd?!");

  const auto p = params({{"max_length", 80}});
  const std::vector<int32_t> first = encode("user: Who is my shepherd?\nassistant:");
  auto generator = start(p.get(), first);
  OgaGenerator* g = generator.get();
  for (const char* turn : {"", "\nuser: And then?\nassistant:"}) {
    if (*turn != '\0') {
      const std::vector<int32_t> more = encode(turn);
      ASSERT_EQ(message(OgaGenerator_AppendTokens(g, more.data(), more.size())), "");
    }
    const size_t start_length = OgaGenerator_GetSequenceCount(g, 0);
    OgaTokenizerStream* s = nullptr;
    ASSERT_EQ(message(OgaCreateTokenizerStream(tokenizer_, &s)), "");
    StreamPtr stream(s);
    std::string streamed;
    for (int step = 0; step < 12 && !OgaGenerator_IsDone(g); ++step) {
      ASSERT_EQ(message(OgaGenerator_GenerateNextToken(g)), "");
      const int32_t* next = nullptr;
      size_t count = 0;
      ASSERT_EQ(message(OgaGenerator_GetNextTokens(g, &next, &count)), "");
      const char* piece = nullptr;
      ASSERT_EQ(message(OgaTokenizerStreamDecode(s, next[0], &piece)), "");
      streamed += piece;
    }
    const std::vector<int32_t> all = sequence(g, 0);
    ASSERT_GT(all.size(), start_length);
    EXPECT_EQ(std::vector<int32_t>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(first.size())), first);
    const char* decoded = nullptr;
    ASSERT_EQ(message(OgaTokenizerDecode(tokenizer_, all.data() + start_length, all.size() - start_length, &decoded)), "");
    const std::string whole = take_string(decoded);
    // The stream holds back only an incomplete character at the very end.
    EXPECT_EQ(whole.rfind(streamed, 0), 0u) << "streamed '" << streamed << "', decoded '" << whole << "'";
    EXPECT_FALSE(streamed.empty());
  }
}

}  // namespace
}  // namespace onnx_genai
