// Softmax and LogSoftmax: CUDA kernels (ops/cuda/softmax.cc) against the CPU kernel on random
// shapes and axes (negative too; the last axis, an inner one, and the opset < 13 flattening at
// `axis`), f32 / f16 / bf16, plus the decoder's cases: masked attention scores (rows holding
// -65504 or -inf), a 152k-wide row of logits, one-element rows and empty inputs. Both sides
// compute in f32 and round; outputs within cuda_test_util.h's tolerances.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "data_test_util.h"

namespace onnx_genai::testing {
namespace {

constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

using SoftmaxCuda = CudaKernelTest;

TEST_F(SoftmaxCuda, MatchesCpuOnRandomCases) {
  const std::vector<int64_t> dims = {1, 2, 3, 7, 32, 33, 100, 1025};
  for (int trial = 0; trial < 150; ++trial) {
    const DType dtype = kDtypes[trial % std::size(kDtypes)];
    const char* op = trial % 4 == 3 ? "LogSoftmax" : "Softmax";
    const int opset = trial % 5 == 4 ? 11 : 13;
    const int rank = 1 + static_cast<int>(rng_() % 4);
    const Shape shape = random_dims(rng_, rank, dims, int64_t{1} << 18);
    // opset 13: any axis in [-rank, rank); opset 11: [-rank, rank] (rank: one row per element).
    const int span = opset < 13 ? 2 * rank + 1 : 2 * rank;
    const int64_t axis = static_cast<int64_t>(rng_() % static_cast<unsigned>(span)) - rank;
    const std::vector<Tensor> inputs = {random_values(dtype, shape, rng_, -8.0f, 8.0f)};
    CudaNode spec(op, "", {true}, opset);
    spec.attr_int("axis", axis);
    compare(spec.with_inputs(inputs), inputs,
            std::string(op) + " " + std::string(dtype_name(dtype)) + " " + shape.to_string() + " axis " +
                std::to_string(axis) + " opset " + std::to_string(opset));
  }
}

TEST_F(SoftmaxCuda, DefaultAxesMaskedRowsWideRowsAndEmptyInputs) {
  // Default axis: -1 from opset 13, 1 (flatten the rest) before.
  for (const int opset : {11, 13}) {
    const std::vector<Tensor> inputs = {random_values(DType::kF32, Shape{3, 4, 5}, rng_, -3, 3)};
    CudaNode spec("Softmax", "", {true}, opset);
    compare(spec.with_inputs(inputs), inputs, "Softmax default axis opset " + std::to_string(opset));
  }
  // Attention scores of one decode token over 300 positions, the later half masked.
  for (const DType dtype : kDtypes) {
    for (const float mask : {-65504.0f, -std::numeric_limits<float>::infinity()}) {
      Tensor scores = random_values(dtype, Shape{1, 14, 1, 300}, rng_, -4, 4);
      for (int64_t i = 0; i < scores.numel(); ++i) {
        if (i % 300 < 150) continue;
        if (dtype == DType::kF16) scores.data<Float16>()[i] = Float16(mask);
        else if (dtype == DType::kBF16) scores.data<BFloat16>()[i] = BFloat16(mask);
        else scores.data<float>()[i] = mask;
      }
      const std::vector<Tensor> inputs = {scores};
      CudaNode spec("Softmax", "", {true}, 13);
      spec.attr_int("axis", -1);
      compare(spec.with_inputs(inputs), inputs, "Softmax masked scores " + std::string(dtype_name(dtype)));
    }
  }
  // A vocabulary-wide row, and rows of one element.
  for (const Shape& shape : {Shape{2, 151936}, Shape{5, 1}}) {
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      const std::vector<Tensor> inputs = {random_values(DType::kF32, shape, rng_, -10, 10)};
      CudaNode spec(op, "", {true}, 13);
      compare(spec.with_inputs(inputs), inputs, std::string(op) + " " + shape.to_string());
    }
  }
  for (const Shape& shape : {Shape{0, 7}, Shape{4, 0}}) {
    const std::vector<Tensor> inputs = {random_values(DType::kF16, shape, rng_)};
    CudaNode spec("Softmax", "", {true}, 13);
    compare(spec.with_inputs(inputs), inputs, "Softmax empty " + shape.to_string());
  }
}

TEST_F(SoftmaxCuda, BadInputs) {
  const Tensor x = random_values(DType::kF32, Shape{2, 3}, rng_);
  CudaNode spec("Softmax", "", {true}, 13);
  spec.attr_int("axis", 2);
  expect_cuda_rejects(spec.with_inputs({x}), {x}, "axis", "Softmax axis 2 of rank 2");
  const Tensor f64 = Tensor::allocate(DType::kF64, Shape{2, 3}).value();
  CudaNode spec64("Softmax", "", {true}, 13);
  expect_cuda_rejects(spec64.with_inputs({f64}), {f64}, "", "Softmax f64 stays on the CPU");
}

}  // namespace
}  // namespace onnx_genai::testing
