// PagedAttention on the GPU (paged_attention_kernels.h), two kernels on one stream:
//
//   append     one block per packed token, a thread per element of its KV heads: the token's key
//              (rotated at its position, rounded to the storage type as the CPU's rotate_head does)
//              and value go to the slot its sequence's block table names.
//   attention  one warp per (token, query head), four heads of a token per block. The query head
//              (rotated, rounded, scaled) sits in shared memory; keys go 32 at a time, a lane per
//              key computing its whole dot product from the cache row, then the warp takes the
//              chunk's max and sum (online softmax) and each lane accumulates the value elements it
//              owns (lane + 32 i) over the chunk's keys, their weights passed by shuffles.
//
// A CUDA-core kernel: every key row is read once per query head (no sharing across the heads of a
// KV group, no tensor cores, no split of long contexts across blocks) — the simple reference
// shape; the fast path for long contexts and large batches is a tensor-core kernel still to come.
// Capture-safe: no allocation, no host sync, launch shapes fixed by the plan.
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

template <typename T>
__global__ void paged_attention_kernel(PagedAttentionArgs a) {
  __shared__ float q_shared[kWarps][kPagedMaxHeadSize];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = blockIdx.x, h = static_cast<int64_t>(blockIdx.y) * kWarps + warp;
  if (h >= a.num_heads) return;
  const int64_t d = a.head_size;
  T* out = static_cast<T*>(a.out) + (t * a.num_heads + h) * d;
  const int64_t s = sequence_of(a, t);
  if (s < 0) {
    for (int64_t i = lane; i < d; i += 32) out[i] = from_float<T>(0.0f);
    return;
  }
  const int64_t pos = position_of(a, s, t);
  const int64_t g = h / (a.num_heads / a.kv_heads);
  const int64_t half = a.rotary_dim / 2;
  const bool rotary = a.do_rotary && pos >= 0 && pos < a.rotary_rows;
  const T* cos = rotary ? static_cast<const T*>(a.cos_cache) + pos * half : nullptr;
  const T* sin = rotary ? static_cast<const T*>(a.sin_cache) + pos * half : nullptr;
  const T* query = static_cast<const T*>(a.query) + t * a.query_row + h * d;
  float* q = q_shared[warp];
  for (int64_t i = lane; i < d; i += 32) {
    q[i] = to_float(head_element(query, i, cos, sin, a.rotary_dim, a.rotary_interleaved)) * a.scale;
  }
  __syncwarp();
  const T* keys = static_cast<const T*>(a.key_cache);
  const T* values = static_cast<const T*>(a.value_cache);
  const int64_t first = a.window >= 0 ? imax(0, pos + 1 - a.window) : 0;
  float m = -INFINITY, l = 0.0f, acc[kMaxPerLane];
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) acc[k] = 0.0f;
  for (int64_t base = first; base <= pos; base += 32) {
    const int64_t key = base + lane;
    const int64_t slot = key <= pos ? slot_of(a, s, key, g) : -1;
    float score = -INFINITY;
    if (slot >= 0) {
      float dot = 0.0f;
      for (int64_t i = 0; i < d; ++i) dot += q[i] * to_float(keys[slot + i]);
      score = a.softcap > 0.0f ? a.softcap * tanhf(dot / a.softcap) : dot;
    }
    float chunk_max = score;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) chunk_max = fmaxf(chunk_max, __shfl_xor_sync(0xffffffffu, chunk_max, o));
    const float new_m = fmaxf(m, chunk_max);
    if (new_m == -INFINITY) continue;  // nothing readable in this chunk yet
    const float p = score == -INFINITY ? 0.0f : __expf(score - new_m);
    const float correction = m == -INFINITY ? 0.0f : __expf(m - new_m);
    l = l * correction + warp_sum(p);
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) acc[k] *= correction;
    for (int j = 0; j < 32; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      const int64_t slot_j = __shfl_sync(0xffffffffu, slot, j);
      if (pj == 0.0f || slot_j < 0) continue;
#pragma unroll
      for (int k = 0; k < kMaxPerLane; ++k) {
        const int64_t i = lane + 32 * k;
        if (i < d) acc[k] += pj * to_float(values[slot_j + i]);
      }
    }
    m = new_m;
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t i = lane + 32 * k;
    if (i < d) out[i] = from_float<T>(acc[k] * inv);
  }
}

}  // namespace

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
  const dim3 attention_grid(static_cast<unsigned>(a.tokens), static_cast<unsigned>((a.num_heads + kWarps - 1) / kWarps));
  const bool known = dispatch_float_type(a.dtype, [&]<typename T>() {
    paged_append_kernel<T><<<static_cast<unsigned>(a.tokens), 128, 0, s>>>(a);
    paged_attention_kernel<T><<<attention_grid, kWarps * 32, 0, s>>>(a);
  });
  if (!known) return OG_ERROR("PagedAttention: unsupported dtype ", dtype_name(a.dtype));
  return launch_status("paged_attention_kernel");
}

}  // namespace onnx_genai::cuda
