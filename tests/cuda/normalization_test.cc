// SimplifiedLayerNormalization, RMSNormalization and SkipSimplifiedLayerNormalization: CUDA kernel
// against the CPU kernel on random shapes, dtypes, epsilons and optional inputs / outputs.
#include <string>

#include "cuda_test_util.h"

namespace onnx_genai::testing {
namespace {

constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr float kEpsilons[] = {1e-5f, 1e-6f, 1e-12f, 0.1f};

// Hidden sizes: powers of two, model sizes, and odd sizes that force the one-element path.
int64_t random_hidden(std::mt19937& rng) {
  constexpr int64_t kFixed[] = {64, 896, 1536, 2048, 3072, 4096, 4095, 127, 1000, 2050};
  if (rng() % 3 == 0) return std::uniform_int_distribution<int64_t>(64, 4096)(rng);
  return kFixed[rng() % std::size(kFixed)];
}

std::string describe(DType dtype, const Shape& x, float epsilon) {
  return std::string(dtype_name(dtype)) + " x" + x.to_string() + " eps " + std::to_string(epsilon);
}

using SimplifiedNormCuda = CudaKernelTest;

TEST_F(SimplifiedNormCuda, MatchesCpuOnRandomCases) {
  for (int trial = 0; trial < 60; ++trial) {
    const DType dtype = kDtypes[trial % 3];
    const int64_t rows = std::uniform_int_distribution<int64_t>(1, 64)(rng_);
    const int64_t hidden = random_hidden(rng_);
    const float epsilon = kEpsilons[rng_() % std::size(kEpsilons)];
    // Half the cases normalise [2, hidden] from axis 1 of a rank-3 X with scale [hidden]
    // (a period of half the row); the rest the last axis.
    const bool two_axes = trial % 4 == 1;
    const Shape x_shape = two_axes ? Shape{rows, 2, hidden} : Shape{rows, hidden};
    const bool with_bias = trial % 5 == 2;
    const bool with_inv_std = trial % 2 == 0;
    CudaNode spec("SimplifiedLayerNormalization", trial % 2 ? "com.microsoft" : "", {true, with_inv_std}, 17);
    spec.attr_float("epsilon", epsilon);
    if (two_axes) spec.attr_int("axis", 1);
    std::vector<Tensor> inputs{random_float_tensor(dtype, x_shape, rng_, -3.0f, 3.0f),
                               random_float_tensor(dtype, Shape{hidden}, rng_, 0.5f, 1.5f)};
    if (with_bias) inputs.push_back(random_float_tensor(dtype, Shape{hidden}, rng_));
    compare(spec.with_inputs(inputs), inputs, "SimplifiedLayerNormalization " + describe(dtype, x_shape, epsilon));
  }
}

using RmsNormCuda = CudaKernelTest;

// ONNX RMSNormalization (opset 23) runs SimplifiedLayerNormalization's kernel: Y only, normalised
// from `axis` (positive or negative), scale [hidden], [1, hidden] or the whole normalised shape.
TEST_F(RmsNormCuda, MatchesCpuOnRandomCases) {
  for (int trial = 0; trial < 48; ++trial) {
    const DType dtype = kDtypes[trial % 3];
    const int64_t rows = std::uniform_int_distribution<int64_t>(1, 48)(rng_);
    const int64_t hidden = random_hidden(rng_);
    const bool default_epsilon = trial % 6 == 0;  // no attribute: 1e-5
    const float epsilon = default_epsilon ? 1e-5f : kEpsilons[rng_() % std::size(kEpsilons)];
    const bool two_axes = trial % 4 >= 2;  // X [rows, 2, hidden] normalised from axis 1 (or -2)
    const Shape x_shape = two_axes ? Shape{rows, 2, hidden} : Shape{rows, hidden};
    Shape scale_shape{hidden};
    if (trial % 5 == 1) scale_shape = Shape{1, hidden};
    if (two_axes && trial % 8 >= 6) scale_shape = Shape{2, hidden};
    CudaNode spec("RMSNormalization", "", {true}, 23);
    if (!default_epsilon) spec.attr_float("epsilon", epsilon);
    if (two_axes) spec.attr_int("axis", trial % 2 ? 1 : -2);
    if (trial % 7 == 3) spec.attr_int("stash_type", 1);
    const std::vector<Tensor> inputs{random_float_tensor(dtype, x_shape, rng_, -3.0f, 3.0f),
                                     random_float_tensor(dtype, scale_shape, rng_, 0.5f, 1.5f)};
    compare(spec.with_inputs(inputs), inputs,
            "RMSNormalization " + describe(dtype, x_shape, epsilon) + " scale" + scale_shape.to_string());
  }
}

using SkipSimplifiedNormCuda = CudaKernelTest;

TEST_F(SkipSimplifiedNormCuda, MatchesCpuOnRandomCases) {
  for (int trial = 0; trial < 60; ++trial) {
    const DType dtype = kDtypes[trial % 3];
    const int64_t batch = std::uniform_int_distribution<int64_t>(1, 4)(rng_);
    const int64_t seq = std::uniform_int_distribution<int64_t>(1, 16)(rng_);
    const int64_t hidden = random_hidden(rng_);
    const float epsilon = kEpsilons[rng_() % std::size(kEpsilons)];
    const Shape x_shape = trial % 3 == 0 ? Shape{batch * seq, hidden} : Shape{batch, seq, hidden};
    // skip: the input's shape, or one [S, H] / [1, S, H] shared by every batch row.
    Shape skip_shape = x_shape;
    if (x_shape.rank() == 3 && trial % 4 == 1) skip_shape = Shape{seq, hidden};
    if (x_shape.rank() == 3 && trial % 4 == 2) skip_shape = Shape{1, seq, hidden};
    const bool with_bias = trial % 2 == 1;
    // Output subsets: all four, output only, output + sum, output + inv_std_var.
    const std::vector<bool> outputs[] = {{true, true, true, true}, {true}, {true, false, false, true}, {true, false, true}};
    CudaNode spec("SkipSimplifiedLayerNormalization", "com.microsoft", outputs[trial % 4]);
    spec.attr_float("epsilon", epsilon);
    std::vector<Tensor> inputs{random_float_tensor(dtype, x_shape, rng_, -3.0f, 3.0f),
                               random_float_tensor(dtype, skip_shape, rng_, -3.0f, 3.0f),
                               random_float_tensor(dtype, Shape{hidden}, rng_, 0.5f, 1.5f)};
    if (with_bias) inputs.push_back(random_float_tensor(dtype, Shape{hidden}, rng_));
    compare(spec.with_inputs(inputs), inputs,
            "SkipSimplifiedLayerNormalization " + describe(dtype, x_shape, epsilon) + " skip" + skip_shape.to_string());
  }
}

}  // namespace
}  // namespace onnx_genai::testing
