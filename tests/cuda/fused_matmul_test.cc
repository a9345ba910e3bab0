// onnx_genai MatMulNBitsSwiGLU (a load-time fusion of a decoder MLP's gate, up and SwiGLU): the
// CUDA kernels against the CPU reference, on M = 1 .. 16 (the GEMV kernels with the SwiGLU
// epilogue: the tensor-core one, with and without K split across warps, every split reducing
// before the epilogue; the CUDA-core one where K is not whole quads of 128 or blocks are 16) and
// M = 17, 33, 64 (the dense product, then the epilogue on its own), every dtype, zero-point form
// and bias; every tensor-core variant (standard or deep register ring, 128- or 256-byte L2
// fetches, every forced split of K); inputs both sides reject.
// Both sides round gate and up to the dtype before silu(gate) * up, so the harness's
// tolerances hold.
#include <string>

#include "cuda_test_util.h"
#include "plan_choice.h"
#include "ops/cuda/quantized_matmul_kernels.h"

namespace onnx_genai::testing {
namespace {

enum class ZeroPoints { kNone, kPacked, kFloat };

struct SwiGLUCase {
  DType dtype;
  int64_t m, k, n, block;  // n: the output width (B holds 2n interleaved rows)
  ZeroPoints zp;
  bool bias;

  std::string describe() const {
    static const char* kZp[] = {"no zp", "packed zp", "float zp"};
    return std::string(dtype_name(dtype)) + " M=" + std::to_string(m) + " K=" + std::to_string(k) +
           " N=" + std::to_string(n) + " block=" + std::to_string(block) + " " + kZp[static_cast<int>(zp)] +
           (bias ? " bias" : "");
  }
};

class MatMulNBitsSwiGLUCuda : public CudaKernelTest {
 protected:
  static void set_attributes(CudaNode& node, int64_t k, int64_t n, int64_t block) {
    node.attr_int("K", k).attr_int("N", n).attr_int("bits", 4).attr_int("block_size", block);
  }

  std::vector<Tensor> inputs(const SwiGLUCase& c) {
    const int64_t blocks = (c.k + c.block - 1) / c.block, rows = 2 * c.n;
    // Scales of both signs, as ONNX Runtime's quantiser produces them.
    std::vector<Tensor> in{random_float_tensor(c.dtype, Shape{c.m, c.k}, rng_, -2.0f, 2.0f),
                           random_bytes(Shape{rows, blocks, c.block / 2}, rng_),
                           random_float_tensor(c.dtype, Shape{rows * blocks}, rng_, -0.05f, 0.05f)};
    if (c.zp == ZeroPoints::kPacked) in.push_back(random_bytes(Shape{rows, (blocks + 1) / 2}, rng_));
    if (c.zp == ZeroPoints::kFloat) in.push_back(random_float_tensor(c.dtype, Shape{rows * blocks}, rng_, 0.0f, 15.0f));
    if (c.bias) {
      if (c.zp == ZeroPoints::kNone) in.push_back(Tensor());
      in.push_back(Tensor());  // g_idx
      in.push_back(random_float_tensor(c.dtype, Shape{rows}, rng_));
    }
    return in;
  }

  void check(const SwiGLUCase& c) {
    CudaNode node("MatMulNBitsSwiGLU", "onnx_genai", {true});
    set_attributes(node, c.k, c.n, c.block);
    const std::vector<Tensor> in = inputs(c);
    compare(node.with_inputs(in), in, "MatMulNBitsSwiGLU " + c.describe());
  }
};

TEST_F(MatMulNBitsSwiGLUCuda, MatchesCpuOnRandomCases) {
  constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
  constexpr int64_t kMs[] = {1, 4, 8, 16, 17, 64};
  constexpr int64_t kBlocks[] = {16, 32, 64, 128};
  constexpr int64_t kKs[] = {64, 256, 896, 1000, 200};
  for (int trial = 0; trial < 54; ++trial) {
    SwiGLUCase c;
    c.m = kMs[trial % 6];
    c.dtype = kDtypes[trial / 6 % 3];
    c.zp = static_cast<ZeroPoints>(trial / 18 % 3);  // every (M, dtype, zero points) once
    c.block = kBlocks[rng_() % 4];
    c.k = kKs[rng_() % 5];
    c.n = rng_() % 2 == 0 ? std::uniform_int_distribution<int64_t>(1, 100)(rng_) : 128;
    c.bias = rng_() % 2 == 0;
    check(c);
  }
}

// Qwen2.5-0.5B's and 7B's MLP at decode and small batches: K split across warps (896 x 2 x 4864
// at M = 1 on an H200), spread layouts (M > 2 with 32-code blocks), both kernels.
TEST_F(MatMulNBitsSwiGLUCuda, MatchesCpuAtModelSizes) {
  for (const SwiGLUCase& c : {SwiGLUCase{DType::kF16, 1, 896, 4864, 32, ZeroPoints::kNone, false},
                              SwiGLUCase{DType::kF16, 1, 3584, 18944, 128, ZeroPoints::kPacked, false},
                              SwiGLUCase{DType::kBF16, 4, 896, 4864, 32, ZeroPoints::kPacked, true},
                              SwiGLUCase{DType::kF16, 16, 896, 4864, 64, ZeroPoints::kFloat, false},
                              SwiGLUCase{DType::kF32, 2, 896, 640, 32, ZeroPoints::kNone, true},
                              SwiGLUCase{DType::kF16, 8, 1024, 96, 32, ZeroPoints::kPacked, true},
                              SwiGLUCase{DType::kBF16, 33, 896, 1000, 32, ZeroPoints::kNone, true}}) {
    check(c);
  }
}

// The SwiGLU epilogue after every variant of the tensor-core kernel: both rings, as planned and
// at each forced split of K (uneven: 28 quads 8 ways), 2N rows not a multiple of the tile,
// every zero-point form and dtype (the deep ring falls back for f32, float zero points, M > 8),
// and the many-row form (33 rows on one quad of K, 64 rows).
TEST_F(MatMulNBitsSwiGLUCuda, EveryVariantMatchesCpu) {
  using K4 = cuda::MatMulNBits4Kernel;
  const SwiGLUCase cases[] = {SwiGLUCase{DType::kF16, 1, 3584, 100, 32, ZeroPoints::kNone, false},
                              SwiGLUCase{DType::kF16, 8, 896, 52, 128, ZeroPoints::kPacked, true},
                              SwiGLUCase{DType::kBF16, 1, 3584, 36, 64, ZeroPoints::kPacked, true},
                              SwiGLUCase{DType::kBF16, 4, 1024, 20, 32, ZeroPoints::kNone, false},
                              SwiGLUCase{DType::kF16, 16, 896, 40, 32, ZeroPoints::kFloat, true},
                              SwiGLUCase{DType::kF32, 2, 2048, 24, 128, ZeroPoints::kPacked, false},
                              SwiGLUCase{DType::kF16, 33, 128, 25, 32, ZeroPoints::kPacked, true},
                              SwiGLUCase{DType::kBF16, 64, 3584, 60, 64, ZeroPoints::kNone, false}};
  for (const K4 kernel : {K4::kTensorCore, K4::kTensorCoreDeep}) {
    for (const int splits : {0, 1, 2, 4, 8}) {
      const ScopedPlanChoice choice({kernel, splits});
      for (const SwiGLUCase& c : cases) {
        SCOPED_TRACE("tensor-core variant " + std::to_string(static_cast<int>(kernel)) + ", K splits " +
                     std::to_string(splits));
        check(c);
      }
    }
  }
}

// Shared validation: a B that does not hold 2N rows is rejected by both sides with the same
// message, naming the fused node (8-bit weights: quantized_matmul8_test.cc).
TEST_F(MatMulNBitsSwiGLUCuda, RejectsWhatItCannotRun) {
  const int64_t k = 64, n = 8, block = 32, blocks = 2;
  std::vector<Tensor> in{random_float_tensor(DType::kF16, Shape{1, k}, rng_),
                         random_bytes(Shape{n, blocks, block / 2}, rng_),  // N rows, not 2N
                         random_float_tensor(DType::kF16, Shape{n * blocks}, rng_)};
  CudaNode half_rows("MatMulNBitsSwiGLU", "onnx_genai", {true});
  set_attributes(half_rows, k, n, block);
  const Node& node = half_rows.with_inputs(in);
  Result<PreparedNode> cpu = prepare_node(node, in, DeviceType::kCpu);
  Result<PreparedNode> gpu = prepare_node(node, in, DeviceType::kCuda);
  ASSERT_FALSE(cpu.is_ok());
  ASSERT_FALSE(gpu.is_ok());
  EXPECT_EQ(gpu.status().message(), cpu.status().message());
  EXPECT_NE(gpu.status().message().find(node.describe()), std::string::npos) << gpu.status().message();
}

}  // namespace
}  // namespace onnx_genai::testing
