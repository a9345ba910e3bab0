// MatMulNBits (4-bit): CUDA kernel against the CPU kernel (accuracy_level 0: f32 arithmetic on
// both sides) on random M, K (including K not a multiple of the block), N, block sizes, dtypes,
// zero-point forms and bias.
#include <string>

#include "cuda_test_util.h"

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
  void check(const MatMulCase& c) {
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
    compare(spec.with_inputs(inputs), inputs, "MatMulNBits " + c.describe());
  }
};

TEST_F(MatMulNBitsCuda, MatchesCpuOnRandomCases) {
  constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
  constexpr int64_t kMs[] = {1, 2, 3, 8, 17, 64};
  constexpr int64_t kBlocks[] = {16, 32, 64, 128, 256};
  constexpr int64_t kKs[] = {64, 896, 1024, 4096, 200, 1000, 33, 2056};
  for (int trial = 0; trial < 72; ++trial) {
    MatMulCase c;
    c.dtype = kDtypes[trial % 3];
    c.m = kMs[trial % 6];
    c.block = kBlocks[rng_() % 5];
    c.k = rng_() % 4 == 0 ? std::uniform_int_distribution<int64_t>(1, 3000)(rng_) : kKs[rng_() % std::size(kKs)];
    c.n = rng_() % 2 == 0 ? std::uniform_int_distribution<int64_t>(1, 300)(rng_) : 256;
    c.zp = static_cast<ZeroPoints>(trial % 3);
    c.bias = rng_() % 2 == 0;
    c.a_3d = trial % 7 == 0;
    check(c);
  }
}

// Decode-sized shapes: the GEMV path at model sizes with 16-byte loads everywhere.
TEST_F(MatMulNBitsCuda, MatchesCpuAtModelSizes) {
  for (const MatMulCase& c : {MatMulCase{DType::kF16, 1, 4096, 4096, 32, ZeroPoints::kNone, false, true},
                              MatMulCase{DType::kBF16, 1, 896, 4864, 128, ZeroPoints::kPacked, true, false},
                              MatMulCase{DType::kF32, 8, 4096, 1024, 128, ZeroPoints::kPacked, false, false},
                              MatMulCase{DType::kF16, 17, 2048, 512, 64, ZeroPoints::kFloat, true, false}}) {
    check(c);
  }
}

}  // namespace
}  // namespace onnx_genai::testing
