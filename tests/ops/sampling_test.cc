// onnx_genai SampleTokens on the CPU against the host Sampler (include/onnx_genai/sampling.h): for
// every row of many random batches (sampling_cases.h), the op's token given the uniform a seeded
// Sampler would draw next (Sampler::next_uniform of its twin) must be the token that Sampler
// samples from the same row, and a row the Sampler fails must get the matching code. Then the
// op's contract on shapes and dtypes.
//
// Recipe for the op (ops/schema/sampling.h): the schema in ops/schema/sampling.cc, the CPU kernel
// in ops/cpu/sampling.cc (the Sampler's own code, sampling/), the CUDA kernel in
// ops/cuda/sampling*.{cc,cu}, held to the CPU kernel by tests/cuda/sampling_test.cc over the same
// cases (sampling_cases.h).
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>

#include "sampling/pick.h"
#include "ops/op_test_util.h"
#include "ops/sampling_cases.h"

namespace onnx_genai::testing {
namespace {

Result<std::vector<Tensor>> sample_tokens(const std::vector<Tensor>& inputs) {
  return OpCall("SampleTokens", 1, "onnx_genai").run(inputs);
}

// The contract's model of a mask: what genai's constraint processor does with its matcher's mask,
// first in the chain (genai/constraint_processor.cc), with the Sampler's own nothing-left error.
class MaskProcessor final : public LogitProcessor {
 public:
  MaskProcessor(const uint64_t* words, int64_t count) : words_(words), count_(count) {}
  std::string_view name() const override { return "mask"; }
  Status apply(const TokenHistory&, Candidates& candidates) override {
    candidates.keep_if([&](int32_t id, float) {
      return id < count_ * 64 && ((words_[id >> 6] >> (id & 63)) & 1);
    });
    return candidates.ids().empty() ? sampling::nothing_left() : Status::ok();
  }

 private:
  const uint64_t* words_;
  int64_t count_;
};

// What row b must give: the seeded Sampler's token, or the code for why there is none. Sets the
// row's uniform to the one that Sampler draws (unless the row asks for no token or is invalid).
int64_t expected_token(SampleTokensCase& c, int64_t b, uint64_t seed) {
  const float* p = c.params.data<float>() + b * kSampleParamCount;
  double& uniform = c.uniforms.data<double>()[b];
  if (uniform < 0.0) return kSampleNoToken;
  const float top_k = p[kSampleTopK];
  const float slot = p[kSampleMaskSlot];
  const int64_t masks = c.allowed.shape().rank() == 2 ? c.allowed.shape()[0] : 0;
  if (!(std::isfinite(top_k) && top_k >= 0.0f && top_k == std::floor(top_k)) || !(uniform < 1.0) ||
      !(slot >= 0.0f && slot == std::floor(slot) && slot <= static_cast<float>(masks))) {
    return kSampleInvalidParams;
  }
  SamplingParams params;
  params.temperature = p[kSampleTemperature];
  params.top_k = static_cast<int32_t>(top_k);  // the cases' top_k fit
  params.top_p = p[kSampleTopP];
  params.min_p = p[kSampleMinP];
  params.seed = seed;
  const auto vocab = static_cast<int32_t>(c.logits.shape()[2]);
  auto chain = make_logit_processors(params);
  if (!chain.is_ok()) return kSampleInvalidParams;
  if (slot > 0.0f) {
    const int64_t words = c.allowed.shape()[1];
    const auto* mask = reinterpret_cast<const uint64_t*>(c.allowed.data<int64_t>()) + (static_cast<int64_t>(slot) - 1) * words;
    chain->insert(chain->begin(), std::make_unique<MaskProcessor>(mask, words));
  }
  auto sampler = Sampler::create(params, vocab, std::move(*chain));
  auto twin = Sampler::create(params, vocab);
  if (!sampler.is_ok() || !twin.is_ok()) return kSampleInvalidParams;
  uniform = twin->next_uniform();
  const std::vector<float> row = sampled_row(c.logits, b);
  const Result<SampledToken> sampled = sampler->sample(row, {});
  if (sampled.is_ok()) return sampled->token;
  if (!sampling::check_logits(row).is_ok()) return kSampleInvalidLogits;
  // (A mask processor's error carries its name before the Sampler's message.)
  EXPECT_TRUE(sampled.status().message().ends_with(sampling::nothing_left().message())) << sampled.status().message();
  return kSampleNothingLeft;
}

void expect_samplers_tokens(SampleTokensCase c, uint64_t seed) {
  std::vector<int64_t> want;
  for (int64_t b = 0; b < c.logits.shape()[0]; ++b) want.push_back(expected_token(c, b, seed + static_cast<uint64_t>(b)));
  auto got = sample_tokens(c.inputs());
  ASSERT_TRUE(got.is_ok()) << c.name << ": " << got.status().message();
  ASSERT_EQ((*got)[0].shape(), Shape{c.logits.shape()[0]}) << c.name;
  const std::vector<int64_t> tokens = values_of<int64_t>((*got)[0]);
  for (size_t b = 0; b < want.size(); ++b) {
    const float* p = c.params.data<float>() + b * kSampleParamCount;
    EXPECT_EQ(tokens[b], want[b]) << c.name << " row " << b << ": temperature " << p[kSampleTemperature] << ", top_k "
                                  << p[kSampleTopK] << ", top_p " << p[kSampleTopP] << ", min_p " << p[kSampleMinP];
  }
}

TEST(SampleTokens, EveryRowIsTheSeededSamplersToken) {
  std::mt19937 rng(20240611);
  uint64_t seed = 1;
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const int64_t vocab : {1, 2, 7, 64, 1000, 5003}) {
      for (int trial = 0; trial < 6; ++trial) {
        const std::string name = std::string(dtype_name(dtype)) + " V=" + std::to_string(vocab) + " #" + std::to_string(trial);
        expect_samplers_tokens(make_case(name, dtype, 24, 1 + trial % 3, vocab, rng), seed);
        seed += 100;
      }
    }
  }
}

// Token masks (structured output on a device): each masked row is the token of a Sampler whose
// chain starts with that mask, as the constraint processor puts it first; greedy rows included.
TEST(SampleTokens, MaskedRowsAreTheTokensOfAMaskedSampler) {
  std::mt19937 rng(20261207);
  uint64_t seed = 7;
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const int64_t vocab : {1, 3, 64, 65, 1000, 5003}) {
      for (int trial = 0; trial < 4; ++trial) {
        SampleTokensCase c = make_case("masked " + std::string(dtype_name(dtype)) + " V=" + std::to_string(vocab) + " #" +
                                           std::to_string(trial),
                                       dtype, 24, 1 + trial % 2, vocab, rng);
        add_masks(c, rng);
        expect_samplers_tokens(std::move(c), seed);
        seed += 100;
      }
    }
  }
  SampleTokensCase qwen = make_case("masked f32 V=151936", DType::kF32, 8, 1, 151936, rng);
  add_masks(qwen, rng);
  expect_samplers_tokens(std::move(qwen), 77);
}

// A mask slot past the masks given (or any slot without them) is invalid, as a bad top_k is.
TEST(SampleTokens, AMaskSlotWithoutItsMaskIsInvalid) {
  const Tensor logits = Tensor::from_vector<float>(Shape{1, 1, 3}, {1.0f, 2.0f, 3.0f});
  const Tensor params = Tensor::from_vector<float>(Shape{1, kSampleParamCount}, {0, 0, 1, 0, 2});
  const Tensor uniforms = Tensor::from_vector<double>(Shape{1}, {0.5});
  const Tensor one_mask = Tensor::from_vector<int64_t>(Shape{1, 1}, {0b011});
  for (const std::vector<Tensor>& inputs : {std::vector<Tensor>{logits, params, uniforms},
                                            std::vector<Tensor>{logits, params, uniforms, one_mask}}) {
    auto got = sample_tokens(inputs);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_EQ((*got)[0].data<int64_t>()[0], kSampleInvalidParams);
  }
  // Slot 1 takes the mask: greedy among tokens 0 and 1 (token 2, the largest, is not allowed).
  auto masked = sample_tokens({logits, Tensor::from_vector<float>(Shape{1, kSampleParamCount}, {0, 0, 1, 0, 1}), uniforms, one_mask});
  ASSERT_TRUE(masked.is_ok()) << masked.status().message();
  EXPECT_EQ((*masked)[0].data<int64_t>()[0], 1);
  auto wrong_dtype = sample_tokens({logits, params, uniforms, Tensor::from_vector<int32_t>(Shape{1, 1}, {3})});
  ASSERT_FALSE(wrong_dtype.is_ok());
  EXPECT_NE(wrong_dtype.status().message().find("allowed must be int64"), std::string::npos) << wrong_dtype.status().message();
}

TEST(SampleTokens, QwenSizedRowsAreTheSeededSamplersTokens) {
  std::mt19937 rng(7);
  expect_samplers_tokens(make_case("f32 V=151936", DType::kF32, 12, 1, 151936, rng), 99);
  expect_samplers_tokens(make_case("bf16 V=151936", DType::kBF16, 6, 1, 151936, rng), 199);
}

// A seeded Sampler drawing step after step, and the op fed that Sampler's next uniforms: one
// sequence, as the generator samples it on a device.
TEST(SampleTokens, AStepByStepDrawFollowsTheSamplersGenerator) {
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 40;
  params.top_p = 0.9f;
  params.min_p = 0.02f;
  params.seed = 42;
  constexpr int32_t kVocab = 3000;
  auto host = Sampler::create(params, kVocab);
  auto device = Sampler::create(params, kVocab);
  ASSERT_TRUE(host.is_ok() && device.is_ok());
  std::mt19937 rng(3);
  for (int step = 0; step < 50; ++step) {
    const std::vector<float> row = make_logits(step % 2 ? RowKind::kNormal : RowKind::kGrid, kVocab, rng);
    const auto want = host->sample(row, {});
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    const Tensor params_row = Tensor::from_vector<float>(Shape{1, kSampleParamCount}, {0.8f, 40.0f, 0.9f, 0.02f, 0.0f});
    auto got = sample_tokens({Tensor::from_vector<float>(Shape{1, 1, kVocab}, row), params_row,
                              Tensor::from_vector<double>(Shape{1}, {device->next_uniform()})});
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_EQ((*got)[0].data<int64_t>()[0], want->token) << "step " << step;
  }
}

// every_position = 1 (the serving engine's packed rows): logits [1, R, V] give R tokens, row r
// drawn from position r with params and uniform r, as the same rows as a batch of R would.
TEST(SampleTokens, EveryPositionSamplesEachPositionAsARow) {
  std::mt19937 rng(11);
  SampleTokensCase c = make_case("f32 every position", DType::kF32, 9, 1, 700, rng);
  for (int64_t b = 0; b < 9; ++b) expected_token(c, b, 500 + static_cast<uint64_t>(b));  // the Samplers' uniforms
  auto as_batch = sample_tokens({c.logits, c.params, c.uniforms});
  ASSERT_TRUE(as_batch.is_ok()) << as_batch.status().message();
  auto reshaped = c.logits.reshaped(Shape{1, 9, 700});
  ASSERT_TRUE(reshaped.is_ok()) << reshaped.status().message();
  const Tensor packed = *reshaped;
  auto as_positions = OpCall("SampleTokens", 1, "onnx_genai").attr_int("every_position", 1).run({packed, c.params, c.uniforms});
  ASSERT_TRUE(as_positions.is_ok()) << as_positions.status().message();
  EXPECT_EQ((*as_positions)[0].shape(), Shape{9});
  EXPECT_EQ(values_of<int64_t>((*as_positions)[0]), values_of<int64_t>((*as_batch)[0]));
  auto short_params = OpCall("SampleTokens", 1, "onnx_genai")
                          .attr_int("every_position", 1)
                          .run({packed, Tensor::allocate(DType::kF32, Shape{1, kSampleParamCount}).value(), c.uniforms});
  ASSERT_FALSE(short_params.is_ok());
  EXPECT_NE(short_params.status().message().find("params must be [batch, 5]"), std::string::npos);
}

TEST(SampleTokens, BadShapesAndDtypesAreErrors) {
  const auto logits = [](DType dtype, Shape shape) { return Tensor::allocate(dtype, std::move(shape)).value(); };
  const Tensor params = logits(DType::kF32, Shape{2, kSampleParamCount});
  const Tensor uniforms = logits(DType::kF64, Shape{2});
  const Tensor good = logits(DType::kF32, Shape{2, 1, 10});
  ASSERT_TRUE(sample_tokens({good, params, uniforms}).is_ok());
  const std::pair<std::vector<Tensor>, const char*> kBad[] = {
      {{good, logits(DType::kF32, Shape{2, 3}), uniforms}, "params must be [batch, 5]"},
      {{good, logits(DType::kF32, Shape{3, kSampleParamCount}), uniforms}, "params must be [batch, 5]"},
      {{good, params, logits(DType::kF64, Shape{2, 1})}, "uniforms must be [batch]"},
      {{logits(DType::kF32, Shape{2, 10}), params, uniforms}, "logits must be [batch, positions >= 1, vocab]"},
      {{logits(DType::kF32, Shape{2, 0, 10}), params, uniforms}, "logits must be [batch, positions >= 1, vocab]"},
      {{logits(DType::kF32, Shape{2, 1, 0}), params, uniforms}, "the vocabulary (logits dim 2) must be in [1, 1048576]"},
      {{logits(DType::kF32, Shape{2, 1, (1 << 20) + 1}), params, uniforms}, "must be in [1, 1048576]"},
      {{logits(DType::kI32, Shape{2, 1, 10}), params, uniforms}, "logits must be float32, float16 or bfloat16"},
      {{good, logits(DType::kF64, Shape{2, kSampleParamCount}), uniforms}, "params must be float32"},
      {{good, params, logits(DType::kF32, Shape{2})}, "uniforms must be float64"},
  };
  for (const auto& [inputs, message] : kBad) {
    auto result = sample_tokens(inputs);
    ASSERT_FALSE(result.is_ok()) << message;
    EXPECT_NE(result.status().message().find(message), std::string::npos) << result.status().message();
  }
}

// Each check of the contract on its own: the same row with one parameter or uniform out of range.
TEST(SampleTokens, InvalidParamsAndUniformsGiveTheirCode) {
  const std::vector<float> row = {1.0f, 2.0f, 3.0f};
  const std::pair<std::array<float, kSampleParamCount>, double> kCases[] = {
      {{1, 0, 1, 0, 1}, 0.5},   {{1, 0, 1, 0, 0.5f}, 0.5}, {{1, 0, 1, 0, -1}, 0.5},
      {{-0.5f, 0, 1, 0}, 0.5},  {{NAN, 0, 1, 0}, 0.5},   {{1, -1, 1, 0}, 0.5},  {{1, 1.5f, 1, 0}, 0.5},
      {{1, INFINITY, 1, 0}, 0.5}, {{1, 0, 0, 0}, 0.5},  {{1, 0, 1.5f, 0}, 0.5}, {{1, 0, 1, -0.1f}, 0.5},
      {{1, 0, 1, 2}, 0.5},      {{1, 0, 1, 0}, 1.0},     {{1, 0, 1, 0}, NAN},    {{0, 0, 1, 0}, 2.0},
  };
  for (const auto& [p, uniform] : kCases) {
    auto got = sample_tokens({Tensor::from_vector<float>(Shape{1, 1, 3}, row),
                              Tensor::from_vector<float>(Shape{1, kSampleParamCount}, std::vector<float>(p.begin(), p.end())),
                              Tensor::from_vector<double>(Shape{1}, {uniform})});
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_EQ((*got)[0].data<int64_t>()[0], kSampleInvalidParams)
        << "temperature " << p[0] << " top_k " << p[1] << " top_p " << p[2] << " min_p " << p[3] << " uniform " << uniform;
  }
  // A negative uniform asks for no token: nothing else is looked at.
  auto skipped = sample_tokens({Tensor::from_vector<float>(Shape{1, 1, 3}, {NAN, NAN, NAN}),
                                Tensor::from_vector<float>(Shape{1, kSampleParamCount}, {-1, -1, -1, -1, -1}),
                                Tensor::from_vector<double>(Shape{1}, {-1.0})});
  ASSERT_TRUE(skipped.is_ok()) << skipped.status().message();
  EXPECT_EQ((*skipped)[0].data<int64_t>()[0], kSampleNoToken);
}

}  // namespace
}  // namespace onnx_genai::testing
