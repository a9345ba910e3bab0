// PagedAttention on the GPU (paged_attention_kernels.h), two kernels on one stream:
//
//   append     one block per packed token, a thread per element of its KV heads: the token's key
//              (rotated at its position, rounded to the storage type as the CPU's rotate_head does)
//              and value go to the slot its sequence's block table names.
//   attention  one block per (token, query head, split of its keys): the split's keys go to the
//              block's four warps in turn (key lo + w, lo + w + 4, ...); a warp reads a key row
//              coalesced (lane i holds elements i, i + 32, ...), sums the dot product across lanes,
//              and keeps a running max, sum and output (online softmax); the warps merge through
//              shared memory. With one split (enough tokens x heads to fill the GPU) the block
//              writes the output; else its (max, sum, output) go to the workspace and
//   combine    merges a (token, head)'s splits (flash decoding: a decode of a few sequences still
//              spreads its long context over the whole GPU).
//
// A CUDA-core kernel: every key row is read once per query head (no sharing across the heads of a
// KV group, no tensor cores) — the tensor-core kernel for long prefills and wide groups is still
// to come.
// Capture-safe: no allocation, no host sync, launch shapes fixed by the plan.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/attention_device.cuh"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/paged_attention_kernels.h"

namespace onnx_genai::cuda {

namespace {

constexpr int kWarps = 4;  // query heads per attention block
constexpr int kMaxPerLane = kPagedMaxHeadSize / 32;

// The sequence owning packed token t (query_starts[s] <= t < query_starts[s + 1]), or -1.
__device__ int64_t sequence_of(const PagedAttentionArgs& a, int64_t t) {
  if (t >= a.query_starts[a.sequences] || t < a.query_starts[0]) return -1;
  int64_t lo = 0, hi = a.sequences - 1;
  while (lo < hi) {  // the last s with query_starts[s] <= t
    const int64_t mid = (lo + hi + 1) / 2;
    if (a.query_starts[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

__device__ int64_t position_of(const PagedAttentionArgs& a, int64_t s, int64_t t) {
  return a.seq_lens[s] - (a.query_starts[s + 1] - a.query_starts[s]) + (t - a.query_starts[s]);
}

// Element offset of (pos, KV head g) of sequence s, or -1 when its block id is out of range.
__device__ int64_t slot_of(const PagedAttentionArgs& a, int64_t s, int64_t pos, int64_t g) {
  if (pos < 0 || pos >= a.max_blocks * a.block_size) return -1;
  const int64_t block = a.block_tables[s * a.max_blocks + pos / a.block_size];
  if (block < 0 || block >= a.num_blocks) return -1;
  return ((block * a.block_size + pos % a.block_size) * a.kv_heads + g) * a.head_size;
}

template <typename T>
__global__ void paged_append_kernel(PagedAttentionArgs a) {
  const int64_t t = blockIdx.x;
  const int64_t s = sequence_of(a, t);
  if (s < 0) return;
  const int64_t pos = position_of(a, s, t);
  const int64_t half = a.rotary_dim / 2;
  const bool rotary = a.do_rotary && pos >= 0 && pos < a.rotary_rows;
  const T* cos = rotary ? static_cast<const T*>(a.cos_cache) + pos * half : nullptr;
  const T* sin = rotary ? static_cast<const T*>(a.sin_cache) + pos * half : nullptr;
  for (int64_t e = threadIdx.x; e < a.kv_heads * a.head_size; e += blockDim.x) {
    const int64_t g = e / a.head_size, i = e % a.head_size;
    const int64_t slot = slot_of(a, s, pos, g);
    if (slot < 0) continue;
    const T* k = static_cast<const T*>(a.new_k) + t * a.new_kv_row + g * a.head_size;
    const T* v = static_cast<const T*>(a.new_v) + t * a.new_kv_row + g * a.head_size;
    static_cast<T*>(a.key_cache)[slot + i] = head_element(k, i, cos, sin, a.rotary_dim, a.rotary_interleaved);
    static_cast<T*>(a.value_cache)[slot + i] = v[i];
  }
}

// Loads the rotated, rounded, scaled query head of (token t, head h) into q[k] = element lane + 32 k.
template <typename T>
__device__ void load_query(const PagedAttentionArgs& a, int64_t t, int64_t h, int64_t pos, int lane,
                           float (&q)[kMaxPerLane]) {
  const int64_t half = a.rotary_dim / 2;
  const bool rotary = a.do_rotary && pos >= 0 && pos < a.rotary_rows;
  const T* cos = rotary ? static_cast<const T*>(a.cos_cache) + pos * half : nullptr;
  const T* sin = rotary ? static_cast<const T*>(a.sin_cache) + pos * half : nullptr;
  const T* query = static_cast<const T*>(a.query) + t * a.query_row + h * a.head_size;
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t i = lane + 32 * k;
    q[k] = i < a.head_size
               ? to_float(head_element(query, i, cos, sin, a.rotary_dim, a.rotary_interleaved)) * a.scale
               : 0.0f;
  }
}

// One (token, head, split): the split's share of the token's keys, a warp per fourth key, merged
// across the block's warps; the result goes to `out` (one split) or to the partials.
template <typename T>
__global__ void paged_attention_kernel(PagedAttentionArgs a) {
  __shared__ float warp_m[kWarps], warp_l[kWarps];
  __shared__ float warp_acc[kWarps][kPagedMaxHeadSize];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = blockIdx.x, h = blockIdx.y, split = blockIdx.z, d = a.head_size;
  const int64_t s = sequence_of(a, t);
  const int64_t pos = s >= 0 ? position_of(a, s, t) : -1;
  const int64_t first = a.window >= 0 ? imax(0, pos + 1 - a.window) : 0;
  const int64_t keys = imax(0, pos + 1 - first), chunk = (keys + a.splits - 1) / a.splits;
  const int64_t lo = first + split * chunk, hi = imin(lo + chunk, pos + 1);
  const int64_t g = h / (a.num_heads / a.kv_heads);
  float q[kMaxPerLane], acc[kMaxPerLane];
  if (s >= 0) load_query<T>(a, t, h, pos, lane, q);
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) acc[k] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const T* key_rows = static_cast<const T*>(a.key_cache);
  const T* value_rows = static_cast<const T*>(a.value_cache);
  for (int64_t key = lo + warp; s >= 0 && key < hi; key += kWarps) {
    const int64_t slot = slot_of(a, s, key, g);
    if (slot < 0) continue;
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t i = lane + 32 * k;
      if (i < d) dot += q[k] * to_float(key_rows[slot + i]);
    }
    dot = warp_sum(dot);
    const float score = a.softcap > 0.0f ? a.softcap * tanhf(dot / a.softcap) : dot;
    const float new_m = fmaxf(m, score);
    const float correction = __expf(m - new_m), p = __expf(score - new_m);  // exp(-inf) = 0
    l = l * correction + p;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t i = lane + 32 * k;
      acc[k] = acc[k] * correction + (i < d ? p * to_float(value_rows[slot + i]) : 0.0f);
    }
    m = new_m;
  }
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    if (lane + 32 * k < d) warp_acc[warp][lane + 32 * k] = acc[k];
  }
  __syncthreads();
  float block_m = -INFINITY;
  for (int w = 0; w < kWarps; ++w) block_m = fmaxf(block_m, warp_m[w]);
  float block_l = 0.0f, weight[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = block_m == -INFINITY ? 0.0f : __expf(warp_m[w] - block_m);
    block_l += warp_l[w] * weight[w];
  }
  float* partial = a.splits > 1 ? a.partials + ((t * a.num_heads + h) * a.splits + split) * (d + 2) : nullptr;
  if (partial != nullptr && threadIdx.x == 0) {
    partial[0] = block_m;
    partial[1] = block_l;
  }
  T* out = static_cast<T*>(a.out) + (t * a.num_heads + h) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w) v += warp_acc[w][i] * weight[w];
    if (partial != nullptr) {
      partial[2 + i] = v;
    } else {
      out[i] = from_float<T>(block_l > 0.0f ? v / block_l : 0.0f);
    }
  }
}

// Merges the splits of (token, head): out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M).
template <typename T>
__global__ void paged_combine_kernel(PagedAttentionArgs a) {
  const int64_t t = blockIdx.x, h = blockIdx.y, d = a.head_size;
  const float* partial = a.partials + (t * a.num_heads + h) * a.splits * (d + 2);
  float top = -INFINITY;
  for (int64_t s = 0; s < a.splits; ++s) top = fmaxf(top, partial[s * (d + 2)]);
  float total = 0.0f;
  for (int64_t s = 0; s < a.splits; ++s) {
    const float m = partial[s * (d + 2)];
    total += m == -INFINITY ? 0.0f : partial[s * (d + 2) + 1] * __expf(m - top);
  }
  T* out = static_cast<T*>(a.out) + (t * a.num_heads + h) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = 0.0f;
    for (int64_t s = 0; s < a.splits; ++s) {
      const float m = partial[s * (d + 2)];
      if (m != -INFINITY) v += partial[s * (d + 2) + 2 + i] * __expf(m - top);
    }
    out[i] = from_float<T>(total > 0.0f ? v / total : 0.0f);
  }
}

}  // namespace

void plan_paged_attention(PagedAttentionArgs& a) {
  // Enough blocks to fill the GPU a few times over (a decode of one sequence has only its heads),
  // each split at least 32 keys of the longest context the tables can address.
  constexpr int64_t kTargetBlocks = 1024, kMaxSplits = 32, kMinSplitKeys = 32;
  const int64_t units = std::max<int64_t>(1, a.tokens * a.num_heads);
  const int64_t most_keys = a.max_blocks * a.block_size;
  a.splits = std::clamp<int64_t>(kTargetBlocks / units, 1, std::min(kMaxSplits, std::max<int64_t>(1, most_keys / kMinSplitKeys)));
  a.workspace_bytes = a.splits > 1 ? static_cast<size_t>(units * a.splits * (a.head_size + 2)) * sizeof(float) : 0;
}

Status launch_paged_attention(const PagedAttentionArgs& a, void* stream) {
  if (a.tokens == 0) return Status::ok();
  if (a.head_size > kPagedMaxHeadSize || a.sequences < 1 || a.num_heads % a.kv_heads != 0) {
    return OG_ERROR("PagedAttention: unsupported arguments (head size ", a.head_size, ", up to ", kPagedMaxHeadSize, ")");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  // Outputs bound apart from the inputs take a copy of the cache first (the engine binds them
  // to the same buffers, and nothing is copied).
  const size_t cache_bytes =
      static_cast<size_t>(dtype_storage_bytes(a.dtype, a.num_blocks * a.block_size * a.kv_heads * a.head_size));
  for (const auto& [from, to] : {std::pair{a.key_cache_in, a.key_cache}, std::pair{a.value_cache_in, a.value_cache}}) {
    if (from != to) OG_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(to, from, cache_bytes, cudaMemcpyDeviceToDevice, s), "PagedAttention cache copy"));
  }
  if (a.splits > 1 && a.partials == nullptr) return OG_ERROR("PagedAttention: the split plan needs its workspace");
  const dim3 attention_grid(static_cast<unsigned>(a.tokens), static_cast<unsigned>(a.num_heads),
                            static_cast<unsigned>(a.splits));
  const dim3 heads_grid(static_cast<unsigned>(a.tokens), static_cast<unsigned>(a.num_heads));
  const bool known = dispatch_float_type(a.dtype, [&]<typename T>() {
    paged_append_kernel<T><<<static_cast<unsigned>(a.tokens), 128, 0, s>>>(a);
    paged_attention_kernel<T><<<attention_grid, kWarps * 32, 0, s>>>(a);
    if (a.splits > 1) paged_combine_kernel<T><<<heads_grid, 64, 0, s>>>(a);
  });
  if (!known) return OG_ERROR("PagedAttention: unsupported dtype ", dtype_name(a.dtype));
  return launch_status("paged_attention_kernel");
}

}  // namespace onnx_genai::cuda
