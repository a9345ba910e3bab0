// Whole-model parity: the demo decoder of tools/build_demo_model.py (standard ops, opset 17,
// symbolic batch/seq) run by our Session and by ONNX Runtime on the same input_ids.
//
// Tolerance: |ours - ort| <= 1e-4 + 1e-4 * |ort| per logit. Both sides compute in fp32 (the f16w
// variant stores weights as fp16 and casts them to fp32 in the graph), so the only differences
// are summation order in MatMul, LayerNorm and Softmax; logits are O(1), so that is ~1e-6 in
// practice and 1e-4 leaves room without hiding a wrong op. The greedy token (argmax over the
// vocabulary, ties to the lowest id) must be identical at every position.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <ostream>
#include <random>

#include "demo_model.h"
#include "onnx_genai/session.h"
#include "oracle_io.h"

namespace onnx_genai {
namespace {

constexpr float kAbsTolerance = 1e-4f;
constexpr float kRelTolerance = 1e-4f;

Tensor random_ids(int64_t batch, int64_t seq, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> ids(static_cast<size_t>(batch * seq));
  for (auto& id : ids) id = static_cast<int64_t>(rng() % testing::kDemoVocab);
  return Tensor::from_vector<int64_t>(Shape{batch, seq}, ids);
}

// Index of the largest value in row[0, n); ties break to the lowest index.
int64_t argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

struct Comparison {
  float max_abs_diff = 0;
  int64_t out_of_tolerance = 0;  // NaN counts as out of tolerance
};

Comparison compare_logits(const Tensor& ours, const Tensor& reference) {
  Comparison c;
  const float* got = ours.data<float>();
  const float* want = reference.data<float>();
  for (int64_t i = 0; i < reference.numel(); ++i) {
    const float diff = std::fabs(got[i] - want[i]);
    c.max_abs_diff = std::max(c.max_abs_diff, diff);
    if (!(diff <= kAbsTolerance + kRelTolerance * std::fabs(want[i]))) ++c.out_of_tolerance;
  }
  return c;
}

struct ParityCase {
  std::string model;
  int64_t batch;
  int64_t seq;
};

void PrintTo(const ParityCase& c, std::ostream* os) {
  *os << c.model << " batch=" << c.batch << " seq=" << c.seq;
}

std::string case_name(const ::testing::TestParamInfo<ParityCase>& info) {
  const std::string model = info.param.model == testing::kDemoModelF32 ? "f32" : "f16weights";
  return model + "_batch" + std::to_string(info.param.batch) + "_seq" + std::to_string(info.param.seq);
}

class OrtParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(OrtParity, LogitsAndGreedyTokensMatchOnnxRuntime) {
  const ParityCase& param = GetParam();
  const testing::DemoModels& models = testing::DemoModels::get();
  ASSERT_TRUE(models.status().is_ok()) << models.status().message();
  const std::string model_path = models.path(param.model);

  const Tensor ids = random_ids(param.batch, param.seq, static_cast<uint32_t>(param.batch * 1000 + param.seq));
  SessionOptions options;
  options.num_threads = 2;
  auto session = Session::load(model_path, options);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto ours = (*session)->run_named({{"input_ids", ids}});
  ASSERT_TRUE(ours.is_ok()) << ours.status().message();
  auto ort = testing::run_onnx_runtime(model_path, {{"input_ids", ids}});
  ASSERT_TRUE(ort.is_ok()) << ort.status().message();

  ASSERT_EQ(ours->size(), 1u);
  ASSERT_EQ(ort->size(), 1u);
  const Tensor& logits = (*ours)[0];
  const Tensor& reference = (*ort)[0].tensor;
  ASSERT_EQ((*ort)[0].name, "logits");
  ASSERT_EQ(logits.dtype(), DType::kF32);
  ASSERT_EQ(reference.dtype(), DType::kF32);
  ASSERT_EQ(logits.shape(), (Shape{param.batch, param.seq, testing::kDemoVocab}));
  ASSERT_EQ(reference.shape(), logits.shape());

  const Comparison comparison = compare_logits(logits, reference);
  EXPECT_EQ(comparison.out_of_tolerance, 0)
      << comparison.out_of_tolerance << " logits out of tolerance; max abs diff " << comparison.max_abs_diff;

  const float* got = logits.data<float>();
  const float* want = reference.data<float>();
  const int64_t positions = param.batch * param.seq;
  int64_t token_mismatches = 0;
  for (int64_t p = 0; p < positions; ++p) {
    const int64_t ours_token = argmax(got + p * testing::kDemoVocab, testing::kDemoVocab);
    const int64_t ort_token = argmax(want + p * testing::kDemoVocab, testing::kDemoVocab);
    if (ours_token != ort_token) {
      ++token_mismatches;
      ADD_FAILURE() << "position " << p << ": greedy token " << ours_token << ", ONNX Runtime " << ort_token;
    }
  }
  EXPECT_EQ(token_mismatches, 0);
  RecordProperty("max_abs_diff", std::to_string(comparison.max_abs_diff));
  std::printf("[ parity   ] %s batch=%lld seq=%lld max_abs_diff=%.3g\n", param.model.c_str(),
              static_cast<long long>(param.batch), static_cast<long long>(param.seq), comparison.max_abs_diff);
}

std::vector<ParityCase> parity_cases() {
  std::vector<ParityCase> cases;
  for (const char* model : {testing::kDemoModelF32, testing::kDemoModelF16Weights}) {
    for (int64_t batch : {1, 3}) {
      for (int64_t seq : {1, 7, 32}) cases.push_back({model, batch, seq});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(DemoDecoder, OrtParity, ::testing::ValuesIn(parity_cases()), case_name);

// One session serving every shape in turn must give what fresh sessions give: plans cached per
// shape must not leak state (arena contents, bound dims) from one shape into the next.
TEST(OrtParitySession, OneSessionAcrossShapesMatchesOnnxRuntime) {
  const testing::DemoModels& models = testing::DemoModels::get();
  ASSERT_TRUE(models.status().is_ok()) << models.status().message();
  const std::string model_path = models.path(testing::kDemoModelF32);
  auto session = Session::load(model_path);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 7}, {3, 32}, {1, 7}, {3, 1}, {3, 32}};
  for (auto [batch, seq] : shapes) {
    const Tensor ids = random_ids(batch, seq, static_cast<uint32_t>(7 * batch + seq));
    auto ours = (*session)->run({ids});
    ASSERT_TRUE(ours.is_ok()) << ours.status().message();
    auto ort = testing::run_onnx_runtime(model_path, {{"input_ids", ids}});
    ASSERT_TRUE(ort.is_ok()) << ort.status().message();
    const Tensor& reference = (*ort)[0].tensor;
    ASSERT_EQ((*ours)[0].shape(), reference.shape());
    const Comparison comparison = compare_logits((*ours)[0], reference);
    EXPECT_EQ(comparison.out_of_tolerance, 0)
        << "batch " << batch << " seq " << seq << ": max abs diff " << comparison.max_abs_diff;
  }
  EXPECT_EQ((*session)->stats().plans_compiled, 3);
  EXPECT_EQ((*session)->stats().plan_cache_hits, 2);
}

}  // namespace
}  // namespace onnx_genai
