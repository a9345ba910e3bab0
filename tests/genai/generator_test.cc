// Generator behaviour on a small model with a tokenizer (tools/build_model.py, vocabulary 300,
// and the byte-level BPE of genai_test_util.h): streamed text, stop strings split across tokens,
// eos lists and min_new_tokens, length limits, the context, logprobs against ONNX Runtime's
// logits, and parameter errors.
#include <gtest/gtest.h>

#include <cmath>

#include "genai/text_stream.h"
#include "genai_test_util.h"

namespace onnx_genai {
namespace {

using testing::ParityFixture;

constexpr int kVocab = 300;
const std::vector<int32_t> kPrompt = {40, 75, 108, 111, 3, 260, 270};

class GeneratorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new testing::ScopedTempDir();
    fixture_ = ParityFixture{"llama300", {"--preset", "llama", "--style", "genai", "--set", "vocab_size=300"}, {}, 0, ""};
    dir_ = testing::build_model_with_test_tokenizer(fixture_, scratch_->path(), kVocab);
  }
  static void TearDownTestSuite() { delete scratch_; }

  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    model_ = load();
    ASSERT_TRUE(model_);
  }

  static std::unique_ptr<genai::Model> load() {
    auto model = genai::Model::load(dir_.string());
    EXPECT_TRUE(model.is_ok()) << model.status().message();
    return model.is_ok() ? std::move(*model) : nullptr;
  }

  static genai::GeneratorParams greedy(int max_new_tokens) {
    genai::GeneratorParams params;
    params.sampling.greedy = true;
    params.max_new_tokens = max_new_tokens;
    params.prompts = {kPrompt};
    return params;
  }

  struct Run {
    std::vector<int32_t> generated;
    std::vector<std::string> pieces;  // new_text after each step
    std::string text;
    genai::FinishReason reason = genai::FinishReason::kNone;
    std::vector<SampledToken> logprobs;
  };

  Run run(const genai::GeneratorParams& params) {
    Run r;
    auto g = genai::Generator::create(*model_, params);
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    if (!g.is_ok()) return r;
    while (!(*g)->is_done()) {
      const Status status = (*g)->generate_next();
      EXPECT_TRUE(status.is_ok()) << status.message();
      if (!status.is_ok()) break;
      r.pieces.push_back((*g)->new_text(0));
      r.text += r.pieces.back();
    }
    const auto tokens = (*g)->tokens(0);
    r.generated.assign(tokens.begin() + static_cast<std::ptrdiff_t>((*g)->prompt_length(0)), tokens.end());
    r.reason = (*g)->finish_reason(0);
    const auto logprobs = (*g)->logprobs(0);
    r.logprobs.assign(logprobs.begin(), logprobs.end());
    return r;
  }

  Status create_error(const genai::GeneratorParams& params) {
    auto g = genai::Generator::create(*model_, params);
    return g.is_ok() ? Status::ok() : g.status();
  }

  static testing::ScopedTempDir* scratch_;
  static ParityFixture fixture_;
  static std::filesystem::path dir_;
  std::unique_ptr<genai::Model> model_;
};

testing::ScopedTempDir* GeneratorTest::scratch_ = nullptr;
ParityFixture GeneratorTest::fixture_;
std::filesystem::path GeneratorTest::dir_;

std::string decode(const genai::Model& model, const std::vector<int32_t>& ids) {
  DecodeOptions options;
  options.skip_special_tokens = true;
  auto text = model.tokenizer()->decode(ids, options);
  EXPECT_TRUE(text.is_ok()) << text.status().message();
  return text.is_ok() ? *text : "";
}

TEST_F(GeneratorTest, StreamedTextIsTheDecodedTokens) {
  genai::GeneratorParams params = greedy(40);
  params.ignore_eos = true;
  const Run r = run(params);
  ASSERT_EQ(r.generated.size(), 40u);
  EXPECT_EQ(r.reason, genai::FinishReason::kLength);
  EXPECT_EQ(r.text, decode(*model_, r.generated));
  EXPECT_FALSE(r.text.empty());
}

// A stop string made of the last released byte of one step and the first byte of the next, so
// no single token holds it: generation stops at the second of those steps, and the text ends
// just before the stop string.
TEST_F(GeneratorTest, StopStringSplitAcrossTokens) {
  genai::GeneratorParams params = greedy(40);
  params.ignore_eos = true;
  const Run free = run(params);
  ASSERT_EQ(free.pieces.size(), 40u);
  const auto printable = [](char c) { return c >= 0x20 && c < 0x7F; };
  std::string released;
  for (size_t k = 0; k + 1 < free.pieces.size(); ++k) {
    released += free.pieces[k];
    const size_t at = released.size() - 1;
    if (free.pieces[k].empty() || free.pieces[k + 1].empty() || !printable(free.text[at]) || !printable(free.text[at + 1])) {
      continue;
    }
    const std::string stop = free.text.substr(at, 2);
    if (free.text.find(stop) != at) continue;
    params.stop_strings = {"never appears \x01", stop};
    const Run stopped = run(params);
    EXPECT_EQ(stopped.reason, genai::FinishReason::kStopString);
    EXPECT_EQ(stopped.text, free.text.substr(0, at)) << "stop string '" << stop << "'";
    EXPECT_EQ(stopped.generated, std::vector<int32_t>(free.generated.begin(), free.generated.begin() + k + 2));
    // After step k the stop string's first byte was released in the free run, held back here.
    std::string through_k;
    for (size_t i = 0; i <= k && i < stopped.pieces.size(); ++i) through_k += stopped.pieces[i];
    EXPECT_LE(through_k.size(), at);
    EXPECT_EQ(through_k, free.text.substr(0, through_k.size()));
    return;
  }
  FAIL() << "no two printable bytes at a step boundary in: " << free.text;
}

TEST_F(GeneratorTest, TextStreamHoldsBackPossibleStopStrings) {
  const Tokenizer& tokenizer = *model_->tokenizer();
  auto ids = tokenizer.encode("the old lion said hello there, then left");
  ASSERT_TRUE(ids.is_ok());
  const std::vector<std::string> stops = {"hello thx", "lo the"};
  genai::TextStream stream(tokenizer, stops, true);
  std::string out;
  bool stopped = false;
  for (const int32_t id : *ids) {
    auto done = stream.put(id, /*check_stops=*/true, out);
    ASSERT_TRUE(done.is_ok());
    // Never released: anything a stop string could still start.
    EXPECT_EQ(out.find("lo"), std::string::npos) << out;
    if ((stopped = *done)) break;
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "the old lion said hel");
  // Without checks (before min_new_tokens) everything is released at once.
  genai::TextStream unchecked(tokenizer, stops, true);
  std::string all;
  for (const int32_t id : *ids) ASSERT_TRUE(unchecked.put(id, false, all).is_ok());
  ASSERT_TRUE(unchecked.finish(false, all).is_ok());
  EXPECT_EQ(all, "the old lion said hello there, then left");
}

// A token the free run generates (not among the tokens before it) is declared an eos id in
// generation_config.json: generation stops there. With min_new_tokens past that point, eos ids
// are banned until then, so at that step the free run's best token that is not an eos id wins.
TEST_F(GeneratorTest, EosListAndMinNewTokens) {
  genai::GeneratorParams params = greedy(16);
  params.ignore_eos = true;
  params.sampling.logprobs = true;
  params.sampling.top_logprobs = 3;
  const Run free = run(params);
  ASSERT_EQ(free.generated.size(), 16u);
  const auto earlier = [&](size_t end, int32_t id) {
    return std::find(free.generated.begin(), free.generated.begin() + static_cast<std::ptrdiff_t>(end), id) !=
           free.generated.begin() + static_cast<std::ptrdiff_t>(end);
  };
  size_t at = 3;
  while (at < 12 && (earlier(at, free.generated[at]) || earlier(at + 1, 2))) ++at;
  ASSERT_LT(at, 12u) << "no usable eos position in the free run";
  const int32_t eos = free.generated[at];
  {
    std::ofstream(dir_ / "generation_config.json") << "{\"eos_token_id\": [2, " << eos << "]}";
  }
  model_ = load();
  ASSERT_TRUE(model_);
  std::filesystem::remove(dir_ / "generation_config.json");
  const std::vector<int32_t>& eos_ids = model_->info().eos_token_ids;
  ASSERT_NE(std::find(eos_ids.begin(), eos_ids.end(), eos), eos_ids.end());

  params.ignore_eos = false;
  const auto head = [&](size_t n) {
    return std::vector<int32_t>(free.generated.begin(), free.generated.begin() + static_cast<std::ptrdiff_t>(n));
  };
  const Run stopped = run(params);
  EXPECT_EQ(stopped.reason, genai::FinishReason::kEos);
  EXPECT_EQ(stopped.generated, head(at + 1));
  EXPECT_EQ(stopped.text, decode(*model_, head(at)));  // eos itself is not text

  params.min_new_tokens = static_cast<int64_t>(at) + 3;
  const Run held = run(params);
  ASSERT_GE(held.generated.size(), at + 3);
  EXPECT_EQ(std::vector<int32_t>(held.generated.begin(), held.generated.begin() + static_cast<std::ptrdiff_t>(at)),
            head(at));
  const std::vector<TokenLogprob>& ranked = free.logprobs[at].top_logprobs;
  ASSERT_EQ(ranked.size(), 3u);
  const int32_t runner_up = ranked[1].token != 2 ? ranked[1].token : ranked[2].token;
  EXPECT_EQ(held.generated[at], runner_up);
  for (size_t i = 0; i + 1 < at + 3; ++i) {
    EXPECT_NE(held.generated[i], eos) << "token " << i;
    EXPECT_NE(held.generated[i], 2) << "token " << i;
  }
}

// Raw logprobs are log-softmax of the model's logits: checked against ONNX Runtime's logits
// (tests/oracle/ort_decode.mjs) in double precision.
TEST_F(GeneratorTest, LogprobsMatchOnnxRuntimeLogits) {
  ParityFixture fixture = fixture_;
  fixture.prompts = {std::vector<int64_t>(kPrompt.begin(), kPrompt.end())};
  fixture.steps = 5;
  auto trace = testing::run_ort_decode(dir_, fixture, scratch_->path());
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  genai::GeneratorParams params = greedy(6);
  params.ignore_eos = true;
  params.sampling.logprobs = true;
  const Run r = run(params);
  ASSERT_EQ(r.logprobs.size(), 6u);
  double worst = 0;
  for (size_t step = 0; step < 6; ++step) {
    const Tensor& logits = trace->steps[step].logits;
    const int64_t positions = logits.shape()[1];
    const float* row = logits.data<float>() + (positions - 1) * kVocab;
    double max = row[0], sum = 0;
    for (int v = 0; v < kVocab; ++v) max = std::max(max, static_cast<double>(row[v]));
    for (int v = 0; v < kVocab; ++v) sum += std::exp(row[v] - max);
    const int32_t token = r.generated[step];
    EXPECT_EQ(token, trace->steps[step].next_tokens.data<int64_t>()[0]);
    const double want = row[token] - max - std::log(sum);
    ASSERT_TRUE(r.logprobs[step].logprob.has_value());
    worst = std::max(worst, std::fabs(*r.logprobs[step].logprob - want));
  }
  std::printf("[ logprobs ] worst |ours - log_softmax(ORT logits)| = %.3g\n", worst);
  EXPECT_LT(worst, 1e-4);
}

TEST_F(GeneratorTest, PromptLongerThanTheContext) {
  const int64_t context = model_->info().context_length;
  ASSERT_EQ(context, 256);
  genai::GeneratorParams params = greedy(10);
  params.prompts = {std::vector<int32_t>(static_cast<size_t>(context), 100)};
  const Status status = create_error(params);
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("prompt 0 has 256 tokens; the model's context holds 256"), std::string::npos)
      << status.message();

  params.truncate_prompt_left = true;
  params.prompts[0][0] = 7;  // the dropped end
  auto g = genai::Generator::create(*model_, params);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ((*g)->prompt_length(0), static_cast<size_t>(context - 10));
  EXPECT_EQ((*g)->tokens(0)[0], 100);
  ASSERT_TRUE((*g)->generate(nullptr).is_ok());
  EXPECT_EQ((*g)->tokens(0).size(), static_cast<size_t>(context));

  params.max_new_tokens = context;  // no prompt token would fit: refused, not cut to one token
  const Status none_kept = create_error(params);
  EXPECT_NE(none_kept.message().find("max_new_tokens 256 leaves none of the model's context of 256"), std::string::npos)
      << none_kept.message();
}

TEST_F(GeneratorTest, StopsAtTheContext) {
  genai::GeneratorParams params = greedy(0);
  params.ignore_eos = true;
  params.prompts = {std::vector<int32_t>(250, 100)};
  const Run r = run(params);
  EXPECT_EQ(r.generated.size(), 6u);
  EXPECT_EQ(r.reason, genai::FinishReason::kLength);
}

TEST_F(GeneratorTest, RejectsBadParams) {
  const auto expect_error = [&](const genai::GeneratorParams& params, const std::string& needle) {
    const Status status = create_error(params);
    ASSERT_FALSE(status.is_ok()) << needle;
    EXPECT_NE(status.message().find(needle), std::string::npos) << status.message();
  };
  genai::GeneratorParams params = greedy(4);
  params.prompts = {};
  expect_error(params, "no prompts");
  params.prompts = {kPrompt, {}};
  expect_error(params, "prompt 1 is empty");
  params.prompts = {{1, 2, 300}};
  expect_error(params, "prompt 0 token 2 is 300, outside the vocabulary [0, 300)");
  params = greedy(4);
  params.min_new_tokens = 5;
  expect_error(params, "min_new_tokens 5 exceeds max_new_tokens 4");
  params = greedy(4);
  params.stop_strings = {""};
  expect_error(params, "stop strings must not be empty");
  params = greedy(4);
  params.sampling.greedy = false;
  params.sampling.top_p = 0;
  expect_error(params, "top_p");
}

TEST_F(GeneratorTest, BatchRowsStreamTheirOwnText) {
  genai::GeneratorParams params = greedy(6);
  params.prompts = {kPrompt, {11, 12}};
  params.ignore_eos = true;
  auto g = genai::Generator::create(*model_, params);
  ASSERT_TRUE(g.is_ok());
  std::vector<std::string> texts(2);
  ASSERT_TRUE((*g)->generate([&](size_t b, std::string_view text) { texts.at(b) += text; }).is_ok());
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_EQ((*g)->tokens(b).size(), params.prompts[b].size() + 6);
    EXPECT_EQ((*g)->finish_reason(b), genai::FinishReason::kLength);
    const auto tokens = (*g)->tokens(b);
    const auto prompt_end = tokens.begin() + static_cast<std::ptrdiff_t>(params.prompts[b].size());
    EXPECT_EQ(texts[b], decode(*model_, std::vector<int32_t>(prompt_end, tokens.end())));
  }
  EXPECT_FALSE((*g)->generate_next().is_ok());
}

}  // namespace
}  // namespace onnx_genai
