// MatMulNBits with 8-bit weights, and MatMulNBitsSwiGLU over them: the CUDA kernels against the
// CPU kernels (accuracy_level 0: f32 arithmetic on both sides) on random M (1..16: the GEMV; 17
// and 64: the dense product), K (multiples of 64: the tensor-core GEMV for f16 / bf16; others,
// including K not a multiple of the block, and f32: the CUDA-core one), N (odd too), block sizes
// 16..256 (every layout of the tensor-core kernel: blocks spanning quads, 32- and 16-code blocks
// spread over a group's lanes), dtypes, zero-point forms (none: 128; one byte per block; floats)
// and bias; 7B-sized shapes; every kernel variant the benchmark can pick (CUDA-core; the standard
// and the deep register ring at every forced split of K); the plan's choice of kernel; capture
// in a CUDA graph.
#include <string>
#include <utility>

#include "cuda_test_util.h"
#include "ops/cuda/quantized_matmul8_kernels.h"

namespace onnx_genai::testing {
namespace {

enum class ZeroPoints { kNone, kPacked, kFloat };

struct Case8 {
  DType dtype;
  int64_t m, k, n, block;  // MatMulNBitsSwiGLU: n is the output width (B holds 2n interleaved rows)
  ZeroPoints zp;
  bool bias;
  bool a_3d = false;  // A as [1, M, K] instead of [M, K]

  std::string describe() const {
    static const char* kZp[] = {"no zp", "packed zp", "float zp"};
    return std::string(dtype_name(dtype)) + " M=" + std::to_string(m) + " K=" + std::to_string(k) +
           " N=" + std::to_string(n) + " block=" + std::to_string(block) + " " + kZp[static_cast<int>(zp)] +
           (bias ? " bias" : "") + (a_3d ? " 3-D A" : "");
  }
};

// Plans made while it lives take `choice` (the op plans with the default choice).
class ScopedPlanChoice8 {
 public:
  explicit ScopedPlanChoice8(cuda::MatMulNBits4Choice choice) { cuda::set_matmul_nbits8_choice(choice); }
  ~ScopedPlanChoice8() { cuda::set_matmul_nbits8_choice({}); }
  ScopedPlanChoice8(const ScopedPlanChoice8&) = delete;
  ScopedPlanChoice8& operator=(const ScopedPlanChoice8&) = delete;
};

class MatMulNBits8Cuda : public CudaKernelTest {
 protected:
  // A, B, scales (of both signs, as ONNX Runtime's quantiser makes them), zero points, bias for
  // `rows` rows of B.
  std::vector<Tensor> inputs(const Case8& c, int64_t rows) {
    const int64_t blocks = (c.k + c.block - 1) / c.block;
    const Shape a_shape = c.a_3d ? Shape{1, c.m, c.k} : Shape{c.m, c.k};
    std::vector<Tensor> in{random_float_tensor(c.dtype, a_shape, rng_),
                           random_bytes(Shape{rows, blocks, c.block}, rng_),
                           random_float_tensor(c.dtype, Shape{rows * blocks}, rng_, -0.005f, 0.005f)};
    if (c.zp == ZeroPoints::kPacked) in.push_back(random_bytes(Shape{rows, blocks}, rng_));
    if (c.zp == ZeroPoints::kFloat) {
      in.push_back(random_float_tensor(c.dtype, Shape{rows * blocks}, rng_, 0.0f, 255.0f));
    }
    if (c.bias) {
      if (c.zp == ZeroPoints::kNone) in.push_back(Tensor());
      in.push_back(Tensor());  // g_idx
      in.push_back(random_float_tensor(c.dtype, Shape{rows}, rng_));
    }
    return in;
  }

  static void set_attributes(CudaNode& node, int64_t k, int64_t n, int64_t block) {
    node.attr_int("K", k).attr_int("N", n).attr_int("bits", 8).attr_int("block_size", block);
  }

  void check(const Case8& c) {
    CudaNode spec("MatMulNBits", "com.microsoft", {true});
    set_attributes(spec, c.k, c.n, c.block);
    const std::vector<Tensor> in = inputs(c, c.n);
    compare(spec.with_inputs(in), in, "MatMulNBits 8-bit " + c.describe());
  }

  void check_swiglu(const Case8& c) {
    CudaNode spec("MatMulNBitsSwiGLU", "onnx_genai", {true});
    set_attributes(spec, c.k, c.n, c.block);
    const std::vector<Tensor> in = inputs(c, 2 * c.n);
    compare(spec.with_inputs(in), in, "MatMulNBitsSwiGLU 8-bit " + c.describe());
  }
};

TEST_F(MatMulNBits8Cuda, MatchesCpuOnRandomCases) {
  constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
  constexpr int64_t kMs[] = {1, 2, 5, 8, 16, 17, 64};
  constexpr int64_t kBlocks[] = {16, 32, 64, 128, 256};
  constexpr int64_t kKs[] = {64, 128, 896, 1024, 3584, 200, 1000, 33, 2056, 80};
  for (int trial = 0; trial < 126; ++trial) {
    Case8 c;
    c.m = kMs[trial % 7];
    c.dtype = kDtypes[trial / 7 % 3];
    c.zp = static_cast<ZeroPoints>(trial / 21 % 3);  // every (M, dtype, zero points) twice
    c.block = kBlocks[rng_() % 5];
    c.k = rng_() % 4 == 0 ? std::uniform_int_distribution<int64_t>(1, 3000)(rng_) : kKs[rng_() % std::size(kKs)];
    c.n = rng_() % 2 == 0 ? std::uniform_int_distribution<int64_t>(1, 300)(rng_) : 256 + rng_() % 2;
    c.bias = rng_() % 2 == 0;
    c.a_3d = trial % 5 == 0;
    check(c);
  }
}

// Qwen2.5-7B's projections (q+k+v 3584 x 4608, o 3584 x 3584, gate/up 3584 x 18944, down
// 18944 x 3584) and Llama-3-8B's 4096 x 4096 at decode, verify and prompt sizes: K split across
// warps, both rings as planned, every block layout and zero-point form.
TEST_F(MatMulNBits8Cuda, MatchesCpuAtModelSizes) {
  for (const Case8& c : {Case8{DType::kF16, 1, 3584, 18944, 32, ZeroPoints::kNone, false},
                         Case8{DType::kBF16, 1, 18944, 3584, 32, ZeroPoints::kPacked, false},
                         Case8{DType::kF16, 8, 4096, 4096, 128, ZeroPoints::kFloat, true},
                         Case8{DType::kBF16, 16, 3584, 4608, 16, ZeroPoints::kPacked, true},
                         Case8{DType::kF16, 1, 4096, 4096, 16, ZeroPoints::kFloat, false},
                         Case8{DType::kBF16, 4, 3584, 3584, 64, ZeroPoints::kNone, true},
                         Case8{DType::kF16, 2, 18944, 3584, 256, ZeroPoints::kPacked, false},
                         Case8{DType::kF32, 1, 3584, 3584, 32, ZeroPoints::kNone, false},
                         Case8{DType::kF16, 17, 3584, 3584, 32, ZeroPoints::kPacked, true}}) {
    check(c);
  }
}

// Every kernel the plan can be made to take: the CUDA-core one, and the tensor-core one with the
// standard and the deep ring, as planned and at each forced split of K (1, 2, 4, 8 warps: 56,
// 28 and 7 quads split unevenly, 1 quad leaves warps without any), on N not a multiple of the
// 16-row tile, ring tails, every block layout, zero-point form and dtype (the deep ring falls
// back to the standard one for float zero points and M > 8, the tensor-core kernel to the
// CUDA-core one for f32 and K not a multiple of 64).
TEST_F(MatMulNBits8Cuda, EveryVariantMatchesCpu) {
  using K4 = cuda::MatMulNBits4Kernel;
  const Case8 cases[] = {Case8{DType::kF16, 1, 3584, 1000, 32, ZeroPoints::kNone, false},
                         Case8{DType::kF16, 8, 1792, 203, 128, ZeroPoints::kPacked, true},
                         Case8{DType::kBF16, 1, 448, 520, 16, ZeroPoints::kPacked, false},
                         Case8{DType::kBF16, 5, 3584, 40, 64, ZeroPoints::kNone, true},
                         Case8{DType::kF16, 2, 64, 77, 64, ZeroPoints::kNone, false},
                         Case8{DType::kF16, 3, 1024, 300, 16, ZeroPoints::kFloat, false},
                         Case8{DType::kBF16, 12, 2048, 130, 32, ZeroPoints::kPacked, true},
                         Case8{DType::kBF16, 16, 896, 64, 256, ZeroPoints::kFloat, true},
                         Case8{DType::kF32, 4, 1024, 48, 32, ZeroPoints::kPacked, false},
                         Case8{DType::kF16, 6, 1000, 33, 16, ZeroPoints::kPacked, true}};
  const auto run_cases = [&](const std::string& variant) {
    for (const Case8& c : cases) {
      SCOPED_TRACE(variant);
      check(c);
    }
  };
  {
    const ScopedPlanChoice8 choice({K4::kCudaCore, 0});
    run_cases("CUDA-core kernel");
  }
  for (const K4 kernel : {K4::kTensorCore, K4::kTensorCoreDeep}) {
    for (const int splits : {0, 1, 2, 4, 8}) {
      const ScopedPlanChoice8 choice({kernel, splits});
      run_cases("tensor-core variant " + std::to_string(static_cast<int>(kernel)) + ", K splits " +
                std::to_string(splits));
    }
  }
}

// The SwiGLU epilogue with 8-bit weights: the GEMVs' (tensor-core, K split or not; CUDA-core for
// f32 and K = 1000) and the dense product's (M = 17, 33), every zero-point form and dtype.
TEST_F(MatMulNBits8Cuda, SwiGLUMatchesCpu) {
  for (const Case8& c : {Case8{DType::kF16, 1, 896, 4864, 32, ZeroPoints::kNone, false},
                         Case8{DType::kBF16, 1, 3584, 18944, 128, ZeroPoints::kPacked, true},
                         Case8{DType::kF16, 5, 896, 100, 16, ZeroPoints::kFloat, true},
                         Case8{DType::kBF16, 16, 1024, 96, 64, ZeroPoints::kNone, false},
                         Case8{DType::kF32, 2, 896, 640, 32, ZeroPoints::kPacked, true},
                         Case8{DType::kF16, 8, 1000, 50, 32, ZeroPoints::kPacked, false},
                         Case8{DType::kBF16, 17, 896, 300, 32, ZeroPoints::kFloat, true},
                         Case8{DType::kF16, 33, 1024, 128, 128, ZeroPoints::kNone, true}}) {
    check_swiglu(c);
  }
  for (const int splits : {1, 8}) {
    const ScopedPlanChoice8 choice({cuda::MatMulNBits4Kernel::kAuto, splits});
    check_swiglu(Case8{DType::kBF16, 3, 1792, 72, 32, ZeroPoints::kPacked, true});
  }
}

// Decoder shapes with f16 / bf16 activations plan the tensor-core kernel (what the benchmark
// measures); f32 and K not a multiple of 64 plan the CUDA-core one.
TEST_F(MatMulNBits8Cuda, PlansItsKernelsForDecoderShapes) {
  const auto planned = [](DType dtype, int64_t m, int64_t k, int64_t n, int64_t block) {
    cuda::MatMulNBits4Args args;
    args.dtype = dtype;
    args.m = m, args.n = n, args.k = k, args.block_size = block, args.blocks = (k + block - 1) / block;
    args.constant_weights = true;
    const Status status = cuda::plan_matmul_nbits8(args);
    EXPECT_TRUE(status.is_ok()) << status.message();
    return args;
  };
  const std::pair<int64_t, int64_t> kShapes[] = {{3584, 18944}, {18944, 3584}, {4096, 4096}};  // K, N
  for (const DType dtype : {DType::kF16, DType::kBF16}) {
    for (const int64_t m : {1, 8, 16}) {
      for (const auto& [k, n] : kShapes) {
        const cuda::MatMulNBits4Args args = planned(dtype, m, k, n, 32);
        // One row of a wide projection streams faster on the CUDA-core kernel.
        EXPECT_EQ(args.tensor_core, m > 1 || n <= k) << dtype_name(dtype) << " M=" << m << " K=" << k << " N=" << n;
        EXPECT_GE(args.block_k_splits, 1);
      }
    }
  }
  EXPECT_FALSE(planned(DType::kF32, 1, 4096, 4096, 32).tensor_core);
  EXPECT_FALSE(planned(DType::kF16, 1, 1000, 4096, 32).tensor_core);
}

// run() is capture-safe at decode and verify sizes (time_node records it as a CUDA graph; its
// inputs have no gaps: no omitted optional input before the last).
TEST_F(MatMulNBits8Cuda, RunsInACudaGraph) {
  for (const Case8& c : {Case8{DType::kF16, 1, 3584, 4608, 32, ZeroPoints::kNone, false},
                         Case8{DType::kBF16, 8, 3584, 4608, 32, ZeroPoints::kPacked, false},
                         Case8{DType::kF32, 1, 1000, 300, 32, ZeroPoints::kFloat, false}}) {
    CudaNode spec("MatMulNBits", "com.microsoft", {true});
    set_attributes(spec, c.k, c.n, c.block);
    const std::vector<Tensor> in = inputs(c, c.n);
    const Result<double> us = time_node(spec.with_inputs(in), in, *stream_);
    ASSERT_TRUE(us.is_ok()) << c.describe() << ": " << us.status().message();
    std::printf("  MatMulNBits 8-bit %s: %.2f us\n", c.describe().c_str(), *us);
  }
}

}  // namespace
}  // namespace onnx_genai::testing
