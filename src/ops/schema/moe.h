// com.microsoft MoE and QMoE: a mixture-of-experts feed-forward block (ONNX Runtime's contrib
// ops, as ONNX Runtime 1.30 defines them; docs/moe.md has the whole contract).
//
//   input        [tokens, hidden] or [batch, seq, hidden]
//   router_probs [tokens, experts]: router logits
//   per expert e and projection fc1 / fc2 / fc3, weights laid out [experts, N, K] (row n holds
//   the K inputs of output n, as MatMulNBits' B):
//     fc1: N = inter (x2 when swiglu_fusion is 1 or 2), K = hidden
//     fc2: N = hidden, K = inter
//     fc3: N = inter, K = hidden (optional; the linear half of a gated activation)
//   y[t] = sum over the k selected experts e of weight(t, e) * fc2_e(act(fc1_e(x[t]) [, fc3_e(x[t])]))
//
// MoE holds float weights (the input's dtype). QMoE holds quantised ones:
//   quant_type "int": uint8 codes [E, N, K * bits / 8], bits 2, 4 or 8, packed low bits first;
//     scales [E, N] (one per row) or [E, N, K / block_size]; optional uint8 zero points packed like
//     the codes ([E, ceil(N * bits / 8)] per row, [E, N, ceil(blocks * bits / 8)] per block),
//     default 2^(bits - 1);
//   quant_type "fp4" (MXFP4): uint8 [E, N, K / 2], two e2m1 values per byte, low nibble first;
//     float8e8m0 scales [E, N, K / 32]; float32 global scales [E] (inputs 15, 16) multiply them.
//
// Routing (what ONNX Runtime 1.30's CPU kernels do, measured through onnxruntime-node):
//   MoE:  p = softmax(logits); the k largest p; weights p, or p / sum of the k when
//         normalize_routing_weights = 1.
//   QMoE: the k largest logits; weights softmax over those k (whatever normalize_routing_weights
//         says); with router_weights (input 14) the weights are router_weights[t, e] instead,
//         divided by their sum over the k when normalize_routing_weights = 1.
//   Ties go to the higher expert index, as ONNX Runtime's sort of (value, index) pairs does.
//   use_sparse_mixer = 1 (PhiMoE's "sparsemixer" as Hugging Face runs it at inference and ONNX
//   Runtime's CUDA kernel computes it; its CPU kernels ignore the attribute), k must be 2:
//         e1 = argmax(logits), m1 its logit; weight 1 / sum of exp(l - m1) over the experts with
//         m1 - l <= 2 * eps * max(|l|, m1); e2 and its weight the same over the experts other
//         than e1. eps = 0.01 (ONNX Runtime's fixed jitter_eps, PhiMoE's router_jitter_noise);
//         ties to the lower index (torch.max, cub's ArgMax); normalize_routing_weights ignored
//         (as both do); no router_weights.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "ops/op.h"

namespace onnx_genai {

struct MoEParams {
  enum class Activation { kRelu, kGelu, kSilu, kIdentity, kSwiGLU };
  enum class Quant { kFloat, kInt, kMxfp4 };
  enum class Routing { kSoftmaxTopK, kTopKSoftmax, kSparseMixer };
  static constexpr int kProjections = 3;  // fc1, fc2, fc3
  static constexpr float kSparseMixerEps = 0.01f;

  // Input slots of one projection in the node; -1 where the op has no such input.
  struct Slots {
    int weights = -1, scales = -1, bias = -1, zero_points = -1, global_scale = -1;
  };
  // One projection's shape and which of its optional inputs the node gives.
  struct Projection {
    bool present = false;
    int64_t n = 0, k = 0;          // per expert: output rows, inputs per row
    int64_t block_size = 0;        // int: scales per block of K (per row: K); fp4: 32
    int64_t blocks = 1;            // K / block_size
    bool has_bias = false, has_zero_points = false;
    Slots slots;
  };

  Quant quant = Quant::kFloat;
  Routing routing = Routing::kSoftmaxTopK;
  Activation activation = Activation::kRelu;
  int64_t k = 0, tokens = 0, hidden = 0, inter = 0, experts = 0;
  int64_t bits = 0;                // int codes: 2, 4 or 8
  bool per_row = false;            // int codes without block_size: one scale per row of N
  bool normalize = false;          // MoE: divide the k weights by their sum
  int64_t swiglu_fusion = 0;       // 0: gate fc1, linear fc3; 1: interleaved in fc1; 2: halves of fc1
  float alpha = 1.0f, beta = 0.0f, limit = std::numeric_limits<float>::infinity();
  DType dtype = DType::kUndefined; // input, router, biases, output (and MoE weights)
  DType scale_dtype = DType::kUndefined;
  int router_weights = -1;         // QMoE input 14 when given
  Projection fc[kProjections];

  static constexpr int kInput = 0, kRouter = 1;
  // The node's input slots: MoE (float) or QMoE.
  static Slots slots(bool quantized, int projection);

  bool gated() const { return activation == Activation::kSwiGLU || fc[2].present; }

  // Parses attributes and checks every input's dtype and shape; errors name `node`.
  static Result<MoEParams> make(const Node& node, const std::vector<const TensorInfo*>& inputs);
};

}  // namespace onnx_genai
