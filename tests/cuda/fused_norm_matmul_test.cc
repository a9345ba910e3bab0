// onnx_genai RmsNormMatMulNBits (a load-time fusion of an RMS norm and the MatMulNBits or
// MatMulNBitsSwiGLU that reads it): the CUDA kernel against the CPU reference (which equals the
// unfused graph bit for bit, tests/runtime/fusion_passes_test.cc). M = 1, 2 and 9 rows that fit
// the GEMVs' norm prologue (16 KiB of normalised rows), 5 rows at K = 3584 that do not (the norm
// kernel into the workspace, then the GEMV) and 20 (the dense path); f16, bf16 and f32 (8-bit f32
// runs the CUDA-core kernel: no prologue); 4 and 8 bits, blocks of 32 and 128, packed zero points
// or none; skip and its sum output or no skip; the SwiGLU epilogue or none; every tensor-core
// variant at every forced split of K (the prologue's scratch and K ranges), and the CUDA-core
// kernel; capture in a CUDA graph, timed next to the two nodes it replaces.
// Both sides round the normalised rows to the dtype before the product (the CPU's statistics in
// f64 for 16-bit types without skip, the GPU's in f32, may round a row element the other way by
// one ulp), so the harness's tolerances hold.
#include <string>

#include "cuda_test_util.h"
#include "ops/cuda/quantized_matmul8_kernels.h"
#include "ops/cuda/quantized_matmul_kernels.h"

namespace onnx_genai::testing {
namespace {

struct NormCase {
  DType dtype;
  int64_t bits, m, k, n, block;  // n: the output width (with SwiGLU, B holds 2n interleaved rows)
  bool zero_points, skip, sum, swiglu;

  std::string describe() const {
    return std::string(dtype_name(dtype)) + " " + std::to_string(bits) + "-bit M=" + std::to_string(m) +
           " K=" + std::to_string(k) + " N=" + std::to_string(n) + " block=" + std::to_string(block) +
           (zero_points ? " packed zp" : " no zp") + (skip ? " skip" : "") + (sum ? " sum" : "") +
           (swiglu ? " SwiGLU" : "");
  }
};

// Plans made while it lives take `choice`, for 4- and 8-bit weights alike.
class ScopedChoices {
 public:
  explicit ScopedChoices(cuda::MatMulNBits4Choice choice) {
    cuda::set_matmul_nbits4_choice(choice);
    cuda::set_matmul_nbits8_choice(choice);
  }
  ~ScopedChoices() {
    cuda::set_matmul_nbits4_choice({});
    cuda::set_matmul_nbits8_choice({});
  }
  ScopedChoices(const ScopedChoices&) = delete;
  ScopedChoices& operator=(const ScopedChoices&) = delete;
};

class RmsNormMatMulNBitsCuda : public CudaKernelTest {
 protected:
  // x, skip (or none), gamma, B, scales (of both signs), zero points (or none).
  std::vector<Tensor> inputs(const NormCase& c) {
    const int64_t blocks = (c.k + c.block - 1) / c.block, rows = c.swiglu ? 2 * c.n : c.n;
    const float scale = c.bits == 8 ? 0.005f : 0.05f;
    std::vector<Tensor> in{random_float_tensor(c.dtype, Shape{c.m, c.k}, rng_, -2.0f, 2.0f),
                           c.skip ? random_float_tensor(c.dtype, Shape{c.m, c.k}, rng_, -2.0f, 2.0f) : Tensor(),
                           random_float_tensor(c.dtype, Shape{c.k}, rng_, 0.5f, 1.5f),
                           random_bytes(Shape{rows, blocks, c.block * c.bits / 8}, rng_),
                           random_float_tensor(c.dtype, Shape{rows * blocks}, rng_, -scale, scale)};
    if (c.zero_points) in.push_back(random_bytes(Shape{rows, (blocks * c.bits + 7) / 8}, rng_));
    return in;
  }

  // Y, and the sum where the case reads it.
  static std::vector<bool> outputs(const NormCase& c) {
    return c.sum ? std::vector<bool>{true, true} : std::vector<bool>{true};
  }

  static void set_attributes(CudaNode& node, const NormCase& c) {
    node.attr_int("K", c.k).attr_int("N", c.n).attr_int("bits", c.bits).attr_int("block_size", c.block);
    node.attr_int("swiglu", c.swiglu ? 1 : 0).attr_float("epsilon", 1e-6f);
  }

  void check(const NormCase& c) {
    CudaNode spec("RmsNormMatMulNBits", "onnx_genai", outputs(c));
    set_attributes(spec, c);
    const std::vector<Tensor> in = inputs(c);
    compare(spec.with_inputs(in), in, "RmsNormMatMulNBits " + c.describe());
  }
};

// Every (M, dtype, bits, skip, SwiGLU) once, the rest drawn.
TEST_F(RmsNormMatMulNBitsCuda, MatchesCpuOnRandomCases) {
  constexpr int64_t kMs[] = {1, 2, 5, 20};
  constexpr DType kDtypes[] = {DType::kF16, DType::kBF16, DType::kF32};
  constexpr int64_t kKs[] = {896, 3584};
  for (int trial = 0; trial < 96; ++trial) {
    NormCase c{};
    c.m = kMs[trial % 4];
    c.dtype = kDtypes[trial / 4 % 3];
    c.bits = trial / 12 % 2 == 0 ? 4 : 8;
    c.skip = trial / 24 % 2 == 0;
    c.swiglu = trial / 48 % 2 == 0;
    c.sum = c.skip && rng_() % 2 == 0;
    c.block = rng_() % 2 == 0 ? 32 : 128;
    c.zero_points = rng_() % 2 == 0;
    c.k = kKs[rng_() % 2];
    c.n = 2 * std::uniform_int_distribution<int64_t>(8, 160)(rng_);
    check(c);
  }
}

// Qwen2.5-0.5B's and 7B's projections after a norm at decode (q/k/v joined, gate/up with SwiGLU),
// a verify of 2 rows, and 9 rows at K = 896 (two tiles of activation rows in the prologue).
TEST_F(RmsNormMatMulNBitsCuda, MatchesCpuAtModelSizes) {
  for (const NormCase& c : {NormCase{DType::kF16, 4, 1, 896, 1152, 32, false, true, true, false},
                            NormCase{DType::kF16, 4, 1, 896, 4864, 32, false, true, false, true},
                            NormCase{DType::kBF16, 4, 1, 3584, 4608, 128, true, true, true, false},
                            NormCase{DType::kF16, 4, 1, 3584, 18944, 32, false, true, false, true},
                            NormCase{DType::kF16, 4, 2, 3584, 4608, 32, true, true, true, false},
                            NormCase{DType::kBF16, 4, 9, 896, 1152, 32, false, false, false, false},
                            NormCase{DType::kF16, 8, 1, 896, 1152, 32, false, true, true, false},
                            NormCase{DType::kBF16, 8, 2, 3584, 4608, 128, true, true, false, false},
                            NormCase{DType::kF16, 8, 9, 896, 4864, 32, false, true, true, true}}) {
    check(c);
  }
}

// The prologue on every tensor-core variant the plans can take (standard and deep ring, each
// forced split of K, uneven ranges included) and the CUDA-core kernel, which has none (the norm
// kernel runs first).
TEST_F(RmsNormMatMulNBitsCuda, EveryVariantMatchesCpu) {
  using K4 = cuda::MatMulNBits4Kernel;
  const NormCase cases[] = {NormCase{DType::kF16, 4, 1, 3584, 100, 32, false, true, true, false},
                            NormCase{DType::kBF16, 4, 2, 896, 52, 128, true, true, false, true},
                            NormCase{DType::kF16, 4, 9, 896, 40, 32, true, false, false, false},
                            NormCase{DType::kF32, 4, 1, 1024, 24, 128, false, true, true, false},
                            NormCase{DType::kF16, 8, 1, 3584, 36, 128, true, true, true, true},
                            NormCase{DType::kBF16, 8, 2, 896, 100, 32, false, false, false, false},
                            NormCase{DType::kF16, 8, 9, 896, 20, 32, false, true, false, true}};
  for (const K4 kernel : {K4::kTensorCore, K4::kTensorCoreDeep}) {
    for (const int splits : {0, 1, 2, 4, 8}) {
      const ScopedChoices choice({kernel, splits});
      for (const NormCase& c : cases) {
        SCOPED_TRACE("tensor-core variant " + std::to_string(static_cast<int>(kernel)) + ", K splits " +
                     std::to_string(splits));
        check(c);
      }
    }
  }
  const ScopedChoices cuda_core({K4::kCudaCore, 0});
  for (const NormCase& c : cases) check(c);
}

// The plans keep the prologue where the tensor-core GEMV runs and the rows fit 16 KiB (N below
// K: one row of a wider 8-bit projection runs on CUDA cores).
TEST_F(RmsNormMatMulNBitsCuda, PlansThePrologueWhereTheRowsFit) {
  const auto prologue = [](DType dtype, int bits, int64_t m, int64_t k, int64_t n = 512) {
    cuda::MatMulNBits4Args args;
    args.dtype = dtype;
    args.m = m, args.n = n, args.k = k, args.block_size = 32, args.blocks = (k + 31) / 32;
    args.constant_weights = true;
    args.norm_prologue = true;
    const Status status = bits == 8 ? cuda::plan_matmul_nbits8(args) : cuda::plan_matmul_nbits4(args);
    EXPECT_TRUE(status.is_ok()) << status.message();
    return args.norm_prologue;
  };
  for (const int bits : {4, 8}) {
    for (const DType dtype : {DType::kF16, DType::kBF16}) {
      EXPECT_TRUE(prologue(dtype, bits, 1, 3584)) << bits << "-bit";
      EXPECT_TRUE(prologue(dtype, bits, 2, 3584)) << bits << "-bit";
      EXPECT_FALSE(prologue(dtype, bits, 3, 3584)) << bits << "-bit: 21 KiB of rows";
      EXPECT_TRUE(prologue(dtype, bits, 9, 896)) << bits << "-bit";
      EXPECT_FALSE(prologue(dtype, bits, 1, 1000)) << bits << "-bit: K not whole quads, the CUDA-core kernel";
    }
  }
  // Qwen2.5-7B's interleaved gate/up rows take several waves of blocks, each normalising again.
  EXPECT_FALSE(prologue(DType::kF16, 4, 1, 3584, 2 * 18944)) << "a grid of several waves";
  EXPECT_TRUE(prologue(DType::kF32, 4, 1, 3584));
  EXPECT_FALSE(prologue(DType::kF32, 8, 1, 3584)) << "8-bit f32 runs on CUDA cores";
}

// run() is capture-safe (time_node records it as a CUDA graph), timed next to the norm and the
// product it replaces.
TEST_F(RmsNormMatMulNBitsCuda, RunsInACudaGraph) {
  for (const NormCase& c : {NormCase{DType::kF16, 4, 1, 896, 1152, 32, false, true, true, false},
                            NormCase{DType::kF16, 4, 1, 896, 4864, 32, false, true, true, true},
                            NormCase{DType::kF16, 4, 1, 3584, 4608, 32, false, true, true, false},
                            NormCase{DType::kF16, 4, 1, 3584, 18944, 32, false, true, true, true},
                            NormCase{DType::kBF16, 8, 1, 3584, 4608, 128, false, true, true, false},
                            NormCase{DType::kF16, 4, 8, 896, 1152, 32, false, true, true, false}}) {
    CudaNode fused("RmsNormMatMulNBits", "onnx_genai", outputs(c));
    set_attributes(fused, c);
    const std::vector<Tensor> in = inputs(c);
    const Result<double> us = time_node(fused.with_inputs(in), in, *stream_);
    ASSERT_TRUE(us.is_ok()) << c.describe() << ": " << us.status().message();
    // The two nodes it replaces: the Skip norm (outputs y and the sum), then the product of y.
    CudaNode norm("SkipSimplifiedLayerNormalization", "com.microsoft", {true, false, false, true});
    norm.attr_float("epsilon", 1e-6f);
    const std::vector<Tensor> norm_in{in[0], in[1], in[2]};
    const Result<double> norm_us = time_node(norm.with_inputs(norm_in), norm_in, *stream_);
    CudaNode product(c.swiglu ? "MatMulNBitsSwiGLU" : "MatMulNBits", c.swiglu ? "onnx_genai" : "com.microsoft", {true});
    product.attr_int("K", c.k).attr_int("N", c.n).attr_int("bits", c.bits).attr_int("block_size", c.block);
    const std::vector<Tensor> product_in{in[0], in[3], in[4]};
    const Result<double> product_us = time_node(product.with_inputs(product_in), product_in, *stream_);
    ASSERT_TRUE(norm_us.is_ok() && product_us.is_ok()) << norm_us.status().message() << product_us.status().message();
    std::printf("  RmsNormMatMulNBits %s: %.2f us (norm %.2f + product %.2f)\n", c.describe().c_str(), *us, *norm_us,
                *product_us);
  }
}

}  // namespace
}  // namespace onnx_genai::testing
