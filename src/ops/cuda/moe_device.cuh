// Shared by the CUDA MoE kernels' files (moe_routing_kernels.cu: routing, grouping, combine;
// moe_expert_kernels.cu: the expert projections): the workspace's buffers as device pointers.
// .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ops/cuda/moe_kernels.h"

namespace onnx_genai::cuda::moe {

// Routed row r = token * k + rank; "entries" are the routed rows in expert order.
struct Buffers {
  float* route_weights;   // [routed]: each routed row's weight
  int32_t* route_experts; // [routed]: its expert
  int32_t* offsets;       // [experts + 1]: expert e's entries are [offsets[e], offsets[e + 1])
  int32_t* order;         // [routed]: entry -> routed row
  int32_t* position;      // [routed]: routed row -> entry
  int32_t* active;        // [experts + 1]: the experts with rows, ascending; active[experts] = how many
  float* activations;     // [routed, inter]: fc1's (and fc3's) output after the activation, by entry
  float* expert_out;      // [routed, hidden]: fc2's output + bias, by entry
};

inline Buffers buffers(const MoEArgs& a) {
  const MoEWorkspace w = moe_workspace(a);
  auto* base = static_cast<char*>(a.workspace);
  return Buffers{reinterpret_cast<float*>(base + w.route_weights), reinterpret_cast<int32_t*>(base + w.route_experts),
                 reinterpret_cast<int32_t*>(base + w.offsets),     reinterpret_cast<int32_t*>(base + w.order),
                 reinterpret_cast<int32_t*>(base + w.position),    reinterpret_cast<int32_t*>(base + w.active),
                 reinterpret_cast<float*>(base + w.activations),   reinterpret_cast<float*>(base + w.expert_out)};
}

// Expert slots of the projection grids: no more than there are experts, or routed rows.
inline int64_t expert_slots(const MoEArgs& a) { return std::min(a.experts, a.tokens * a.k); }

// fc1 (+ fc3 and the activation), then fc2 (moe_expert_kernels.cu), after the routing.
Status launch_expert_projections(const MoEArgs& a, const Buffers& b, cudaStream_t s);

}  // namespace onnx_genai::cuda::moe
