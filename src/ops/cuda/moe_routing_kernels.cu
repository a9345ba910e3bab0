// The CUDA MoE's routing, grouping and combine (launch order in moe_kernels.h), and its checks.
//
// Routing runs in one block of kRouteThreads: a warp per token picks the k experts (each lane
// owns experts lane, lane + 32, ...; a pick is a warp argmax with the CPU kernel's tie rule; lane j
// keeps pick j), computes their weights across the lanes as ops/cpu/moe.cc does and counts them
// per expert in shared memory; then one warp scans the counts into offsets and the active list,
// and every thread places its rows. Entries of one expert land in any order (shared atomics): each entry's result depends
// only on its own row, so the output does not.
#include <cuda_runtime.h>

#include <cmath>
#include <limits>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/moe_device.cuh"

namespace onnx_genai::cuda {

namespace {

constexpr int kRouteThreads = 1024;
constexpr int kRouteWarps = kRouteThreads / 32;
constexpr int kCombineThreads = 256;
constexpr int64_t kMaxCombineBlocks = 4096;
constexpr float kSparseMixerEps = 0.01f;  // ops/schema/moe.h

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Whether (v, e) beats the best so far (bv, be); e < 0 is no candidate. Ties go to the higher
// expert (ONNX Runtime's order) or, for the sparse mixer, the lower one (torch.max).
__device__ __forceinline__ bool beats(float v, int e, float bv, int be, bool lower_ties) {
  if (e < 0) return false;
  if (be < 0) return true;
  if (v != bv) return v > bv;
  return lower_ties ? e < be : e > be;
}

// Every lane ends with the warp's best (value, expert).
__device__ __forceinline__ void warp_best(float& v, int& e, bool lower_ties) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
    const int oe = __shfl_xor_sync(0xffffffffu, e, offset);
    if (beats(ov, oe, v, e, lower_ties)) v = ov, e = oe;
  }
}

// Token t's picks: lane j < k ends holding pick j's expert and its weight (k <= 32, check_moe),
// so the weights are computed across the lanes, each written once, and nothing is read back from
// global memory (a store-then-load there costs an L2 round trip per pick).
struct Pick {
  int expert = -1;
  float weight = 0.0f;
};

// PhiMoE's sparse mixer (formula in ops/schema/moe.h; k = 2).
template <typename T>
__device__ Pick sparse_mix(const MoEArgs& a, const T* logits, int lane) {
  Pick mine;
  int skip = -1;
  for (int j = 0; j < 2; ++j) {
    float best = 0.0f;
    int pick = -1;
    for (int e = lane; e < a.experts; e += 32) {
      const float v = to_float(logits[e]);
      if (e != skip && beats(v, e, best, pick, true)) best = v, pick = e;
    }
    warp_best(best, pick, true);
    float sum = 0.0f;
    for (int e = lane; e < a.experts; e += 32) {
      const float v = to_float(logits[e]);
      if (e != skip && best - v <= 2.0f * kSparseMixerEps * fmaxf(fabsf(v), best)) sum += expf(v - best);
    }
    sum = warp_sum(sum);
    if (lane == j) mine = Pick{pick, 1.0f / sum};
    skip = pick;
  }
  return mine;
}

// Token t's k experts and weights, by one warp, as ops/cpu/moe.cc computes them.
template <typename T>
__device__ Pick route_token(const MoEArgs& a, int64_t t, int lane) {
  const T* logits = static_cast<const T*>(a.router) + t * a.experts;
  if (a.routing == MoERouting::kSparseMixer) return sparse_mix(a, logits, lane);
  Pick mine;
  float logit = 0.0f, top = 0.0f;
  uint64_t taken = 0;  // bit i: expert lane + 32 i already picked
  for (int j = 0; j < a.k; ++j) {
    float best = 0.0f;
    int pick = -1;
    for (int i = 0, e = lane; e < a.experts; ++i, e += 32) {
      const float v = to_float(logits[e]);
      if ((taken >> i & 1) == 0 && beats(v, e, best, pick, false)) best = v, pick = e;
    }
    warp_best(best, pick, false);
    if ((pick & 31) == lane) taken |= uint64_t{1} << (pick >> 5);
    if (j == 0) top = best;
    if (lane == j) mine.expert = pick, logit = best;
  }
  const bool picked = lane < a.k;
  if (a.router_weights != nullptr) {
    const T* given = static_cast<const T*>(a.router_weights) + t * a.experts;
    mine.weight = picked ? to_float(given[mine.expert]) : 0.0f;
    if (a.normalize) mine.weight /= warp_sum(mine.weight);
  } else if (a.routing == MoERouting::kTopKSoftmax) {
    mine.weight = picked ? expf(logit - top) : 0.0f;
    mine.weight /= warp_sum(mine.weight);
  } else {
    // Softmax over every expert, then the picks' probabilities (renormalised on request).
    float all = 0.0f;
    for (int e = lane; e < a.experts; e += 32) all += expf(to_float(logits[e]) - top);
    all = warp_sum(all);
    mine.weight = picked ? expf(logit - top) / all : 0.0f;
    if (a.normalize) mine.weight /= warp_sum(mine.weight);
  }
  return mine;
}

// Counts per expert -> offsets, placement cursors and the active list, by warp 0. Lane l scans a
// contiguous span of experts; the spans' totals are scanned across the warp.
__device__ void scan_counts(const MoEArgs& a, const moe::Buffers& b, const int32_t* counts, int32_t* cursor, int lane) {
  const int span = static_cast<int>((a.experts + 31) / 32);
  const int e0 = min(lane * span, static_cast<int>(a.experts)), e1 = min(e0 + span, static_cast<int>(a.experts));
  int rows = 0, active = 0;
  for (int e = e0; e < e1; ++e) rows += counts[e], active += counts[e] > 0;
  int rows_before = rows, active_before = active;  // inclusive scans, made exclusive below
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int r = __shfl_up_sync(0xffffffffu, rows_before, offset);
    const int n = __shfl_up_sync(0xffffffffu, active_before, offset);
    if (lane >= offset) rows_before += r, active_before += n;
  }
  if (lane == 31) b.offsets[a.experts] = rows_before, b.active[a.experts] = active_before;
  rows_before -= rows, active_before -= active;
  for (int e = e0; e < e1; ++e) {
    b.offsets[e] = cursor[e] = rows_before;
    rows_before += counts[e];
    if (counts[e] > 0) b.active[active_before++] = e;
  }
}

template <typename T>
__global__ void __launch_bounds__(kRouteThreads) route_kernel(MoEArgs a, moe::Buffers b) {
  extern __shared__ int32_t shared[];  // counts [experts], then placement cursors [experts]
  int32_t* counts = shared;
  int32_t* cursor = shared + a.experts;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t e = threadIdx.x; e < a.experts; e += kRouteThreads) counts[e] = 0;
  wait_for_prior_grid();  // the router's logits
  allow_next_grid();      // fc1's blocks may take their places and wait there
  __syncthreads();
  for (int64_t t = warp; t < a.tokens; t += kRouteWarps) {
    const Pick mine = route_token<T>(a, t, lane);
    if (lane < a.k) {
      b.route_experts[t * a.k + lane] = mine.expert;
      b.route_weights[t * a.k + lane] = mine.weight;
      atomicAdd(&counts[mine.expert], 1);
    }
  }
  const int64_t routed = a.tokens * a.k;
  __syncthreads();
  if (warp == 0) scan_counts(a, b, counts, cursor, lane);
  __syncthreads();
  for (int64_t r = threadIdx.x; r < routed; r += kRouteThreads) {
    const int32_t at = atomicAdd(&cursor[b.route_experts[r]], 1);
    b.order[at] = static_cast<int32_t>(r);
    b.position[r] = at;
  }
}

// y[t, i] = sum over ranks j of weight * fc2 output of (t, j), in rank order as the CPU sums.
template <typename T>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(MoEArgs a, moe::Buffers b) {
  const int64_t total = a.tokens * a.hidden;
  wait_for_prior_grid();
  allow_next_grid();
  for (int64_t at = blockIdx.x * int64_t{kCombineThreads} + threadIdx.x; at < total;
       at += int64_t{gridDim.x} * kCombineThreads) {
    const int64_t t = at / a.hidden, i = at % a.hidden;
    float acc = 0.0f;
    for (int64_t j = 0; j < a.k; ++j) {
      const int64_t r = t * a.k + j;
      acc += b.route_weights[r] * b.expert_out[b.position[r] * a.hidden + i];
    }
    static_cast<T*>(a.y)[at] = from_float<T>(acc);
  }
}

// Values in one 16-byte chunk of a weight row: the projections' K must be whole chunks.
int64_t values_per_chunk(const MoEArgs& a) {
  switch (a.weights) {
    case MoEWeights::kInt4:
    case MoEWeights::kMxfp4: return 32;
    case MoEWeights::kInt8: return 16;
    case MoEWeights::kFloat: break;
  }
  return 128 / dtype_bits(a.dtype);
}

}  // namespace

MoEWorkspace moe_workspace(const MoEArgs& a) {
  const auto routed = static_cast<size_t>(a.tokens * a.k), experts = static_cast<size_t>(a.experts);
  MoEWorkspace w;
  size_t at = 0;
  const auto region = [&at](size_t bytes) {
    const size_t start = at;
    at += align_up(bytes);
    return start;
  };
  w.route_weights = region(routed * sizeof(float));
  w.route_experts = region(routed * sizeof(int32_t));
  w.offsets = region((experts + 1) * sizeof(int32_t));
  w.order = region(routed * sizeof(int32_t));
  w.position = region(routed * sizeof(int32_t));
  w.active = region((experts + 1) * sizeof(int32_t));
  w.activations = region(routed * static_cast<size_t>(a.inter) * sizeof(float));
  w.expert_out = region(routed * static_cast<size_t>(a.hidden) * sizeof(float));
  w.total = at;
  return w;
}

Status check_moe(const MoEArgs& a) {
  if (a.experts > kMaxMoEExperts) return OG_ERROR("the CUDA MoE takes up to ", kMaxMoEExperts, " experts, got ", a.experts);
  if (a.k > kMaxMoETopK) return OG_ERROR("the CUDA MoE takes up to ", kMaxMoETopK, " experts per token, got k ", a.k);
  if (a.tokens * a.k > std::numeric_limits<int32_t>::max()) return OG_ERROR("too many routed rows for the CUDA MoE");
  if (a.dtype != DType::kF32 && a.dtype != DType::kF16 && a.dtype != DType::kBF16) {
    return OG_ERROR("the CUDA MoE has no ", dtype_name(a.dtype), " kernel");
  }
  const int64_t chunk = values_per_chunk(a);
  for (const MoEProjection* p : {&a.fc1, &a.fc2, &a.fc3}) {
    if (p == &a.fc3 && !a.has_fc3) continue;
    if (p->k % chunk != 0) {
      return OG_ERROR("the CUDA MoE needs each projection's input size to be a multiple of ", chunk, ", got ", p->k);
    }
  }
  return Status::ok();
}

Status launch_moe(const MoEArgs& a, void* stream) {
  if (a.tokens == 0) return Status::ok();
  const auto s = static_cast<cudaStream_t>(stream);
  const moe::Buffers b = moe::buffers(a);
  const size_t shared = 2 * static_cast<size_t>(a.experts) * sizeof(int32_t);
  const int64_t combine_blocks = std::min((a.tokens * a.hidden + kCombineThreads - 1) / kCombineThreads, kMaxCombineBlocks);
  const bool dependent = a.dependent_launch && dependent_launch_allowed();
  cudaError_t err = cudaErrorInvalidValue;
  dispatch_float_type(a.dtype, [&]<typename T>() {
    err = launch_kernel(route_kernel<T>, dim3(1), dim3(kRouteThreads), shared, s, dependent, a, b);
  });
  OG_RETURN_IF_ERROR(cuda_status(err, "moe route_kernel"));
  OG_RETURN_IF_ERROR(moe::launch_expert_projections(a, b, s));
  dispatch_float_type(a.dtype, [&]<typename T>() {
    err = launch_kernel(combine_kernel<T>, dim3(static_cast<unsigned>(combine_blocks)), dim3(kCombineThreads), 0, s,
                        dependent, a, b);
  });
  return cuda_status(err, "moe combine_kernel");
}

}  // namespace onnx_genai::cuda
