// Transpose, Slice, Expand, Concat and Split: CUDA kernels (ops/cuda/layout.cc) against the CPU kernels
// on random shapes, permutations, axes (negative too), slice steps (negative too, empty results),
// broadcasts and every element size, plus the decoder's own cases (q/k/v head transposes, the
// rotary half-slices, the KV-cache append, GQA's key expansion). The ops only move bytes, so the
// outputs must be byte-identical. Bad inputs fail as on the CPU; layouts the CUDA copy cannot
// index are turned down in prepare (the session then runs them on the CPU).
#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "data_test_util.h"

namespace onnx_genai::testing {
namespace {

constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kBool, DType::kI8};
const std::vector<int64_t> kDims = {1, 2, 3, 4, 5, 8, 17, 32};

std::string describe(const char* op, DType dtype, const Shape& shape, const std::string& extra) {
  return std::string(op) + " " + std::string(dtype_name(dtype)) + " " + shape.to_string() + " " + extra;
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

using LayoutCuda = CudaKernelTest;

TEST_F(LayoutCuda, TransposeMatchesCpu) {
  for (int trial = 0; trial < 120; ++trial) {
    const DType dtype = kDtypes[trial % std::size(kDtypes)];
    const int rank = 1 + static_cast<int>(rng_() % 6);
    const Shape shape = random_dims(rng_, rank, kDims);
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    const bool default_perm = trial % 7 == 0;  // no attribute: the dims reversed
    CudaNode spec("Transpose", "", {true}, 13);
    const std::vector<Tensor> inputs = {random_values(dtype, shape, rng_, -100, 100)};
    Node& node = spec.with_inputs(inputs);
    if (!default_perm) set_ints(node, "perm", perm);
    expect_same_on_both(node, inputs, *stream_, describe("Transpose", dtype, shape, default_perm ? "reversed" : list(perm)));
  }
}

TEST_F(LayoutCuda, TransposeDecoderCases) {
  const struct {
    Shape shape;
    std::vector<int64_t> perm;
  } kCases[] = {
      {Shape{1, 1, 14, 64}, {0, 2, 1, 3}},    // q heads of one decode token
      {Shape{1, 7, 14, 64}, {0, 2, 1, 3}},    // prefill
      {Shape{1, 14, 300, 64}, {0, 1, 3, 2}},  // K^T for the scores
      {Shape{1, 14, 1, 64}, {0, 2, 1, 3}},    // the attention output back to [B, S, H, D]
      {Shape{3, 5, 7}, {2, 0, 1}},
  };
  for (const auto& c : kCases) {
    for (const DType dtype : {DType::kF16, DType::kF32, DType::kBF16}) {
      CudaNode spec("Transpose", "", {true}, 13);
      const std::vector<Tensor> inputs = {random_values(dtype, c.shape, rng_)};
      Node& node = spec.with_inputs(inputs);
      set_ints(node, "perm", c.perm);
      expect_same_on_both(node, inputs, *stream_, describe("Transpose", dtype, c.shape, list(c.perm)));
    }
  }
}

TEST_F(LayoutCuda, SliceMatchesCpu) {
  std::uniform_int_distribution<int> pick_step(-3, 3);
  for (int trial = 0; trial < 200; ++trial) {
    const DType dtype = kDtypes[trial % std::size(kDtypes)];
    const int rank = 1 + static_cast<int>(rng_() % 5);
    const Shape shape = random_dims(rng_, rank, kDims);
    // A random subset of the axes in random order, each as itself or its negative alias.
    std::vector<int64_t> axes(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
    std::shuffle(axes.begin(), axes.end(), rng_);
    axes.resize(1 + rng_() % static_cast<size_t>(rank));
    std::vector<int64_t> starts, ends, steps;
    for (int64_t& a : axes) {
      const int64_t dim = shape[static_cast<int>(a)];
      std::uniform_int_distribution<int64_t> pos(-dim - 2, dim + 2);
      int step = pick_step(rng_);
      if (step == 0) step = 1;
      starts.push_back(trial % 11 == 0 ? INT64_MAX : pos(rng_));
      ends.push_back(trial % 13 == 0 ? (step > 0 ? INT64_MAX : INT64_MIN) : pos(rng_));
      steps.push_back(step);
      if (rng_() % 2) a -= rank;
    }
    const bool with_steps = trial % 5 != 0, with_axes = with_steps || trial % 2 == 0;
    std::vector<Tensor> inputs = {random_values(dtype, shape, rng_, -100, 100), i64_tensor(starts), i64_tensor(ends)};
    if (with_axes) inputs.push_back(i64_tensor(axes));
    if (with_steps) inputs.push_back(i64_tensor(steps));
    if (!with_axes) {  // starts / ends then cover the leading dims in order
      for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
    }
    if (!with_steps) steps.assign(steps.size(), 1);
    CudaNode spec("Slice", "", {true}, 13);
    expect_same_on_both(spec.with_inputs(inputs), inputs, *stream_,
                        describe("Slice", dtype, shape, "starts " + list(starts) + " ends " + list(ends) + " axes " +
                                                            list(axes) + " steps " + list(steps)));
  }
}

TEST_F(LayoutCuda, SliceDecoderCasesAndOldOpset) {
  // The rotary halves of q [1, 14, 1, 64], and a reversal.
  constexpr std::array<std::array<int64_t, 3>, 4> kRanges = {{{0, 32, 1}, {32, 64, 1}, {63, -65, -1}, {5, 0, -2}}};
  for (const auto& [start, end, step] : kRanges) {
    const std::vector<Tensor> inputs = {random_values(DType::kF16, Shape{1, 14, 1, 64}, rng_), i64_tensor({start}),
                                        i64_tensor({end}), i64_tensor({-1}), i64_tensor({step})};
    CudaNode spec("Slice", "", {true}, 13);
    expect_same_on_both(spec.with_inputs(inputs), inputs, *stream_,
                        "Slice rotary " + list({start, end, step}));
  }
  // Opset < 10: starts / ends / axes are attributes.
  const std::vector<Tensor> inputs = {random_values(DType::kF32, Shape{4, 9, 6}, rng_)};
  CudaNode spec("Slice", "", {true}, 9);
  Node& node = spec.with_inputs(inputs);
  set_ints(node, "starts", {1, -4});
  set_ints(node, "ends", {100, -1});
  set_ints(node, "axes", {2, 1});
  expect_same_on_both(node, inputs, *stream_, "Slice opset 9");
}

TEST_F(LayoutCuda, ExpandMatchesCpu) {
  for (int trial = 0; trial < 120; ++trial) {
    const DType dtype = kDtypes[trial % std::size(kDtypes)];
    const int out_rank = 1 + static_cast<int>(rng_() % 5);
    const Shape out = random_dims(rng_, out_rank, kDims);
    // The input: a trailing part of the output's dims, some set to 1 (broadcast); the shape
    // input: the output's dims, some set to 1 where the input keeps its own.
    const int in_rank = 1 + static_cast<int>(rng_() % static_cast<unsigned>(out_rank));
    std::vector<int64_t> in_dims(out.dims().end() - in_rank, out.dims().end());
    for (int64_t& d : in_dims) {
      if (rng_() % 2) d = 1;
    }
    std::vector<int64_t> shape_value = out.dims();
    for (int d = 0; d < in_rank; ++d) {
      const size_t od = static_cast<size_t>(out_rank - in_rank + d);
      if (in_dims[static_cast<size_t>(d)] == shape_value[od] && rng_() % 3 == 0) shape_value[od] = 1;
    }
    if (trial % 9 == 0) shape_value.erase(shape_value.begin());  // shape shorter than the input is fine too
    if (shape_value.empty()) shape_value.push_back(1);
    const Shape in(in_dims);
    const std::vector<Tensor> inputs = {random_values(dtype, in, rng_, -100, 100), i64_tensor(shape_value)};
    CudaNode spec("Expand", "", {true}, 13);
    expect_same_on_both(spec.with_inputs(inputs), inputs, *stream_, describe("Expand", dtype, in, "to " + list(shape_value)));
  }
  // GQA's key / value expansion: [B, kv, 1, T, D] -> [B, kv, groups, T, D].
  const std::vector<Tensor> inputs = {random_values(DType::kF16, Shape{1, 2, 1, 37, 64}, rng_), i64_tensor({1, 1, 7, 1, 1})};
  CudaNode spec("Expand", "", {true}, 13);
  expect_same_on_both(spec.with_inputs(inputs), inputs, *stream_, "Expand GQA keys");
}

TEST_F(LayoutCuda, ConcatMatchesCpu) {
  for (int trial = 0; trial < 120; ++trial) {
    const DType dtype = kDtypes[trial % std::size(kDtypes)];
    const int rank = 1 + static_cast<int>(rng_() % 5);
    const Shape base = random_dims(rng_, rank, kDims);
    const int axis = static_cast<int>(rng_() % static_cast<unsigned>(rank));
    std::vector<Tensor> inputs;
    const int parts = 1 + static_cast<int>(rng_() % 4);
    for (int p = 0; p < parts; ++p) {
      Shape s = base;
      s[axis] = static_cast<int64_t>(rng_() % 6);  // 0 too: an empty piece
      inputs.push_back(random_values(dtype, s, rng_, -100, 100));
    }
    const int64_t axis_attr = rng_() % 2 ? axis : axis - rank;
    CudaNode spec("Concat", "", {true}, 13);
    spec.attr_int("axis", axis_attr);
    expect_same_on_both(spec.with_inputs(inputs), inputs, *stream_,
                        describe("Concat", dtype, base, std::to_string(parts) + " parts axis " + std::to_string(axis_attr)));
  }
  // The KV-cache append: past [1, 2, T, 64] + new [1, 2, 1, 64] along the sequence.
  for (const int64_t past : {0, 1, 255}) {
    const std::vector<Tensor> inputs = {random_values(DType::kF16, Shape{1, 2, past, 64}, rng_),
                                        random_values(DType::kF16, Shape{1, 2, 1, 64}, rng_)};
    CudaNode spec("Concat", "", {true}, 13);
    spec.attr_int("axis", 2);
    expect_same_on_both(spec.with_inputs(inputs), inputs, *stream_, "Concat KV past " + std::to_string(past));
  }
}

// Split's outputs are sized by shape inference; the kernel reads every output's shape (so this
// test needs prepare_node to keep the output infos it hands out valid, as a session does).
TEST_F(LayoutCuda, SplitMatchesCpu) {
  for (int trial = 0; trial < 60; ++trial) {
    const DType dtype = kDtypes[trial % std::size(kDtypes)];
    const int rank = 1 + static_cast<int>(rng_() % 4);
    Shape shape = random_dims(rng_, rank, kDims);
    const int axis = static_cast<int>(rng_() % static_cast<unsigned>(rank));
    const int parts = 1 + static_cast<int>(rng_() % 4);
    // Sizes from the split input (0 too), or equal parts without it.
    std::vector<int64_t> sizes;
    const bool given = trial % 3 != 0;
    for (int p = 0; p < parts; ++p) sizes.push_back(given ? static_cast<int64_t>(rng_() % 5) : 3);
    shape[axis] = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    std::vector<Tensor> inputs = {random_values(dtype, shape, rng_, -100, 100)};
    if (given) inputs.push_back(i64_tensor(sizes));
    CudaNode spec("Split", "", std::vector<bool>(static_cast<size_t>(parts), true), 13);
    spec.attr_int("axis", rng_() % 2 ? axis : axis - rank);
    expect_same_on_both(spec.with_inputs(inputs), inputs, *stream_,
                        describe("Split", dtype, shape, "axis " + std::to_string(axis) + " sizes " + list(sizes)));
  }
}

TEST_F(LayoutCuda, BadInputsFailAsOnTheCpu) {
  const Tensor x = random_values(DType::kF32, Shape{2, 3, 4}, rng_);
  {
    CudaNode spec("Transpose", "", {true}, 13);
    Node& node = spec.with_inputs({x});
    set_ints(node, "perm", {0, 0, 1});
    expect_cuda_rejects(node, {x}, "perm", "Transpose bad perm");
  }
  {
    const std::vector<Tensor> inputs = {x, i64_tensor({0}), i64_tensor({2}), i64_tensor({1}), i64_tensor({0})};
    CudaNode spec("Slice", "", {true}, 13);
    expect_cuda_rejects(spec.with_inputs(inputs), inputs, "step", "Slice step 0");
  }
  {
    const std::vector<Tensor> inputs = {x, i64_tensor({5, 4})};
    CudaNode spec("Expand", "", {true}, 13);
    expect_cuda_rejects(spec.with_inputs(inputs), inputs, "", "Expand incompatible shape");
  }
  {
    const std::vector<Tensor> inputs = {x, random_values(DType::kF32, Shape{2, 5, 5}, rng_)};
    CudaNode spec("Concat", "", {true}, 13);
    spec.attr_int("axis", 1);
    expect_cuda_rejects(spec.with_inputs(inputs), inputs, "does not match", "Concat mismatched shapes");
  }
  {
    // Nine dims that no merge can join: the CUDA copy indexes at most 8, so the CPU takes it.
    const Tensor big = random_values(DType::kF32, Shape{2, 2, 2, 2, 2, 2, 2, 2, 2}, rng_);
    CudaNode spec("Transpose", "", {true}, 13);
    Node& node = spec.with_inputs({big});
    set_ints(node, "perm", {8, 7, 6, 5, 4, 3, 2, 1, 0});
    expect_cuda_rejects(node, {big}, "at most", "Transpose rank 9");
  }
}

// Not a pass / fail check: prints, for gpu-check's log, what one decode step of a Qwen2.5-0.5B-
// shaped standard graph (14 query / 2 KV heads of 64, 1024 cached positions, hidden 896) pays per
// op this family and its neighbours run; every node is recorded as a CUDA graph first.
TEST_F(LayoutCuda, PrintsDecodeStepTimes) {
  constexpr int64_t kPast = 1024, kTotal = kPast + 1;
  struct PerfCase {
    std::string what;
    const char* op;
    std::vector<Tensor> inputs;
    std::function<void(Node&)> attrs;
  };
  const auto perm = [](std::vector<int64_t> p) { return [p](Node& n) { set_ints(n, "perm", p); }; };
  const auto axis = [](int64_t a) { return [a](Node& n) { n.attrs.set("axis", Attribute{.kind = Attribute::Kind::kInt, .i = a}); }; };
  Tensor mask = random_values(DType::kBool, Shape{1, 1, 1, kTotal}, rng_, 0, 1);
  std::vector<PerfCase> cases;
  cases.push_back({"Transpose f16 [1,1,14,64] perm 0213 (q heads)", "Transpose",
                   {random_values(DType::kF16, Shape{1, 1, 14, 64}, rng_)}, perm({0, 2, 1, 3})});
  cases.push_back({"Slice f16 [1,14,1,64] last 32 (rotary half)", "Slice",
                   {random_values(DType::kF16, Shape{1, 14, 1, 64}, rng_), i64_tensor({32}), i64_tensor({64}),
                    i64_tensor({-1})},
                   nullptr});
  cases.push_back({"Concat f16 [1,2,1024,64] + [1,2,1,64] axis 2 (KV append)", "Concat",
                   {random_values(DType::kF16, Shape{1, 2, kPast, 64}, rng_),
                    random_values(DType::kF16, Shape{1, 2, 1, 64}, rng_)},
                   axis(2)});
  cases.push_back({"Expand f16 [1,2,1,1025,64] to [1,2,7,1025,64] (GQA keys)", "Expand",
                   {random_values(DType::kF16, Shape{1, 2, 1, kTotal, 64}, rng_), i64_tensor({1, 1, 7, 1, 1})}, nullptr});
  cases.push_back({"Transpose f16 [1,14,1025,64] perm 0132 (K^T)", "Transpose",
                   {random_values(DType::kF16, Shape{1, 14, kTotal, 64}, rng_)}, perm({0, 1, 3, 2})});
  cases.push_back({"Softmax f32 [1,14,1,1025] axis -1 (scores)", "Softmax",
                   {random_values(DType::kF32, Shape{1, 14, 1, kTotal}, rng_, -8, 8)}, axis(-1)});
  cases.push_back({"Where f16 [1,1,1,1025] of scalars (mask)", "Where",
                   {mask, random_values(DType::kF16, Shape{}, rng_), random_values(DType::kF16, Shape{}, rng_)}, nullptr});
  cases.push_back({"And bool [1,1,1,1025]", "And", {mask, mask}, nullptr});
  cases.push_back({"ReduceMean f32 [1,1,896] axes [-1] (RMS norm)", "ReduceMean",
                   {random_values(DType::kF32, Shape{1, 1, 896}, rng_, 0, 1)},
                   [](Node& n) { set_ints(n, "axes", {-1}); }});
  for (PerfCase& c : cases) {
    CudaNode spec(c.op, "", {true}, c.op == std::string("Where") ? 16 : 13);
    Node& node = spec.with_inputs(c.inputs);
    if (c.attrs) c.attrs(node);
    Result<double> us = time_node(node, c.inputs, *stream_);
    ASSERT_TRUE(us.is_ok()) << c.what << ": " << us.status().message();
    std::printf("  %s: %.2f us/run (CUDA graph replays), %.0f GB/s of input\n", c.what.c_str(), *us,
                static_cast<double>(c.inputs[0].nbytes()) / (*us * 1e3));
  }
}

}  // namespace
}  // namespace onnx_genai::testing
