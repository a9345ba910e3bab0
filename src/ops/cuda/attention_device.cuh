// Device helpers shared by the GroupQueryAttention kernels (attention_kernels.cu: prompts, the
// f32 decode and the combine kernel; attention_decode_kernels.cu: the tensor-core decode), and
// the interface between those two files. .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_types.cuh"

namespace onnx_genai::cuda {

inline constexpr int64_t kMaxChunks = 512;  // combine weights live in shared memory
// Longest step (query rows S) the tensor-core kernel takes: a speculative-decoding verify, a short
// prompt; longer ones run on the prompt kernel.
inline constexpr int64_t kTensorCoreMaxRows = 16;
// Percent of the L1 / shared-memory split given to shared memory: one split for the decode and
// combine kernels, so the SMs need not drain to reconfigure between them.
inline constexpr unsigned kMaxSharedCarveout = 100;
inline constexpr float kNegInf = -__builtin_huge_valf();

// One warp's online-softmax state over the tensor-core kernels' mma rows lane/4 and lane/4 + 8
// (query vectors of the decode, query rows of the flash prompt kernel).
template <int kMaxDims>
struct WarpSoftmaxState {
  float m[2] = {kNegInf, kNegInf};  // running max, log2 units
  float l[2] = {0.0f, 0.0f};        // running sum of this lane's probabilities
  float acc[kMaxDims / 8][4] = {};  // O tile nt: (row lane/4, dims 8nt + 2(lane%4), +1), (row + 8, same)
};
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

__host__ __device__ __forceinline__ int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// CUDA's min / max are overloads, not templates: these keep every index computation in int64_t.
__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
inline size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// What seqlens_k says about batch entry b (ops/cpu/attention_gqa.cc, plan_batches). `valid` is
// false where the CPU kernel fails the run.
struct RowKeys {
  int64_t total, offset, keep;
  bool valid;
};

__device__ inline RowKeys row_keys(const GqaArgs& a, int64_t b) {
  const int64_t last = a.seqlens_k[b];
  RowKeys r;
  r.total = last + 1;
  r.offset = a.first_prompt ? 0 : r.total - a.q_len;
  r.keep = a.kv_len == 0 ? r.total : r.offset;
  r.valid = last >= 0 && last < a.present_len && (a.first_prompt || r.total >= a.q_len) && r.keep <= a.past_len &&
            (a.attention_bias == nullptr || r.total <= a.bias_keys);
  return r;
}

// Keys [lo, hi) that query row s of a batch entry sees.
__device__ inline void key_range(const GqaArgs& a, const RowKeys& r, int64_t s, int64_t& lo, int64_t& hi) {
  hi = a.causal ? imin(r.offset + s + 1, r.total) : r.total;
  hi = imax(hi, 0);
  lo = a.window >= 0 && hi > a.window ? hi - a.window : 0;
}

__device__ inline int64_t rotary_position(const GqaArgs& a, const RowKeys& r, int64_t b, int64_t s) {
  int64_t pos;
  if (a.position_ids != nullptr) pos = a.first_prompt ? a.position_ids[0] + s : a.position_ids[b * a.q_len + s];
  else pos = a.first_prompt ? s : r.total - a.q_len + s;
  return imin(imax(pos, 0), a.rotary_rows - 1);
}

// Keys any query row of batch entry b sees: row 0's first to row S-1's end (both grow with the
// row). A split decode divides this span, so that every row's partials line up by chunk.
__device__ inline void entry_key_span(const GqaArgs& a, const RowKeys& r, int64_t& lo, int64_t& hi) {
  int64_t unused = 0;
  key_range(a, r, 0, lo, unused);
  key_range(a, r, a.q_len - 1, unused, hi);
}

// The chunks of a decode row's keys [lo, hi): chunk c holds keys [first + c*len, first + (c+1)*len)
// of them, for c in [begin, end). With chunk_len > 0 (the prompt kernel's) the chunks are fixed at
// plan time; else (the decode kernel's) they divide the row's own keys among its a.chunks blocks,
// at least min_chunk_keys each, so a row far shorter than the cache runs on few blocks.
struct KeyChunks {
  int64_t first, len, begin, end;
};

__device__ inline KeyChunks key_chunks(const GqaArgs& a, int64_t lo, int64_t hi) {
  if (lo >= hi) return {0, a.chunk_len > 0 ? a.chunk_len : a.min_chunk_keys, 0, 0};
  if (a.chunk_len > 0) return {0, a.chunk_len, lo / a.chunk_len, ceil_div(hi, a.chunk_len)};
  const int64_t first = lo & ~int64_t{15};  // whole steps of 16 keys
  const int64_t even = ceil_div(ceil_div(hi - first, a.chunks), a.min_chunk_keys) * a.min_chunk_keys;
  return {first, even, 0, ceil_div(hi - first, even)};
}

// attention_bias for (batch b, head h, query row s, key), broadcast over size-1 batch / heads.
template <typename T>
__device__ float bias_at(const GqaArgs& a, int64_t b, int64_t h, int64_t s, int64_t key) {
  const int64_t bb = a.bias_batch == 1 ? 0 : b, bh = a.bias_heads == 1 ? 0 : h;
  return to_float(static_cast<const T*>(a.attention_bias)[((bb * a.bias_heads + bh) * a.q_len + s) * a.bias_keys + key]);
}

// One rotary pair (x[ia], x[ib]) -> (ya, yb) as rotate_head (ops/cpu/rotary_rows.h) computes it:
// explicit roundings, no fused multiply-add, like the CPU.
__device__ __forceinline__ void rotate_pair(float va, float vb, float c, float s, float& ya, float& yb) {
  ya = __fsub_rn(__fmul_rn(va, c), __fmul_rn(vb, s));
  yb = __fadd_rn(__fmul_rn(vb, c), __fmul_rn(va, s));
}

// Rotary pair p of a head: its two element indices.
__device__ __forceinline__ void rotary_pair(int64_t p, int64_t rotary_dim, bool interleaved, int64_t& ia, int64_t& ib) {
  ia = interleaved ? 2 * p : p;
  ib = interleaved ? 2 * p + 1 : p + rotary_dim / 2;
}

// Element i of one head vector x after rotate_head; cos / sin are the position's rows, null
// without rotary.
template <typename T>
__device__ T head_element(const T* x, int64_t i, const T* cos, const T* sin, int64_t rotary_dim, bool interleaved) {
  if (cos == nullptr || i >= rotary_dim) return x[i];
  const int64_t half = rotary_dim / 2;
  const int64_t pair = interleaved ? i / 2 : (i < half ? i : i - half);
  int64_t ia, ib;
  rotary_pair(pair, rotary_dim, interleaved, ia, ib);
  float ya, yb;
  rotate_pair(to_float(x[ia]), to_float(x[ib]), to_float(cos[pair]), to_float(sin[pair]), ya, yb);
  return from_float<T>(i == ia ? ya : yb);
}

// out = acc * factor: 1 / l, or with smooth softmax / a head sink the extra e^sink term in the
// denominator (attention_core.cc, finish). m in natural-log units.
template <typename T>
__device__ float finish_factor(const GqaArgs& a, float m, float l, int64_t h) {
  if (!a.smooth_softmax && a.head_sink == nullptr) return l > 0.0f ? 1.0f / l : 0.0f;
  const float sink = a.head_sink != nullptr ? to_float(static_cast<const T*>(a.head_sink)[h]) : 0.0f;
  const float top = fmaxf(m, sink);
  const float kept = expf(m - top);
  return kept / (l * kept + expf(sink - top));
}

// Split-decode partials in the workspace: (m, l) per (b, row, head, chunk), m in natural-log
// units, then the accumulators, [b, row, head, chunk, D], f32.
__device__ inline float* partial_ml(const GqaArgs& a) {
  return reinterpret_cast<float*>(static_cast<char*>(a.workspace) + a.partial_offset);
}
__host__ __device__ inline size_t partial_acc_offset(const GqaArgs& a) {
  return a.partial_offset + (static_cast<size_t>(a.batch * a.q_len * a.num_heads * a.chunks * 2) * sizeof(float) + 255) / 256 * 256;
}
__device__ inline float* partial_acc(const GqaArgs& a) {
  return reinterpret_cast<float*>(static_cast<char*>(a.workspace) + partial_acc_offset(a));
}

// ---- attention_decode_kernels.cu: the tensor-core decode (f16 / bf16, q_len <= kTensorCoreMaxRows) ----
// Plans it for `a` (host-side, once per plan): decode_dims stays 0 where its shared memory would
// not fit (the prompt kernel runs instead). The launch queues it on `stream`.
template <typename T>
Status plan_tensor_core_decode(GqaArgs& a);
template <typename T>
Status launch_tensor_core_decode(const GqaArgs& a, cudaStream_t stream);

// ---- attention_prompt_kernels.cu: the flash prompt kernel (f16 / bf16, steps the decode kernel
// does not take) ----
// Plans it for `a` (host-side, once per plan): prompt_dims stays 0 where it does not support the
// step (the tiled prompt kernel runs instead). The launch queues it on `stream`; it reads the
// rotated queries and the present cache that gqa_append_kernel and gqa_copy_past_kernel leave.
template <typename T>
Status plan_flash_prompt(GqaArgs& a);
template <typename T>
Status launch_flash_prompt(const GqaArgs& a, cudaStream_t stream);

// ---- attention_kernels.cu ----
// gqa_combine_kernel over a split decode's partials; `after_prior` launches it as a programmatic
// dependent of the kernel before it.
template <typename T>
Status launch_gqa_combine(const GqaArgs& a, cudaStream_t stream, bool after_prior);

}  // namespace onnx_genai::cuda
