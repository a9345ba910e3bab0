// onnx_genai SampleTokens: the CUDA kernel (ops/cuda/sampling_kernels.cu) against the CPU kernel,
// which runs the host Sampler's own code (tests/ops/sampling_test.cc holds it to the Sampler). A
// draw is exact or wrong: every token and every code must be equal, no tolerance. Cases come from
// tests/ops/sampling_cases.h (ties, -0 next to +0, -inf, NaN / +inf, overflowing temperatures,
// greedy rows, top_k / top_p / min_p across their ranges, uniforms at 0 and just below 1, invalid
// params, positions before the last holding NaN), over vocabularies from 1 to 2^20: Qwen's
// 151936, and past 327680 the kernel's path that re-reads the logits instead of caching them.
// Probes then hold the device's exp to the host's bit for bit, and a perf test times a 152k row.
//
// Recipe for another sampling step: its host processor in sampling/, its device twin in
// sampling_kernels.cu, its parameter in sampling_layout.h, and its ranges in sampling_cases.h.
#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "cuda_test_util.h"
#include "sampling/softmax.h"
#include "ops/sampling_cases.h"

namespace onnx_genai::testing {
namespace {

class SampleTokensCuda : public CudaKernelTest {
 protected:
  // Runs the case on both kernels; every row's token (or code) must be equal.
  void expect_equal_tokens(const SampleTokensCase& c) {
    const std::vector<Tensor> inputs = c.inputs();
    CudaNode node("SampleTokens", "onnx_genai", {true});
    const Node& n = node.with_inputs(inputs);
    auto cpu = run_on_cpu(n, inputs);
    ASSERT_TRUE(cpu.is_ok()) << c.name << ": " << cpu.status().message();
    auto gpu = run_on_cuda(n, inputs, *stream_);
    ASSERT_TRUE(gpu.is_ok()) << c.name << ": " << gpu.status().message();
    const Tensor& want = (*cpu)[0];
    const Tensor& got = (*gpu)[0];
    ASSERT_EQ(got.shape(), want.shape()) << c.name;
    int reported = 0;
    for (int64_t b = 0; b < want.numel(); ++b) {
      const int64_t w = want.data<int64_t>()[b], g = got.data<int64_t>()[b];
      if (w != g && reported++ < 8) {
        const float* p = c.params.data<float>() + b * kSampleParamCount;
        ADD_FAILURE() << c.name << " row " << b << ": cuda " << g << ", cpu " << w << " (temperature "
                      << p[kSampleTemperature] << ", top_k " << p[kSampleTopK] << ", top_p " << p[kSampleTopP]
                      << ", min_p " << p[kSampleMinP] << ", uniform " << c.uniforms.data<double>()[b] << ")";
      }
      rows_ += 1;
      drawn_ += w >= 0 ? 1 : 0;
    }
  }

  void TearDown() override {
    std::printf("  %lld rows compared, %lld of them drew a token\n", static_cast<long long>(rows_),
                static_cast<long long>(drawn_));
  }

  int64_t rows_ = 0, drawn_ = 0;
};

TEST_F(SampleTokensCuda, RandomRowsDrawTheCpuKernelsTokens) {
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const int64_t vocab : {1, 2, 7, 64, 1000, 5003, 40000}) {
      for (int trial = 0; trial < 4; ++trial) {
        const std::string name = std::string(dtype_name(dtype)) + " V=" + std::to_string(vocab) + " #" + std::to_string(trial);
        expect_equal_tokens(make_case(name, dtype, 32, 1 + trial % 3, vocab, rng_));
      }
    }
  }
}

// Structured output's token masks: dense, sparse and half-vocabulary masks, some rows unmasked;
// past 327680 tokens the masked logits are re-read rather than cached.
TEST_F(SampleTokensCuda, MaskedRowsDrawTheCpuKernelsTokens) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const int64_t vocab : {1, 65, 1000, 40000, 151936}) {
      for (int trial = 0; trial < 3; ++trial) {
        SampleTokensCase c = make_case("masked " + std::string(dtype_name(dtype)) + " V=" + std::to_string(vocab) + " #" +
                                           std::to_string(trial),
                                       dtype, 16, 1 + trial % 2, vocab, rng_);
        add_masks(c, rng_);
        expect_equal_tokens(c);
      }
    }
  }
  SampleTokensCase big = make_case("masked f32 V=400000", DType::kF32, 6, 1, 400000, rng_);
  add_masks(big, rng_);
  expect_equal_tokens(big);
}

// Qwen's vocabulary; 262144 (a block's slice of 32768 still cached); past 327680 (slices of more
// than 40960 tokens re-read the logits) up to the Sampler's limit, 2^20.
TEST_F(SampleTokensCuda, LargeVocabulariesDrawTheCpuKernelsTokens) {
  expect_equal_tokens(make_case("f32 V=151936", DType::kF32, 24, 1, 151936, rng_));
  expect_equal_tokens(make_case("bf16 V=151936", DType::kBF16, 16, 1, 151936, rng_));
  expect_equal_tokens(make_case("f16 V=151936", DType::kF16, 16, 2, 151936, rng_));
  expect_equal_tokens(make_case("f32 V=262144", DType::kF32, 8, 1, 262144, rng_));
  expect_equal_tokens(make_case("f32 V=327681", DType::kF32, 8, 1, 327681, rng_));
  expect_equal_tokens(make_case("bf16 V=2^20", DType::kBF16, 6, 1, int64_t{1} << 20, rng_));
}

// Rows [0, g] with min_p at the host's exp(g) itself and one float either side: min_p's exp
// comparison keeps token 1 exactly when the device's exp(g) is the host's to the bit, and the draw
// at the last uniform then picks it (g > -30: its fixed-point weight is not 0).
TEST_F(SampleTokensCuda, TheDevicesExpIsTheHostsToTheBit) {
  constexpr int64_t kRows = 3000;
  SampleTokensCase c;
  c.name = "exp probes";
  c.logits = Tensor::allocate(DType::kF32, Shape{kRows, 1, 2}).value();
  c.params = Tensor::allocate(DType::kF32, Shape{kRows, kSampleParamCount}).value();
  c.uniforms = Tensor::allocate(DType::kF64, Shape{kRows}).value();
  std::uniform_real_distribution<float> gap(-30.0f, 0.0f);
  for (int64_t b = 0; b < kRows; ++b) {
    const float g = b < 60 ? -static_cast<float>(b) * 0.5f : gap(rng_);  // whole and half steps too
    const float e = sampling::exp_nonpositive(g);
    const float min_p = b % 3 == 0 ? e : std::nextafter(e, b % 3 == 1 ? 0.0f : 1.0f);
    c.logits.data<float>()[2 * b] = 0.0f;
    c.logits.data<float>()[2 * b + 1] = g;
    const float params[kSampleParamCount] = {1.0f, 0.0f, 1.0f, min_p};
    std::copy(params, params + kSampleParamCount, c.params.data<float>() + b * kSampleParamCount);
    c.uniforms.data<double>()[b] = kLastUniform;
  }
  expect_equal_tokens(c);
}

// Microseconds per launch for one row and eight of a 152k vocabulary (CUDA graph replays), for
// the report: greedy (the scan alone), a plain draw (scan and draw), a typical chat run (top-k's
// count select first leaves top-p few tokens) and top-p alone (a weighted select over every token).
TEST_F(SampleTokensCuda, PerfQwenRow) {
  constexpr int64_t kVocab = 151936;
  const std::pair<const char*, std::array<float, kSampleParamCount>> kSettings[] = {
      {"greedy", {0.0f, 0.0f, 1.0f, 0.0f}},
      {"temperature 0.7", {0.7f, 0.0f, 1.0f, 0.0f}},
      {"temperature 0.7, top_k 50, top_p 0.9", {0.7f, 50.0f, 0.9f, 0.0f}},
      {"temperature 0.7, top_p 0.9, min_p 0.05", {0.7f, 0.0f, 0.9f, 0.05f}},
  };
  for (const int64_t batch : {1, 8}) {
    for (const auto& [what, params] : kSettings) {
      SampleTokensCase c = make_case("perf", DType::kF32, batch, 1, kVocab, rng_);
      for (int64_t b = 0; b < batch; ++b) {
        std::copy(params.begin(), params.end(), c.params.data<float>() + b * kSampleParamCount);
        const std::vector<float> row = make_logits(RowKind::kNormal, kVocab, rng_);
        for (int64_t v = 0; v < kVocab; ++v) c.logits.data<float>()[b * kVocab + v] = row[static_cast<size_t>(v)];
        c.uniforms.data<double>()[b] = 0.5;
      }
      const std::vector<Tensor> inputs = {c.logits, c.params, c.uniforms};
      CudaNode node("SampleTokens", "onnx_genai", {true});
      auto us = time_node(node.with_inputs(inputs), inputs, *stream_);
      ASSERT_TRUE(us.is_ok()) << us.status().message();
      std::printf("[ perf     ] SampleTokens B=%lld V=%lld f32, %s: %.1f us\n", static_cast<long long>(batch),
                  static_cast<long long>(kVocab), what, *us);
      expect_equal_tokens(c);
    }
  }
}

}  // namespace
}  // namespace onnx_genai::testing
