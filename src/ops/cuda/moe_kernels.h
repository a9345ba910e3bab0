// Launch interface of the CUDA MoE / QMoE kernels (moe_routing_kernels.cu, moe_expert_kernels.cu);
// the op's contract is ops/schema/moe.h, the CPU kernel (ops/cpu/moe.cc) the reference. No CUDA
// headers needed.
//
// One run is four launches on one stream, none of which waits for the host (capture-safe; the
// grids depend only on the shapes), each a programmatic dependent of the one before, so a kernel's
// blocks are resident when its predecessor ends and fc2 fetches its experts' weights into L2 while
// fc1 drains:
//   1. route    one block: every token's k experts and weights, then the routed rows grouped by
//               expert (a counting sort), the list of active experts and its length, in the
//               workspace;
//   2. fc1      grid (expert slot, output columns): slot s takes the s-th active expert, or exits
//               when fewer are active, and multiplies its weights with all its routed rows, a tile
//               of up to kMaxMoETileRows at a time, so at batch 1 only the chosen experts' bytes
//               move and each once; fc3 (or the second half of fused fc1) beside it, biases and
//               the activation in the epilogue -> f32 activations [routed, inter];
//   3. fc2      the same over the activations (+ fc2's bias) -> f32 [routed, hidden];
//   4. combine  per token, its k rows times their weights in rank order -> y (the input's dtype).
#pragma once

#include <cstddef>
#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// Routed rows one pass of an expert's weights serves (a tile in registers; more rows: more passes).
constexpr int64_t kMaxMoETileRows = 8;
// Experts the routing kernel takes (a warp's lanes own 64 experts each), and experts per token
// (a lane holds each pick).
constexpr int64_t kMaxMoEExperts = 2048;
constexpr int64_t kMaxMoETopK = 32;

enum class MoEWeights { kFloat, kInt4, kInt8, kMxfp4 };
enum class MoERouting { kSoftmaxTopK, kTopKSoftmax, kSparseMixer };
enum class MoEActivation { kRelu, kGelu, kSilu, kIdentity, kSwiGLU };

// One projection's device pointers (all experts) and shape per expert, laid out as the schema says.
struct MoEProjection {
  int64_t n = 0, k = 0;
  int64_t block_size = 0, blocks = 1;      // int codes and MXFP4: scales per block of K (per row: K)
  const void* weights = nullptr;           // float [E, n, k] of the input's dtype, or uint8 codes
  const void* scales = nullptr;            // int: scale dtype [E, n, blocks] or [E, n]; MXFP4: e8m0
  const uint8_t* zero_points = nullptr;    // int codes, optional
  const float* global_scales = nullptr;    // MXFP4 [E]
  const void* bias = nullptr;              // [E, n], input dtype, optional
};

struct MoEArgs {
  DType dtype = DType::kF32;               // input, router, biases, output
  DType scale_dtype = DType::kF32;         // int codes' scales
  MoEWeights weights = MoEWeights::kFloat;
  bool per_row = false;                    // int codes: one scale (and zero point) per row
  MoERouting routing = MoERouting::kSoftmaxTopK;
  bool normalize = false;
  MoEActivation activation = MoEActivation::kRelu;
  int swiglu_fusion = 0;
  float alpha = 1.0f, beta = 0.0f, limit = 0.0f;
  int64_t tokens = 0, hidden = 0, inter = 0, experts = 0, k = 0;
  MoEProjection fc1, fc2, fc3;
  bool has_fc3 = false;
  const void* x = nullptr;                 // [tokens, hidden]
  const void* router = nullptr;            // [tokens, experts] logits
  const void* router_weights = nullptr;    // QMoE's optional [tokens, experts]
  void* y = nullptr;                       // [tokens, hidden]
  void* workspace = nullptr;               // moe_workspace(*this).total bytes, 256-byte aligned
  // Launch each kernel as a programmatic dependent of the one before (dependent_launch.cuh;
  // off only to measure what it saves, or with OG_CUDA_DEPENDENT_LAUNCH=0).
  bool dependent_launch = true;

  bool gated() const { return activation == MoEActivation::kSwiGLU || has_fc3; }
};

// Where each buffer lives in the workspace, in bytes from its start.
struct MoEWorkspace {
  size_t route_weights = 0, route_experts = 0, offsets = 0, order = 0, position = 0, active = 0;
  size_t activations = 0, expert_out = 0, total = 0;
};
MoEWorkspace moe_workspace(const MoEArgs& a);

// Ok when the kernels take these shapes and options; else what they lack (the node runs on the
// CPU). Call in prepare.
Status check_moe(const MoEArgs& a);

// Queues the four launches on `stream` (a cudaStream_t); check_moe(a) must have passed.
Status launch_moe(const MoEArgs& a, void* stream);

}  // namespace onnx_genai::cuda
