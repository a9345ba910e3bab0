// ReduceMean: the CUDA kernel (ops/cuda/mean.cc) against the CPU kernel on random shapes, axes
// (negative too, as the attribute before opset 18 and as the input from 18), keepdims and
// noop_with_empty_axes, f32 / f16 / bf16, plus the RMS-norm decomposition's mean over the hidden
// dim. Values are positive (as squares are), so means are not cancellations and the f32 sums of
// the two sides, added in different orders, agree within cuda_test_util.h's tolerances.
// Reductions the shared plan splits into several passes, and empty inputs, stay on the CPU.
#include <string>
#include <vector>

#include "data_test_util.h"

namespace onnx_genai::testing {
namespace {

constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

using MeanCuda = CudaKernelTest;

TEST_F(MeanCuda, MatchesCpuOnAdjacentAxes) {
  for (int trial = 0; trial < 150; ++trial) {
    const DType dtype = kDtypes[trial % std::size(kDtypes)];
    const int rank = 1 + static_cast<int>(rng_() % 4);
    const Shape shape = random_dims(rng_, rank, {1, 2, 3, 7, 32, 100, 896}, int64_t{1} << 18);
    // One run of adjacent axes [first, first + count), each named by itself or its negative alias.
    const int first = static_cast<int>(rng_() % static_cast<unsigned>(rank));
    const int count = 1 + static_cast<int>(rng_() % static_cast<unsigned>(rank - first));
    std::vector<int64_t> axes;
    for (int a = first; a < first + count; ++a) axes.push_back(rng_() % 2 ? a : a - rank);
    const int64_t keepdims = trial % 3 == 0 ? 0 : 1;
    const bool axes_input = trial % 2 == 0;
    std::vector<Tensor> inputs = {random_values(dtype, shape, rng_, 0.5f, 1.5f)};
    if (axes_input) inputs.push_back(i64_tensor(axes));
    CudaNode spec("ReduceMean", "", {true}, axes_input ? 18 : 13);
    spec.attr_int("keepdims", keepdims);
    Node& node = spec.with_inputs(inputs);
    if (!axes_input) set_ints(node, "axes", axes);
    compare(node, inputs,
            "ReduceMean " + std::string(dtype_name(dtype)) + " " + shape.to_string() + " axes " + list(axes) +
                " keepdims " + std::to_string(keepdims));
  }
}

TEST_F(MeanCuda, HiddenDimAllAxesAndNoop) {
  for (const DType dtype : kDtypes) {
    const std::vector<Tensor> inputs = {random_values(dtype, Shape{1, 7, 896}, rng_, 0.0f, 4.0f)};
    CudaNode spec("ReduceMean", "", {true}, 13);
    Node& node = spec.with_inputs(inputs);
    set_ints(node, "axes", {-1});
    compare(node, inputs, "ReduceMean hidden " + std::string(dtype_name(dtype)));
  }
  {  // No axes: every axis.
    const std::vector<Tensor> inputs = {random_values(DType::kF32, Shape{3, 5, 7}, rng_, 0.5f, 1.5f)};
    CudaNode spec("ReduceMean", "", {true}, 13);
    compare(spec.with_inputs(inputs), inputs, "ReduceMean all axes");
  }
  {  // No axes with noop_with_empty_axes: a copy.
    const std::vector<Tensor> inputs = {random_values(DType::kF16, Shape{3, 5}, rng_)};
    CudaNode spec("ReduceMean", "", {true}, 18);
    spec.attr_int("noop_with_empty_axes", 1);
    compare(spec.with_inputs(inputs), inputs, "ReduceMean noop");
  }
}

TEST_F(MeanCuda, SplitPlansAndEmptyInputsStayOnTheCpu) {
  const Tensor x = random_values(DType::kF32, Shape{3, 4, 5}, rng_);
  CudaNode spec("ReduceMean", "", {true}, 13);
  Node& node = spec.with_inputs({x});
  set_ints(node, "axes", {0, 2});
  expect_cuda_rejects(node, {x}, "passes", "ReduceMean axes 0 and 2");
  const Tensor empty = random_values(DType::kF32, Shape{3, 0}, rng_);
  CudaNode empty_spec("ReduceMean", "", {true}, 13);
  Node& empty_node = empty_spec.with_inputs({empty});
  set_ints(empty_node, "axes", {1});
  expect_cuda_rejects(empty_node, {empty}, "empty", "ReduceMean of an empty input");
  CudaNode bad_spec("ReduceMean", "", {true}, 13);
  Node& bad_node = bad_spec.with_inputs({x});
  set_ints(bad_node, "axes", {3});
  expect_cuda_rejects(bad_node, {x}, "", "ReduceMean axis 3 of rank 3");
}

}  // namespace
}  // namespace onnx_genai::testing
