// com.microsoft MoE and QMoE: the CUDA kernels (ops/cuda/moe.cc) against the CPU kernel
// (ops/cpu/moe.cc, itself checked against ONNX Runtime and a float64 reference by
// tests/differential/moe.py) on every form the schema allows and the CUDA side takes: float
// experts (f32 / f16 / bf16), int4 and int8 codes in blocks of 16..128 or one scale per row,
// f32 / f16 / bf16 scales, packed zero points, MXFP4 with e8m0 scales and global scales; every
// activation, SwiGLU with fc3 or fused in fc1 (interleaved, halves) with alpha / beta / limit,
// fc3 gating, biases; every routing (softmax then top-k, normalised or not; QMoE's top-k then
// softmax; router_weights; the sparse mixer); batch 1 (one tile per expert) to 40 tokens (several
// tiles of 8 per expert); model-sized layers (gpt-oss-20b's and Qwen3-30B-A3B's dims with fewer
// experts). What the CUDA side lacks must be turned down in prepare (the node then runs on the
// CPU).
#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "data_test_util.h"

namespace onnx_genai::testing {
namespace {

struct MoECase {
  DType dtype = DType::kF32;
  std::string quant = "float";  // "float" (MoE), "int" or "fp4" (QMoE)
  int bits = 4;
  int64_t block = 32;           // int: 0 = one scale per row
  DType scale_dtype = DType::kF32;
  int64_t tokens = 1, hidden = 64, inter = 32, experts = 8, k = 2;
  std::string activation = "silu";
  int fusion = 0;               // swiglu_fusion
  bool fc3 = false, bias = false, zero_points = false, normalize = false, router_weights = false;
  bool sparse_mixer = false;
  float alpha = 1.0f, beta = 0.0f, limit = INFINITY;

  bool quantized() const { return quant != "float"; }
  std::string describe() const {
    std::string s = std::string(dtype_name(dtype)) + " " + quant;
    if (quant == "int") s += std::to_string(bits) + (block > 0 ? " b" + std::to_string(block) : " per-row") + " scales " +
                             std::string(dtype_name(scale_dtype)) + (zero_points ? " zp" : "");
    s += " T" + std::to_string(tokens) + " H" + std::to_string(hidden) + " I" + std::to_string(inter) + " E" +
         std::to_string(experts) + " k" + std::to_string(k) + " " + activation;
    if (activation == "swiglu") s += " fusion " + std::to_string(fusion);
    if (fc3) s += " fc3";
    if (bias) s += " bias";
    if (normalize) s += " normalize";
    if (router_weights) s += " router_weights";
    if (sparse_mixer) s += " sparse_mixer";
    if (std::isfinite(limit)) s += " limit";
    return s;
  }
};

class MoECuda : public CudaKernelTest {
 protected:
  // One projection's weights (and scales, zero points, global scales) for n outputs of k inputs.
  struct Weights {
    Tensor weights, scales, zero_points, global;
  };
  Weights weights(const MoECase& c, int64_t n, int64_t k) {
    const int64_t e = c.experts;
    Weights w;
    if (c.quant == "float") {
      w.weights = random_float_tensor(c.dtype, Shape{e, n, k}, rng_, -0.15f, 0.15f);
      return w;
    }
    if (c.quant == "fp4") {
      w.weights = random_bytes(Shape{e, n, k / 2}, rng_);
      Tensor s = Tensor::allocate(DType::kF8E8M0, Shape{e, n, k / 32}).value();
      std::uniform_int_distribution<int> exponent(119, 125);  // 2^-8 .. 2^-2
      for (int64_t i = 0; i < s.numel(); ++i) static_cast<uint8_t*>(s.raw())[i] = static_cast<uint8_t>(exponent(rng_));
      w.scales = s;
      w.global = random_float_tensor(DType::kF32, Shape{e}, rng_, 0.5f, 1.5f);
      return w;
    }
    const int64_t blocks = c.block > 0 ? k / c.block : 1;
    w.weights = random_bytes(Shape{e, n, k * c.bits / 8}, rng_);
    w.scales = random_float_tensor(c.scale_dtype, c.block > 0 ? Shape{e, n, blocks} : Shape{e, n}, rng_, -0.02f, 0.02f);
    if (c.zero_points) {
      w.zero_points = random_bytes(c.block > 0 ? Shape{e, n, (blocks * c.bits + 7) / 8} : Shape{e, (n * c.bits + 7) / 8}, rng_);
    }
    return w;
  }

  // Case c's attributes (on `spec`) and random inputs.
  std::vector<Tensor> make(const MoECase& c, CudaNode& spec) {
    const bool fused = c.activation == "swiglu" && c.fusion != 0;
    spec.attr_int("k", c.k);
    spec.attr_string("activation_type", c.activation);
    if (c.normalize) spec.attr_int("normalize_routing_weights", 1);
    if (c.sparse_mixer) spec.attr_int("use_sparse_mixer", 1);
    if (c.activation == "swiglu") {
      spec.attr_int("swiglu_fusion", c.fusion).attr_float("activation_alpha", c.alpha).attr_float("activation_beta", c.beta);
      if (std::isfinite(c.limit)) spec.attr_float("swiglu_limit", c.limit);
    }
    if (c.quantized()) {
      spec.attr_string("quant_type", c.quant);
      spec.attr_int("expert_weight_bits", c.quant == "fp4" ? 4 : c.bits);
      if (c.quant == "fp4" || c.block > 0) spec.attr_int("block_size", c.quant == "fp4" ? 32 : c.block);
    }
    const Weights fc1 = weights(c, fused ? 2 * c.inter : c.inter, c.hidden);
    const Weights fc2 = weights(c, c.hidden, c.inter);
    const Weights fc3 = c.fc3 ? weights(c, c.inter, c.hidden) : Weights{};
    const auto bias = [&](int64_t n) {
      return c.bias ? random_float_tensor(c.dtype, Shape{c.experts, n}, rng_, -0.5f, 0.5f) : Tensor();
    };
    std::vector<Tensor> in{random_float_tensor(c.dtype, Shape{c.tokens, c.hidden}, rng_),
                           random_float_tensor(c.dtype, Shape{c.tokens, c.experts}, rng_, -3.0f, 3.0f)};
    if (!c.quantized()) {
      in.insert(in.end(), {fc1.weights, bias(fused ? 2 * c.inter : c.inter), fc2.weights, bias(c.hidden)});
      if (c.fc3) in.insert(in.end(), {fc3.weights, bias(c.inter)});
    } else {
      in.insert(in.end(), {fc1.weights, fc1.scales, bias(fused ? 2 * c.inter : c.inter), fc2.weights, fc2.scales,
                           bias(c.hidden), fc3.weights, fc3.scales, c.fc3 ? bias(c.inter) : Tensor(), fc1.zero_points,
                           fc2.zero_points, fc3.zero_points,
                           c.router_weights ? random_float_tensor(c.dtype, Shape{c.tokens, c.experts}, rng_, 0.0f, 1.0f)
                                            : Tensor(),
                           fc1.global, fc2.global});
      while (!in.back().defined()) in.pop_back();
    }
    return in;
  }

  void check(const MoECase& c) {
    CudaNode spec(c.quantized() ? "QMoE" : "MoE", "com.microsoft", {true});
    const std::vector<Tensor> in = make(c, spec);
    compare(spec.with_inputs(in), in, c.describe());
  }

  // The CUDA side turns case c down with `message` (the node then runs on the CPU).
  void expect_turned_down(const MoECase& c, const std::string& message) {
    CudaNode spec(c.quantized() ? "QMoE" : "MoE", "com.microsoft", {true});
    const std::vector<Tensor> in = make(c, spec);
    expect_cuda_rejects(spec.with_inputs(in), in, message, c.describe());
  }
};

TEST_F(MoECuda, FloatExpertsMatchCpu) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const char* act : {"relu", "gelu", "silu", "identity"}) {
      MoECase c{.dtype = dtype, .tokens = 5, .activation = act, .bias = true};
      check(c);
    }
    check(MoECase{.dtype = dtype, .tokens = 3, .activation = "silu", .fc3 = true, .normalize = true});
    for (int fusion : {0, 1, 2}) {
      check(MoECase{.dtype = dtype, .tokens = 9, .activation = "swiglu", .fusion = fusion, .fc3 = fusion == 0, .bias = true});
    }
  }
}

TEST_F(MoECuda, IntExpertsMatchCpu) {
  for (int bits : {4, 8}) {
    for (int64_t block : {int64_t{16}, int64_t{32}, int64_t{64}, int64_t{128}, int64_t{0}}) {
      for (bool zp : {false, true}) {
        check(MoECase{.dtype = DType::kF32, .quant = "int", .bits = bits, .block = block, .tokens = 4, .hidden = 128,
                      .inter = 128, .activation = "swiglu", .fusion = 1, .zero_points = zp});
      }
    }
    for (DType scale : {DType::kF16, DType::kBF16}) {
      check(MoECase{.dtype = scale, .quant = "int", .bits = bits, .scale_dtype = scale, .tokens = 6, .hidden = 128,
                    .inter = 96, .activation = "silu", .fc3 = true, .bias = true, .zero_points = true});
    }
  }
}

TEST_F(MoECuda, Mxfp4ExpertsMatchCpu) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    // gpt-oss's experts: interleaved SwiGLU, alpha 1.702, beta 1, limit 7, biases.
    check(MoECase{.dtype = dtype, .quant = "fp4", .tokens = 7, .hidden = 96, .inter = 64, .experts = 8, .k = 4,
                  .activation = "swiglu", .fusion = 1, .bias = true, .alpha = 1.702f, .beta = 1.0f, .limit = 7.0f});
  }
}

TEST_F(MoECuda, EveryRoutingMatchesCpu) {
  for (const char* quant : {"float", "int"}) {
    for (bool normalize : {false, true}) {
      check(MoECase{.quant = quant, .tokens = 11, .normalize = normalize});
      check(MoECase{.quant = quant, .tokens = 11, .experts = 6, .k = 2, .sparse_mixer = true});
    }
  }
  for (bool normalize : {false, true}) check(MoECase{.quant = "int", .tokens = 5, .normalize = normalize, .router_weights = true});
  // k = E: every expert takes every token; one expert: every token in one group.
  check(MoECase{.tokens = 4, .experts = 4, .k = 4});
  check(MoECase{.tokens = 4, .experts = 1, .k = 1});
}

// Batch 1 up to 40 tokens (tiles of 1, 2, 4 and 8 rows; experts with several tiles).
TEST_F(MoECuda, TokenCountsMatchCpu) {
  for (int64_t tokens : {1, 2, 3, 4, 8, 13, 40}) {
    check(MoECase{.quant = "int", .tokens = tokens, .hidden = 64, .inter = 64, .experts = 4, .k = 2,
                  .activation = "swiglu", .fusion = 1});
  }
}

// Layers of the published models' widths (fewer experts: the CPU reference has to run them).
TEST_F(MoECuda, ModelSizedLayersMatchCpu) {
  // Qwen3-30B-A3B: hidden 2048, expert inter 768, top-8 (of 128), int4 blocks of 32, f16.
  check(MoECase{.dtype = DType::kF16, .quant = "int", .scale_dtype = DType::kF16, .tokens = 4, .hidden = 2048,
                .inter = 768, .experts = 16, .k = 8, .activation = "swiglu", .fusion = 1});
  // gpt-oss-20b: hidden and inter 2880, top-4 (of 32), MXFP4, bf16.
  check(MoECase{.dtype = DType::kBF16, .quant = "fp4", .tokens = 2, .hidden = 2880, .inter = 2880, .experts = 8, .k = 4,
                .activation = "swiglu", .fusion = 1, .bias = true, .alpha = 1.702f, .beta = 1.0f, .limit = 7.0f});
}

TEST_F(MoECuda, TurnsDownWhatItLacks) {
  expect_turned_down(MoECase{.quant = "int", .bits = 2}, "2-bit experts have no CUDA kernel");
  // int4 codes with an input size of 48: not whole 16-byte chunks.
  expect_turned_down(MoECase{.quant = "int", .block = 16, .hidden = 48, .experts = 2, .k = 1}, "a multiple of 32");
  expect_turned_down(MoECase{.tokens = 2, .experts = 40, .k = 33}, "up to 32 experts per token");
}

}  // namespace
}  // namespace onnx_genai::testing
