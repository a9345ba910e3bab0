// Comparisons, And / Or / Xor and Where: CUDA kernels (ops/cuda/logical.cc) against the CPU
// kernels on random broadcasting shapes and every dtype each op registers, plus the decoder's
// causal-mask chain (And of a [1, 1, S, T] mask with a [B, 1, 1, T] padding mask, then Where
// between two scalars). Values are small whole numbers so ties (Equal, LessOrEqual) are common;
// f16 / bf16 inputs carry a NaN now and then, which compares false on both sides. Outputs must be
// identical.
#include <cmath>
#include <string>
#include <vector>

#include "data_test_util.h"

namespace onnx_genai::testing {
namespace {

// `count` shapes that broadcast together: a random output shape, each operand keeping a random
// trailing part of it with random dims set to 1.
std::vector<Shape> broadcast_operands(std::mt19937& rng, int count) {
  const int rank = 1 + static_cast<int>(rng() % 5);
  const Shape out = random_dims(rng, rank, {1, 2, 3, 5, 8, 33});
  std::vector<Shape> shapes;
  for (int k = 0; k < count; ++k) {
    const int keep = static_cast<int>(rng() % static_cast<unsigned>(rank + 1));
    std::vector<int64_t> dims(out.dims().end() - keep, out.dims().end());
    for (int64_t& d : dims) {
      if (rng() % 3 == 0) d = 1;
    }
    shapes.emplace_back(std::move(dims));
  }
  return shapes;
}

void sprinkle_nans(Tensor& t, std::mt19937& rng) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (rng() % 17 != 0) continue;
    if (t.dtype() == DType::kF16) t.data<Float16>()[i] = Float16(NAN);
    else if (t.dtype() == DType::kBF16) t.data<BFloat16>()[i] = BFloat16(NAN);
    else if (t.dtype() == DType::kF32) t.data<float>()[i] = NAN;
  }
}

using LogicalCuda = CudaKernelTest;

TEST_F(LogicalCuda, ComparisonsMatchCpu) {
  const struct {
    const char* op;
    std::vector<DType> dtypes;
  } kOps[] = {
      {"Equal", {DType::kF32, DType::kF16, DType::kBF16, DType::kI8, DType::kU8, DType::kI32, DType::kI64, DType::kBool}},
      {"Less", {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64}},
      {"Greater", {DType::kF32, DType::kBF16, DType::kI8, DType::kU8}},
      {"LessOrEqual", {DType::kF32, DType::kF16, DType::kI32, DType::kI64}},
      {"GreaterOrEqual", {DType::kF16, DType::kBF16, DType::kI64}},
      {"And", {DType::kBool}},
      {"Or", {DType::kBool}},
      {"Xor", {DType::kBool}},
  };
  for (const auto& op : kOps) {
    for (int trial = 0; trial < 24; ++trial) {
      const DType dtype = op.dtypes[static_cast<size_t>(trial) % op.dtypes.size()];
      const std::vector<Shape> shapes = broadcast_operands(rng_, 2);
      const Shape& sa = shapes[0];
      const Shape& sb = shapes[1];
      const float lo = dtype == DType::kU8 ? 0.0f : -3.0f;
      std::vector<Tensor> inputs = {random_values(dtype, sa, rng_, lo, 3), random_values(dtype, sb, rng_, lo, 3)};
      if (dtype_is_float(dtype)) {
        // Whole numbers, so the two sides tie often.
        for (Tensor& t : inputs) {
          for (int64_t i = 0; i < t.numel(); ++i) {
            const float v = std::round(static_cast<float>(element(t, i)) * 3.0f);
            if (dtype == DType::kF16) t.data<Float16>()[i] = Float16(v);
            else if (dtype == DType::kBF16) t.data<BFloat16>()[i] = BFloat16(v);
            else t.data<float>()[i] = v;
          }
          sprinkle_nans(t, rng_);
        }
      }
      CudaNode spec(op.op, "", {true}, 13);
      expect_same_on_both(spec.with_inputs(inputs), inputs, *stream_,
                          std::string(op.op) + " " + std::string(dtype_name(dtype)) + " " + sa.to_string() + " " +
                              sb.to_string());
    }
  }
}

TEST_F(LogicalCuda, WhereMatchesCpu) {
  const DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kBool, DType::kI8};
  for (int trial = 0; trial < 120; ++trial) {
    const DType dtype = kDtypes[trial % std::size(kDtypes)];
    const std::vector<Shape> shapes = broadcast_operands(rng_, 3);
    const Shape& sc = shapes[0];
    const Shape& sx = shapes[1];
    const Shape& sy = shapes[2];
    const std::vector<Tensor> inputs = {random_values(DType::kBool, sc, rng_, 0, 1), random_values(dtype, sx, rng_, -50, 50),
                                        random_values(dtype, sy, rng_, -50, 50)};
    CudaNode spec("Where", "", {true}, 16);
    expect_same_on_both(spec.with_inputs(inputs), inputs, *stream_,
                        "Where " + std::string(dtype_name(dtype)) + " " + sc.to_string() + " " + sx.to_string() + " " +
                            sy.to_string());
  }
}

TEST_F(LogicalCuda, DecoderMaskChain) {
  constexpr int64_t kSeq = 5, kTotal = 12;
  // Causal part [1, 1, S, T] (position j visible from query i when j <= past + i).
  Tensor causal = Tensor::allocate(DType::kBool, Shape{1, 1, kSeq, kTotal}).value();
  for (int64_t i = 0; i < kSeq; ++i) {
    for (int64_t j = 0; j < kTotal; ++j) causal.data<uint8_t>()[i * kTotal + j] = j <= kTotal - kSeq + i ? 1 : 0;
  }
  const Tensor padding = random_values(DType::kBool, Shape{3, 1, 1, kTotal}, rng_, 0, 1);
  CudaNode and_spec("And", "", {true}, 13);
  const std::vector<Tensor> and_inputs = {causal, padding};
  expect_same_on_both(and_spec.with_inputs(and_inputs), and_inputs, *stream_, "mask And");
  Result<std::vector<Tensor>> mask = run_on_cpu(and_spec.with_inputs(and_inputs), and_inputs);
  ASSERT_TRUE(mask.is_ok()) << mask.status().message();
  for (const DType dtype : {DType::kF16, DType::kF32, DType::kBF16}) {
    const std::vector<Tensor> inputs = {(*mask)[0], random_values(dtype, Shape{}, rng_, 0, 0),
                                        random_values(dtype, Shape{}, rng_, -1, -1)};
    CudaNode spec("Where", "", {true}, 16);
    expect_same_on_both(spec.with_inputs(inputs), inputs, *stream_, "mask Where " + std::string(dtype_name(dtype)));
  }
}

TEST_F(LogicalCuda, BadInputs) {
  const Tensor a = random_values(DType::kF32, Shape{2, 3}, rng_);
  const Tensor b = random_values(DType::kF32, Shape{4, 3}, rng_);
  CudaNode spec("Less", "", {true}, 13);
  expect_cuda_rejects(spec.with_inputs({a, b}), {a, b}, "", "Less of shapes that do not broadcast");
  const Tensor i32 = random_values(DType::kI32, Shape{2, 3}, rng_, -3, 3);
  CudaNode mixed("Equal", "", {true}, 13);
  expect_cuda_rejects(mixed.with_inputs({a, i32}), {a, i32}, "", "Equal of f32 and int32");
  const Tensor flags = random_values(DType::kBool, Shape{2, 3}, rng_, 0, 1);
  CudaNode less_bool("Less", "", {true}, 13);
  expect_cuda_rejects(less_bool.with_inputs({flags, flags}), {flags, flags}, "", "Less of bools (no CPU kernel either)");
}

}  // namespace
}  // namespace onnx_genai::testing
