// ArgMax / ArgMin and ReduceSum: CUDA kernels (ops/cuda/reduce.cc) against the CPU kernels on
// random shapes, axes (negative too), keepdims, select_last_index and every dtype each op
// registers; ties, NaN where the CPU kernel's result does not depend on its SIMD width, empty
// inputs, int32 wrap-around and bad inputs. Indices and integer sums must match exactly, float
// sums within cuda_test_util.h's tolerances (the two sides add in different orders). The perf
// test times the greedy-token argmax over a 152k vocabulary against copying that row to the host.
//
// Recipe for another reduce op: its CUDA kernel in reduce_kernels.cu (a pass over
// [outer, len, inner]), its registration in reduce.cc, and a random-case test below.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "core/cuda/cuda_check.h"
#include "cuda_test_util.h"

namespace onnx_genai::testing {
namespace {

constexpr DType kArgDtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64,
                                DType::kI8,  DType::kU8,  DType::kI32,  DType::kI64};
constexpr DType kSumDtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI32, DType::kI64};

// ---- Inputs ------------------------------------------------------------------------------------

void set_value(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kF32: t.data<float>()[i] = static_cast<float>(v); break;
    case DType::kF16: t.data<Float16>()[i] = Float16(static_cast<float>(v)); break;
    case DType::kBF16: t.data<BFloat16>()[i] = BFloat16(static_cast<float>(v)); break;
    case DType::kF64: t.data<double>()[i] = v; break;
    case DType::kI8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
    case DType::kU8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::kI64: t.data<int64_t>()[i] = static_cast<int64_t>(v); break;
    default: ADD_FAILURE() << "no test values for " << dtype_name(t.dtype());
  }
}


// With `tied`, whole numbers in [-4, 4] (unsigned: [0, 8]), so most lanes hold their extreme
// several times; else spread values: floats in +-float_range, integers over their whole 8-bit
// range or +-1000.
Tensor random_tensor(DType dtype, const Shape& shape, std::mt19937& rng, bool tied, double float_range = 1000) {
  Tensor t = Tensor::allocate(dtype, shape).value();
  std::uniform_real_distribution<double> unit(-1, 1);
  std::uniform_int_distribution<int> small(-4, 4), byte(-128, 127), wide(-1000, 1000);
  const bool bytes = dtype == DType::kI8 || dtype == DType::kU8;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = tied ? small(rng) : dtype_is_float(dtype) ? float_range * unit(rng) : bytes ? byte(rng) : wide(rng);
    if (dtype == DType::kU8) v += tied ? 4 : 128;
    set_value(t, i, v);
  }
  return t;
}

Tensor int_vector(DType dtype, const std::vector<int64_t>& values) {
  Tensor t = Tensor::allocate(dtype, Shape{static_cast<int64_t>(values.size())}).value();
  for (size_t i = 0; i < values.size(); ++i) set_value(t, static_cast<int64_t>(i), static_cast<double>(values[i]));
  return t;
}

// At most 2^18 elements, dims mostly small and odd (odd rows start off 16-byte boundaries).
Shape random_shape(std::mt19937& rng, int rank) {
  constexpr int64_t kDims[] = {1, 2, 3, 5, 7, 8, 16, 33, 100, 257, 1000};
  std::vector<int64_t> dims;
  int64_t numel = 1;
  for (int d = 0; d < rank; ++d) {
    int64_t dim = kDims[rng() % std::size(kDims)];
    while (numel * dim > (int64_t{1} << 18)) dim /= 2;
    dims.push_back(std::max<int64_t>(dim, 1));
    numel *= dims.back();
  }
  return Shape(std::move(dims));
}

void set_ints(Node& node, const std::string& name, std::vector<int64_t> values) {
  node.attrs.set(name, Attribute{.kind = Attribute::Kind::kInts, .ints = std::move(values)});
}

// ---- Comparison ---------------------------------------------------------------------------------

// Integer outputs equal; f64 within 1e-12 of the CPU's sum (relative to the outputs' scale).
void expect_equal_values(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::fabs(element(want, i)));
  int reported = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool same = false;
    const double g = element(got, i), w = element(want, i);
    if (want.dtype() == DType::kI64) {
      same = got.data<int64_t>()[i] == want.data<int64_t>()[i];
    } else {
      same = want.dtype() == DType::kF64 ? std::fabs(g - w) <= 1e-12 * scale : g == w;
    }
    if (!same && reported++ < 5) ADD_FAILURE() << what << ": element " << i << " cuda " << g << " cpu " << w;
  }
}

class ReduceCudaTest : public CudaKernelTest {
 protected:
  // f32 / f16 / bf16 outputs within the harness's tolerance, every other dtype as above.
  void compare_reduce(const Node& node, const std::vector<Tensor>& inputs, const std::string& what) {
    Result<std::vector<Tensor>> cpu = run_on_cpu(node, inputs);
    ASSERT_TRUE(cpu.is_ok()) << what << ": " << cpu.status().message();
    Result<std::vector<Tensor>> gpu = run_on_cuda(node, inputs, *stream_);
    ASSERT_TRUE(gpu.is_ok()) << what << ": " << gpu.status().message();
    const Tensor& want = (*cpu)[0];
    const Tensor& got = (*gpu)[0];
    const DType dtype = want.dtype();
    if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) return expect_equal_values(got, want, what);
    const double err = expect_close(got, want, tolerance_for(dtype), what);
    double& worst = worst_[dtype_name(dtype)];
    worst = std::max(worst, err);
  }
};

// ---- ArgMax / ArgMin ----------------------------------------------------------------------------

std::string arg_case(const char* op, DType dtype, const Shape& shape, int64_t axis, int64_t keepdims, int64_t last) {
  return std::string(op) + " " + std::string(dtype_name(dtype)) + " " + shape.to_string() + " axis " +
         std::to_string(axis) + " keepdims " + std::to_string(keepdims) + " last " + std::to_string(last);
}

CudaNode arg_node(const char* op, int64_t axis, int64_t keepdims, int64_t last) {
  CudaNode spec(op, "", {true}, 13);
  spec.attr_int("axis", axis).attr_int("keepdims", keepdims).attr_int("select_last_index", last);
  return spec;
}

using ArgReduceCuda = ReduceCudaTest;

TEST_F(ArgReduceCuda, MatchesCpuOnRandomCases) {
  for (int trial = 0; trial < 240; ++trial) {
    const DType dtype = kArgDtypes[trial % std::size(kArgDtypes)];
    const char* op = trial / 8 % 2 ? "ArgMin" : "ArgMax";
    const int rank = 1 + static_cast<int>(rng_() % 4);
    const Shape shape = random_shape(rng_, rank);
    const auto axis = static_cast<int64_t>(rng_() % (2 * rank)) - rank;  // [-rank, rank)
    const int64_t keepdims = rng_() % 2, last = trial / 16 % 2;
    const std::vector<Tensor> inputs{random_tensor(dtype, shape, rng_, /*tied=*/trial / 3 % 2 == 0)};
    CudaNode spec = arg_node(op, axis, keepdims, last);
    compare_reduce(spec.with_inputs(inputs), inputs, arg_case(op, dtype, shape, axis, keepdims, last));
  }
}

// Vocabulary-wide rows (the greedy token over [B, 1, vocab] logits), odd lengths (row starts off
// 16-byte boundaries), and the extreme value planted at 2 to 4 places far apart, so that the
// first / last index is decided between threads and between warps.
TEST_F(ArgReduceCuda, LongRowsBreakTiesAcrossThreads) {
  const Shape kShapes[] = {{1, 1, 151936}, {3, 151937}, {4, 1, 32000}, {2, 5, 1001}, {1, 17}};
  const DType kDtypes[] = {DType::kF16, DType::kBF16, DType::kF32, DType::kI8, DType::kI64};
  int trial = 0;
  for (const Shape& shape : kShapes) {
    for (const DType dtype : kDtypes) {
      for (const char* op : {"ArgMax", "ArgMin"}) {
        // Beyond every random value; int8's own extreme (which may then occur more often).
        const bool max = std::string(op) == "ArgMax";
        const double extreme = dtype == DType::kI8 ? (max ? 127 : -128) : (max ? 2000 : -2000);
        Tensor x = random_tensor(dtype, shape, rng_, /*tied=*/false);
        const int64_t len = shape[shape.rank() - 1], rows = shape.numel() / len;
        for (int64_t r = 0; r < rows; ++r) {
          const int copies = 2 + static_cast<int>(rng_() % 3);
          for (int c = 0; c < copies; ++c) set_value(x, r * len + static_cast<int64_t>(rng_() % len), extreme);
        }
        const int64_t last = trial++ % 2;
        CudaNode spec = arg_node(op, -1, 0, last);
        compare_reduce(spec.with_inputs({x}), {x}, arg_case(op, dtype, shape, -1, 0, last));
      }
    }
  }
}

// NaN as the CPU kernel treats it. Along a contiguous axis NaNs are skipped (an all-NaN row
// gives 0); NaNs go only where the CPU's f32 SIMD max surely overwrites them (from element 1 to
// 64 before the end of its unrolled loop: AVX-512 and AVX2 builds agree there). Along a strided
// axis the CPU compares from element 0, so a NaN there keeps index 0: placed anywhere.
TEST_F(ArgReduceCuda, NaNsAsTheCpuKernelTreatsThem) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
    for (const char* op : {"ArgMax", "ArgMin"}) {
      const double loser = std::string(op) == "ArgMax" ? -inf : inf;
      const int64_t rows = 6, len = 1000, safe_end = len / 64 * 64 - 64;
      Tensor x = random_tensor(dtype, Shape{rows, len}, rng_, /*tied=*/true);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < len; ++i) {
          if (r == 1) set_value(x, r * len + i, nan);  // every element NaN
          else if (r == 2) set_value(x, r * len + i, i >= 1 && i < safe_end && i % 7 == 3 ? nan : loser);
          else if (i >= 1 && i < safe_end && rng_() % 20 == 0) set_value(x, r * len + i, nan);
        }
      }
      const int64_t last = rng_() % 2;
      CudaNode rows_spec = arg_node(op, 1, 1, last);
      compare_reduce(rows_spec.with_inputs({x}), {x}, arg_case(op, dtype, x.shape(), 1, 1, last) + " with NaN rows");

      Tensor y = random_tensor(dtype, Shape{3, 50, 7}, rng_, /*tied=*/true);
      for (int64_t i = 0; i < y.numel(); ++i) {
        if (rng_() % 8 == 0) set_value(y, i, nan);
      }
      CudaNode lanes_spec = arg_node(op, -2, 0, last);
      compare_reduce(lanes_spec.with_inputs({y}), {y}, arg_case(op, dtype, y.shape(), -2, 0, last) + " with NaN lanes");
    }
  }
}

// ---- ReduceSum ----------------------------------------------------------------------------------

using ReduceSumCuda = ReduceCudaTest;

// Opset 13 (axes as an input, sometimes omitted or empty) and 11 (axes attribute), random axis
// subsets in random order and sign, keepdims and noop_with_empty_axes.
TEST_F(ReduceSumCuda, MatchesCpuOnRandomCases) {
  for (int trial = 0; trial < 240; ++trial) {
    const DType dtype = kSumDtypes[trial % std::size(kSumDtypes)];
    const int rank = 1 + static_cast<int>(rng_() % 4);
    const Shape shape = random_shape(rng_, rank);
    std::vector<int64_t> axes;
    for (int d = 0; d < rank; ++d) {
      if (rng_() % 2) axes.push_back(rng_() % 2 ? d : d - rank);
    }
    std::shuffle(axes.begin(), axes.end(), rng_);
    const bool axes_input = trial / 6 % 2 == 0;
    const int64_t keepdims = rng_() % 2, noop = axes.empty() ? rng_() % 2 : 0;
    CudaNode spec("ReduceSum", "", {true}, axes_input ? 13 : 11);
    spec.attr_int("keepdims", keepdims).attr_int("noop_with_empty_axes", noop);
    std::vector<Tensor> inputs{random_tensor(dtype, shape, rng_, /*tied=*/trial % 3 == 0, /*float_range=*/1)};
    if (axes_input && (!axes.empty() || rng_() % 2)) inputs.push_back(int_vector(DType::kI64, axes));
    Node& node = spec.with_inputs(inputs);
    if (!axes_input) set_ints(node, "axes", axes);
    std::string axes_text;
    for (const int64_t a : axes) axes_text += std::to_string(a) + ",";
    compare_reduce(node, inputs, "ReduceSum " + std::string(dtype_name(dtype)) + " " + shape.to_string() + " axes [" +
                                     axes_text + "] keepdims " + std::to_string(keepdims) + " noop " + std::to_string(noop));
  }
}

// Long rows, long strided columns, several passes (separated axes), GroupQueryAttention's
// seqlens (an int64 mask summed per row), empty inputs, and int32 sums that wrap.
TEST_F(ReduceSumCuda, LargeShapesEmptyInputsAndWrapAround) {
  struct Case {
    DType dtype;
    Shape shape;
    std::vector<int64_t> axes;
    int64_t keepdims;
  };
  const Case kCases[] = {
      {DType::kF32, {3, 100001}, {1}, 0},          {DType::kBF16, {2, 65536}, {-1}, 1},
      {DType::kF16, {40000, 3}, {0}, 0},           {DType::kF32, {5, 7, 300, 3}, {1, 3}, 1},
      {DType::kF64, {4, 6, 5, 9}, {0, 2}, 0},      {DType::kI64, {4, 4096}, {1}, 0},
      {DType::kI32, {8, 33, 2}, {0, 1, 2}, 0},     {DType::kF32, {0, 5}, {0}, 1},
      {DType::kI64, {3, 0}, {1}, 0},               {DType::kF16, {2, 0, 4}, {0, 2}, 1},
  };
  for (const Case& c : kCases) {
    Tensor x = random_tensor(c.dtype, c.shape, rng_, /*tied=*/false, /*float_range=*/1);
    if (c.shape == Shape{4, 4096}) {  // an attention mask: rows of ones, then zeros
      for (int64_t i = 0; i < x.numel(); ++i) set_value(x, i, i % 4096 < 1000 * (i / 4096 + 1) ? 1 : 0);
    }
    CudaNode spec("ReduceSum", "", {true}, 13);
    spec.attr_int("keepdims", c.keepdims);
    const std::vector<Tensor> inputs{x, int_vector(DType::kI64, c.axes)};
    const std::string what = "ReduceSum " + std::string(dtype_name(c.dtype)) + " " + c.shape.to_string();
    compare_reduce(spec.with_inputs(inputs), inputs, what);
  }
  Tensor big = Tensor::allocate(DType::kI32, Shape{2, 1000}).value();
  for (int64_t i = 0; i < big.numel(); ++i) {
    big.data<int32_t>()[i] = std::numeric_limits<int32_t>::max() - static_cast<int32_t>(i);
  }
  CudaNode spec("ReduceSum", "", {true}, 13);
  const std::vector<Tensor> inputs{big, int_vector(DType::kI64, {1})};
  compare_reduce(spec.with_inputs(inputs), inputs, "ReduceSum int32 wrapping past INT32_MAX");
}

// ---- Bad inputs (no device needed: they fail while preparing) -----------------------------------

// The CUDA side fails where the CPU side does, with the same message when the shared schema or
// parameter parsing rejects the node.
void expect_both_fail(CudaNode& spec, const std::vector<Tensor>& inputs, const std::string& want, bool same_message) {
  const Node& node = spec.with_inputs(inputs);
  Result<PreparedNode> cpu = prepare_node(node, inputs, DeviceType::kCpu);
  Result<PreparedNode> gpu = prepare_node(node, inputs, DeviceType::kCuda);
  ASSERT_FALSE(cpu.is_ok()) << want;
  ASSERT_FALSE(gpu.is_ok()) << want;
  EXPECT_NE(gpu.status().message().find(want), std::string::npos) << gpu.status().message();
  if (same_message) {
    EXPECT_EQ(gpu.status().message(), cpu.status().message());
  }
}

TEST(ReduceCudaErrors, BadInputsFailLikeTheCpu) {
  const Tensor x = Tensor::allocate(DType::kF32, Shape{3, 4}).value();
  {
    CudaNode spec = arg_node("ArgMax", 2, 1, 0);
    expect_both_fail(spec, {x}, "axis out of range", true);
  }
  {
    CudaNode spec = arg_node("ArgMin", -3, 0, 0);
    expect_both_fail(spec, {x}, "axis out of range", true);
  }
  {
    CudaNode spec = arg_node("ArgMax", 1, 1, 0);
    expect_both_fail(spec, {Tensor::allocate(DType::kF16, Shape{3, 0}).value()}, "empty axis", true);
  }
  {
    CudaNode spec = arg_node("ArgMax", 0, 1, 0);
    expect_both_fail(spec, {Tensor::allocate(DType::kBool, Shape{3}).value()}, "ArgMax", false);
  }
  {
    CudaNode spec("ReduceSum", "", {true}, 13);
    expect_both_fail(spec, {x, int_vector(DType::kI64, {1, -1})}, "repeated", true);
  }
  {
    CudaNode spec("ReduceSum", "", {true}, 13);
    expect_both_fail(spec, {x, int_vector(DType::kI64, {2})}, "out of range", true);
  }
  {
    CudaNode spec("ReduceSum", "", {true}, 13);
    const Tensor float_axes = Tensor::allocate(DType::kF32, Shape{1}).value();
    expect_both_fail(spec, {x, float_axes}, "axes input must be a 1-D integer tensor", true);
  }
  {
    CudaNode spec("ReduceSum", "", {true}, 11);
    Node& node = spec.with_inputs({x});
    set_ints(node, "axes", {0, 5});
    Result<PreparedNode> gpu = prepare_node(node, {x}, DeviceType::kCuda);
    ASSERT_FALSE(gpu.is_ok());
    EXPECT_NE(gpu.status().message().find("out of range"), std::string::npos) << gpu.status().message();
  }
  {
    CudaNode spec("ReduceSum", "", {true}, 13);
    expect_both_fail(spec, {Tensor::allocate(DType::kI8, Shape{3}).value()}, "ReduceSum", false);
  }
}

// ---- Timing --------------------------------------------------------------------------------------

// Microseconds per device-to-pinned-host copy of `bytes` (what a host-side argmax pays first).
Result<double> time_download(size_t bytes, const cuda::Stream& stream) {
  OG_ASSIGN_OR_RETURN(cuda::DeviceBuffer device, cuda::DeviceBuffer::allocate(bytes));
  Allocator& pinned = cuda::pinned_host_allocator();
  void* host = pinned.allocate(bytes);
  if (host == nullptr) return OG_ERROR("no pinned host memory");
  constexpr int kCopies = 200;
  Status status = cuda::copy_to_host(host, device.data(), bytes, stream.handle());
  if (status.is_ok()) status = stream.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; status.is_ok() && i < kCopies; ++i) {
    status = cuda::copy_to_host(host, device.data(), bytes, stream.handle());
    if (status.is_ok()) status = stream.synchronize();  // the host waits for each row to read it
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kCopies;
  pinned.deallocate(host);
  OG_RETURN_IF_ERROR(status);
  return us;
}

using ReducePerfCuda = ReduceCudaTest;

// Not a pass / fail check: prints times for gpu-check's log.
TEST_F(ReducePerfCuda, PrintsGreedyTokenAndSeqlensTimes) {
  constexpr int64_t kVocab = 151936;
  struct PerfCase {
    std::string what;
    DType dtype;
    Shape shape;
  };
  const PerfCase kArgCases[] = {{"ArgMax f16 [1,1,151936] (greedy token)", DType::kF16, {1, 1, kVocab}},
                                {"ArgMax f16 [8,1,151936]", DType::kF16, {8, 1, kVocab}},
                                {"ArgMax bf16 [1,1,151936]", DType::kBF16, {1, 1, kVocab}},
                                {"ArgMax f32 [1,1,151936]", DType::kF32, {1, 1, kVocab}}};
  for (const PerfCase& c : kArgCases) {
    const std::vector<Tensor> inputs{random_tensor(c.dtype, c.shape, rng_, /*tied=*/false)};
    CudaNode spec = arg_node("ArgMax", -1, 0, 0);
    Result<double> us = time_node(spec.with_inputs(inputs), inputs, *stream_);
    ASSERT_TRUE(us.is_ok()) << c.what << ": " << us.status().message();
    std::printf("  %s: %.2f us/run (CUDA graph replays), %.0f GB/s\n", c.what.c_str(), *us,
                static_cast<double>(inputs[0].nbytes()) / (*us * 1e3));
  }
  Result<double> copy_us = time_download(static_cast<size_t>(kVocab * 2), *stream_);
  ASSERT_TRUE(copy_us.is_ok()) << copy_us.status().message();
  std::printf("  host path instead: copy of one f16 [151936] logits row to pinned memory: %.2f us "
              "(host-timed, synchronised)\n",
              *copy_us);
  Tensor mask = Tensor::allocate(DType::kI64, Shape{1, 4096}).value();
  const std::vector<Tensor> inputs{mask, int_vector(DType::kI64, {1})};
  CudaNode spec("ReduceSum", "", {true}, 13);
  spec.attr_int("keepdims", 0);
  Result<double> us = time_node(spec.with_inputs(inputs), inputs, *stream_);
  ASSERT_TRUE(us.is_ok()) << us.status().message();
  std::printf("  ReduceSum int64 [1,4096] axes [1] (seqlens_k): %.2f us/run (CUDA graph replays)\n", *us);
}

}  // namespace
}  // namespace onnx_genai::testing
