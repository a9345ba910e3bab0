// MatMulNBits (4-bit): CUDA kernels against the CPU kernel (accuracy_level 0: f32 arithmetic on
// both sides) on random M (1..16: the tensor-core kernel where K is whole quads of 128; 17 and
// 64: the dense path at these sizes, the many-row kernel where forced), K (including K not a multiple of the block, odd K: the CUDA-core
// kernel), N (odd too), block sizes (every layout of the tensor-core kernel: blocks of 16, 32,
// >= 64 bytes, with column classes and spread), dtypes, zero-point forms and bias; model-sized
// shapes that split K across warps; every kernel variant the benchmark can pick (the standard and
// the deep register ring, 128- or 256-byte L2 fetches, each at every forced split of K); the tiled
// int4 GEMM for batched steps in every tile, with guard bytes after the output; inputs both sides
// reject.
#include <string>

#include "cuda_test_util.h"
#include "plan_choice.h"
#include "ops/cuda/int4_gemm.h"
#include "ops/cuda/quantized_matmul_kernels.h"

namespace onnx_genai::testing {
namespace {

enum class ZeroPoints { kNone, kPacked, kFloat };

struct MatMulCase {
  DType dtype;
  int64_t m, k, n, block;
  ZeroPoints zp;
  bool bias;
  bool a_3d;  // A as [1, M, K] instead of [M, K]

  std::string describe() const {
    static const char* kZp[] = {"no zp", "packed zp", "float zp"};
    return std::string(dtype_name(dtype)) + " M=" + std::to_string(m) + " K=" + std::to_string(k) +
           " N=" + std::to_string(n) + " block=" + std::to_string(block) + " " + kZp[static_cast<int>(zp)] +
           (bias ? " bias" : "") + (a_3d ? " 3-D A" : "");
  }
};

class MatMulNBitsCuda : public CudaKernelTest {
 protected:
  // `guard`: also fail on a byte written past the output (run_on_cuda).
  void check(const MatMulCase& c, bool guard = false) {
    const int64_t blocks = (c.k + c.block - 1) / c.block;
    CudaNode spec("MatMulNBits", "com.microsoft", {true});
    spec.attr_int("K", c.k).attr_int("N", c.n).attr_int("bits", 4).attr_int("block_size", c.block);
    const Shape a_shape = c.a_3d ? Shape{1, c.m, c.k} : Shape{c.m, c.k};
    // Scales of both signs, as ONNX Runtime's quantiser produces them.
    std::vector<Tensor> inputs{random_float_tensor(c.dtype, a_shape, rng_), random_bytes(Shape{c.n, blocks, c.block / 2}, rng_),
                               random_float_tensor(c.dtype, Shape{c.n * blocks}, rng_, -0.05f, 0.05f)};
    if (c.zp == ZeroPoints::kPacked) inputs.push_back(random_bytes(Shape{c.n, (blocks + 1) / 2}, rng_));
    if (c.zp == ZeroPoints::kFloat) inputs.push_back(random_float_tensor(c.dtype, Shape{c.n * blocks}, rng_, 0.0f, 15.0f));
    if (c.bias) {
      if (c.zp == ZeroPoints::kNone) inputs.push_back(Tensor());
      inputs.push_back(Tensor());  // g_idx
      inputs.push_back(random_float_tensor(c.dtype, Shape{c.n}, rng_));
    }
    compare(spec.with_inputs(inputs), inputs, "MatMulNBits " + c.describe(), guard);
  }
};

TEST_F(MatMulNBitsCuda, MatchesCpuOnRandomCases) {
  constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
  constexpr int64_t kMs[] = {1, 2, 3, 5, 8, 13, 16, 17, 64};
  constexpr int64_t kBlocks[] = {16, 32, 64, 128, 256};
  constexpr int64_t kKs[] = {64, 896, 1024, 4096, 200, 1000, 33, 2056};
  for (int trial = 0; trial < 108; ++trial) {
    MatMulCase c;
    c.m = kMs[trial % 9];
    c.dtype = kDtypes[trial / 9 % 3];
    c.block = kBlocks[rng_() % 5];
    c.k = rng_() % 4 == 0 ? std::uniform_int_distribution<int64_t>(1, 3000)(rng_) : kKs[rng_() % std::size(kKs)];
    c.n = rng_() % 2 == 0 ? std::uniform_int_distribution<int64_t>(1, 300)(rng_) : 256 + rng_() % 2;
    c.zp = static_cast<ZeroPoints>(trial / 27 % 3);  // every (M, dtype, zero points) at least once
    c.bias = rng_() % 2 == 0;
    c.a_3d = trial % 7 == 0;
    check(c);
  }
}

// Decode-sized shapes on the tensor-core kernel: K split across the warps of a block (4096 x
// 4096, 4864 x 896, 896 x 1152 on an H200), column classes (M x blocks per quad <= 8: 4 classes
// at M <= 2 with 32-code blocks, 2 at M <= 4 with 64) and spread layouts, every zero-point form.
TEST_F(MatMulNBitsCuda, MatchesCpuAtModelSizes) {
  for (const MatMulCase& c : {MatMulCase{DType::kF16, 1, 4096, 4096, 32, ZeroPoints::kNone, false, true},
                              MatMulCase{DType::kF16, 2, 896, 1152, 32, ZeroPoints::kPacked, true, false},
                              MatMulCase{DType::kBF16, 1, 4864, 896, 32, ZeroPoints::kFloat, false, false},
                              MatMulCase{DType::kF32, 1, 1024, 640, 32, ZeroPoints::kPacked, false, false},
                              MatMulCase{DType::kF16, 4, 896, 4864, 64, ZeroPoints::kFloat, true, false},
                              MatMulCase{DType::kBF16, 3, 2048, 1000, 64, ZeroPoints::kPacked, false, false},
                              MatMulCase{DType::kF16, 1, 2048, 200, 256, ZeroPoints::kPacked, false, false},
                              MatMulCase{DType::kBF16, 8, 4096, 4096, 32, ZeroPoints::kPacked, true, false},
                              MatMulCase{DType::kBF16, 1, 896, 4864, 128, ZeroPoints::kPacked, true, false},
                              MatMulCase{DType::kF16, 16, 896, 1152, 32, ZeroPoints::kFloat, true, false},
                              MatMulCase{DType::kF16, 8, 4864, 896, 32, ZeroPoints::kPacked, false, false},
                              MatMulCase{DType::kF32, 3, 4864, 896, 64, ZeroPoints::kFloat, true, false},
                              MatMulCase{DType::kF32, 8, 4096, 1024, 128, ZeroPoints::kPacked, false, false},
                              MatMulCase{DType::kF16, 17, 2048, 512, 64, ZeroPoints::kFloat, true, false}}) {
    check(c);
  }
}

// Every variant of the tensor-core kernel: the standard and the deep ring, as planned and at each
// forced split of K (1, 2, 4, 8 warps; 28 and 7 quads split 8 ways unevenly, 1 quad leaves warps
// without any), on N not a multiple of the 16-row tile, ring tails (28 quads in a ring of 6),
// every layout, zero-point form and dtype (the deep form falls back to the standard kernel for
// f32, float zero points and M > 8, which still run here).
TEST_F(MatMulNBitsCuda, EveryVariantMatchesCpu) {
  using K4 = cuda::MatMulNBits4Kernel;
  const MatMulCase cases[] = {MatMulCase{DType::kF16, 1, 3584, 1000, 32, ZeroPoints::kNone, false, false},
                              MatMulCase{DType::kF16, 8, 3584, 203, 128, ZeroPoints::kPacked, true, false},
                              MatMulCase{DType::kBF16, 1, 896, 520, 32, ZeroPoints::kPacked, false, false},
                              MatMulCase{DType::kBF16, 5, 18944, 40, 64, ZeroPoints::kNone, true, false},
                              MatMulCase{DType::kF16, 2, 128, 77, 64, ZeroPoints::kNone, false, false},
                              MatMulCase{DType::kF16, 3, 1024, 300, 32, ZeroPoints::kFloat, false, false},
                              MatMulCase{DType::kF16, 6, 2048, 130, 32, ZeroPoints::kPacked, true, false},
                              MatMulCase{DType::kF32, 1, 3584, 100, 256, ZeroPoints::kPacked, false, false},
                              MatMulCase{DType::kBF16, 16, 896, 64, 128, ZeroPoints::kFloat, true, false},
                              MatMulCase{DType::kF16, 4, 1024, 48, 256, ZeroPoints::kPacked, false, false}};
  for (const K4 kernel : {K4::kTensorCore, K4::kTensorCoreDeep}) {
    for (const int splits : {0, 1, 2, 4, 8}) {
      const ScopedPlanChoice choice({kernel, splits});
      for (const MatMulCase& c : cases) {
        SCOPED_TRACE("tensor-core variant " + std::to_string(static_cast<int>(kernel)) + ", K splits " +
                     std::to_string(splits));
        check(c);
      }
    }
  }
}

// The many-row form (M = 17..64, f16 / bf16, no or packed zero points): every layout (blocks of
// 32 codes, 64, >= 128), a last activation tile part full, N not a multiple of the 16-row tile,
// one quad of K, bias, as planned and at every forced split of K.
TEST_F(MatMulNBitsCuda, ManyRowFormMatchesCpu) {
  const MatMulCase cases[] = {MatMulCase{DType::kF16, 17, 896, 1152, 32, ZeroPoints::kNone, false, false},
                              MatMulCase{DType::kBF16, 24, 1024, 300, 64, ZeroPoints::kPacked, true, false},
                              MatMulCase{DType::kF16, 33, 128, 50, 32, ZeroPoints::kPacked, true, false},
                              MatMulCase{DType::kBF16, 40, 3584, 203, 128, ZeroPoints::kNone, false, true},
                              MatMulCase{DType::kF16, 64, 2048, 130, 256, ZeroPoints::kPacked, false, false},
                              MatMulCase{DType::kF16, 64, 3584, 512, 32, ZeroPoints::kNone, true, false},
                              MatMulCase{DType::kBF16, 57, 896, 77, 32, ZeroPoints::kPacked, false, false}};
  for (const int splits : {0, 1, 2, 4, 8}) {
    const ScopedPlanChoice choice({cuda::MatMulNBits4Kernel::kTensorCore, splits});
    for (const MatMulCase& c : cases) {
      SCOPED_TRACE("K splits " + std::to_string(splits));
      check(c);
    }
  }
}

// The tiled int4 GEMM (int4_gemm.h), forced, with its reordered weights: f16 and bf16, blocks of
// 16 to 256 (a stage of 64 k meets 4, 2 or 1 blocks, or lies in one), no or packed zero points,
// bias, odd N (the copy pads it to 16 columns, tiles of 256 and 128 columns run past it), K whole
// stages of 64 (one stage; K = 960 with blocks of 128 ends in half a block), M = 17, 64 and 200
// (row tiles part full; 200 rows in two 128-row tiles or four 64-row ones) and small M, in every
// tile and at forced splits of K (3 splits of 15 stages unevenly; more splits than stages),
// with no byte written past the output.
TEST_F(MatMulNBitsCuda, Int4GemmMatchesCpu) {
  const MatMulCase cases[] = {MatMulCase{DType::kF16, 17, 960, 203, 32, ZeroPoints::kNone, true, false},
                              MatMulCase{DType::kBF16, 64, 1088, 77, 128, ZeroPoints::kPacked, false, false},
                              MatMulCase{DType::kF16, 200, 3584, 1000, 32, ZeroPoints::kPacked, true, false},
                              MatMulCase{DType::kBF16, 200, 896, 520, 32, ZeroPoints::kNone, false, true},
                              MatMulCase{DType::kF16, 33, 64, 16, 16, ZeroPoints::kNone, false, false},
                              MatMulCase{DType::kBF16, 17, 2048, 300, 64, ZeroPoints::kNone, true, false},
                              MatMulCase{DType::kF16, 64, 1024, 256, 256, ZeroPoints::kPacked, false, false},
                              MatMulCase{DType::kBF16, 5, 512, 40, 32, ZeroPoints::kNone, false, false},
                              MatMulCase{DType::kF16, 130, 960, 129, 128, ZeroPoints::kNone, true, false}};
  for (const int tile : {0, 1, 4, 5}) {
    for (const int splits : {0, 1, 3, 8}) {
      if (tile != 0 && splits == 3) continue;
      const ScopedPlanChoice choice({cuda::MatMulNBits4Kernel::kInt4Gemm, splits, true, tile});
      for (const MatMulCase& c : cases) {
        SCOPED_TRACE("int4 GEMM tile " + std::to_string(tile) + ", K splits " + std::to_string(splits));
        check(c, true);
      }
    }
  }
}

// What the int4 GEMM refuses, with its reason (those nodes keep the other paths).
TEST_F(MatMulNBitsCuda, Int4GemmSaysWhatItRefuses) {
  EXPECT_TRUE(cuda::int4_gemm_supports(DType::kF16, 203, 960, 32, 4, false).is_ok());
  EXPECT_TRUE(cuda::int4_gemm_supports(DType::kBF16, 77, 64, 256, 4, false).is_ok());
  EXPECT_FALSE(cuda::int4_gemm_supports(DType::kF32, 256, 1024, 32, 4, false).is_ok());
  EXPECT_FALSE(cuda::int4_gemm_supports(DType::kF16, 256, 1024, 32, 8, false).is_ok());
  EXPECT_FALSE(cuda::int4_gemm_supports(DType::kF16, 256, 1024, 32, 4, true).is_ok());
  EXPECT_FALSE(cuda::int4_gemm_supports(DType::kF16, 256, 1000, 32, 4, false).is_ok());
  EXPECT_FALSE(cuda::int4_gemm_supports(DType::kF16, 256, 1024, 512, 4, false).is_ok());
  // A refused node still runs (the many-row kernel or the dense path) when the GEMM is asked for.
  const ScopedPlanChoice choice({cuda::MatMulNBits4Kernel::kInt4Gemm, 0});
  check(MatMulCase{DType::kF16, 40, 1000, 100, 32, ZeroPoints::kNone, false, false}, true);
  check(MatMulCase{DType::kF32, 40, 1024, 100, 32, ZeroPoints::kPacked, true, false}, true);
  check(MatMulCase{DType::kBF16, 40, 1024, 100, 32, ZeroPoints::kFloat, false, false}, true);
}

// Where the op plans the int4 GEMM on its own (int4_gemm_pays, the rule from cuda_bench's rows in
// docs/STATUS.md): 16 rows of 7B-sized weights, 17-64 rows of any but the smallest, up to 128 of
// >= 12 million codes, up to 256 of tall-K ones; never under 16 rows or past 256. Host code: runs
// without a GPU.
TEST(MatMulNBitsInt4GemmRule, PlansWhereItMeasuredFaster) {
  EXPECT_FALSE(cuda::int4_gemm_pays(8, 18944, 3584));
  EXPECT_TRUE(cuda::int4_gemm_pays(16, 18944, 3584));
  EXPECT_FALSE(cuda::int4_gemm_pays(16, 3584, 3584));
  EXPECT_TRUE(cuda::int4_gemm_pays(32, 896, 4864));
  EXPECT_FALSE(cuda::int4_gemm_pays(64, 1152, 896));
  EXPECT_TRUE(cuda::int4_gemm_pays(128, 3584, 3584));
  EXPECT_FALSE(cuda::int4_gemm_pays(128, 4864, 896));
  EXPECT_TRUE(cuda::int4_gemm_pays(256, 3584, 18944));
  EXPECT_FALSE(cuda::int4_gemm_pays(256, 18944, 3584));
  EXPECT_FALSE(cuda::int4_gemm_pays(512, 3584, 18944));
}

// Which plans take the many-row kernel: up to 64 rows in f16 / bf16 without float zero points,
// where forced or where the planner's rule says it beats the dense path (weights of >= 16 million
// codes up to 32 rows, >= 32 million up to 64); else the tensor-core kernel ends at 16 rows.
TEST_F(MatMulNBitsCuda, PlansTheManyRowKernelWhereItPays) {
  const auto planned = [](DType dtype, int64_t m, int64_t n, bool float_zero_points, cuda::MatMulNBits4Choice choice) {
    cuda::MatMulNBits4Args args;
    args.dtype = dtype;
    args.m = m, args.n = n, args.k = 3584, args.block_size = 32, args.blocks = 3584 / 32;
    args.float_zero_points = float_zero_points;
    EXPECT_TRUE(cuda::plan_matmul_nbits4(args, choice).is_ok());
    EXPECT_EQ(args.many_rows, args.tensor_core && m > 16);
    return args.tensor_core;
  };
  const cuda::MatMulNBits4Choice automatic, forced{cuda::MatMulNBits4Kernel::kTensorCore, 0};
  EXPECT_TRUE(planned(DType::kF16, 64, 18944, false, automatic));
  EXPECT_TRUE(planned(DType::kBF16, 32, 4608, false, automatic));
  EXPECT_FALSE(planned(DType::kF16, 64, 4608, false, automatic));
  EXPECT_FALSE(planned(DType::kF16, 17, 512, false, automatic));
  EXPECT_TRUE(planned(DType::kF16, 64, 512, false, forced));
  EXPECT_FALSE(planned(DType::kF16, 65, 18944, false, forced));
  EXPECT_FALSE(planned(DType::kF16, 17, 18944, true, forced));
  EXPECT_FALSE(planned(DType::kF32, 17, 18944, false, forced));
  EXPECT_TRUE(planned(DType::kF32, 16, 512, false, automatic));
}

// The CUDA kernel runs what the CPU kernel runs: the shared validation rejects g_idx with the
// CPU's message (8-bit weights: quantized_matmul8_test.cc).
TEST_F(MatMulNBitsCuda, RejectsWhatItCannotRun) {
  const int64_t k = 64, n = 8, block = 32, blocks = 2;
  std::vector<Tensor> inputs{random_float_tensor(DType::kF16, Shape{1, k}, rng_),
                             random_bytes(Shape{n, blocks, block / 2}, rng_),
                             random_float_tensor(DType::kF16, Shape{n * blocks}, rng_), Tensor(),
                             Tensor::allocate(DType::kI32, Shape{k}).value()};
  CudaNode with_g_idx("MatMulNBits", "com.microsoft", {true});
  with_g_idx.attr_int("K", k).attr_int("N", n).attr_int("bits", 4).attr_int("block_size", block);
  const Node& node = with_g_idx.with_inputs(inputs);
  Result<PreparedNode> cpu = prepare_node(node, inputs, DeviceType::kCpu);
  Result<PreparedNode> gpu = prepare_node(node, inputs, DeviceType::kCuda);
  ASSERT_FALSE(cpu.is_ok());
  ASSERT_FALSE(gpu.is_ok());
  EXPECT_EQ(gpu.status().message(), cpu.status().message());
  EXPECT_NE(gpu.status().message().find("g_idx"), std::string::npos) << gpu.status().message();
}

}  // namespace
}  // namespace onnx_genai::testing
