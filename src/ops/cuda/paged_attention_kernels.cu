// PagedAttention on the GPU (paged_attention_kernels.h), kernels on one stream:
//
//   append     one block per packed token, a thread per element of its KV heads: the token's key
//              (rotated at its position, rounded to the storage type as the CPU's rotate_head does)
//              and value go to the slot its sequence's block table names; a padding token's output
//              row is zeroed.
//   attention  the tensor-core kernel (paged_attention_flash.cu) for f16 / bf16 head sizes up to
//              128, else the CUDA-core kernel here: one block per (token, query head, split of its keys): the split's keys go to the
//              block's four warps in turn (key lo + w, lo + w + 4, ...); a warp reads a key row
//              coalesced (lane i holds elements i, i + 32, ...), sums the dot product across lanes,
//              and keeps a running max, sum and output (online softmax); the warps merge through
//              shared memory. With one split (enough tokens x heads to fill the GPU) the block
//              writes the output; else its (max, sum, output) go to the workspace and
//   combine    merges a (token, head)'s splits (flash decoding: a decode of a few sequences still
//              spreads its long context over the whole GPU).
//
// The CUDA-core kernel reads every key row once per query head (no sharing across the heads of a
// KV group, no tensor cores): it serves f32 and the head sizes the tensor-core kernel does not.
// Capture-safe: no allocation, no host sync, launch shapes fixed by the plan.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/paged_attention_device.cuh"

namespace onnx_genai::cuda {

namespace {

constexpr int kWarps = 4;  // query heads per attention block
constexpr int kMaxPerLane = kPagedMaxHeadSize / 32;

template <typename T>
__global__ void paged_append_kernel(PagedAttentionArgs a) {
  const int64_t t = blockIdx.x;
  const int64_t s = sequence_of(a, t);
  if (s < 0) {
    T* out = static_cast<T*>(a.out) + t * a.num_heads * a.head_size;
    for (int64_t e = threadIdx.x; e < a.num_heads * a.head_size; e += blockDim.x) out[e] = from_float<T>(0.0f);
    return;
  }
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
  const float finish = partial == nullptr ? paged_finish<T>(a, block_m, block_l, h) : 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w) v += warp_acc[w][i] * weight[w];
    if (partial != nullptr) {
      partial[2 + i] = v;
    } else {
      out[i] = from_float<T>(v * finish);
    }
  }
}

// Merges the splits of (token, head): out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M).
template <typename T>
__global__ void paged_combine_kernel(PagedAttentionArgs a) {
  const int64_t t = blockIdx.x, h = blockIdx.y, d = a.head_size;
  if (sequence_of(a, t) < 0) return;  // padding: the append kernel zeroed its output
  const float* partial = a.partials + (t * a.num_heads + h) * a.splits * (d + 2);
  const float sink = a.head_sink != nullptr ? to_float(static_cast<const T*>(a.head_sink)[h]) : -INFINITY;
  float top = sink;  // e^sink joins the denominator (exp(-inf) = 0 without one)
  for (int64_t s = 0; s < a.splits; ++s) top = fmaxf(top, partial[s * (d + 2)]);
  float total = top == -INFINITY ? 0.0f : expf(sink - top);
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

Status plan_paged_attention(PagedAttentionArgs& a) {
  // Enough blocks to fill the GPU a few times over (a decode of one sequence has only its heads),
  // each split at least 32 keys (the CUDA-core kernel) or one tile of 64 (the tensor-core one) of
  // the longest context the tables can address.
  constexpr int64_t kTargetBlocks = 1024, kFlashTargetBlocks = 512, kMaxSplits = 32;
  constexpr int64_t kMinSplitKeys = 32, kFlashMinSplitKeys = 64;
  a.flash_dims = 0;
  if (a.kernel == PagedKernel::kAuto) OG_RETURN_IF_ERROR(plan_paged_flash(a));
  const int64_t most_keys = a.max_blocks * a.block_size;
  const int64_t units = std::max<int64_t>(1, a.tokens * a.num_heads);  // (token, head) pairs
  size_t partial_units = static_cast<size_t>(units);
  if (a.flash_dims > 0) {
    const int64_t blocks = std::max<int64_t>(1, a.flash_units * a.kv_heads);
    a.splits = std::clamp<int64_t>(kFlashTargetBlocks / blocks, 1, std::min(kMaxSplits, std::max<int64_t>(1, most_keys / kFlashMinSplitKeys)));
  } else {
    a.splits = std::clamp<int64_t>(kTargetBlocks / units, 1, std::min(kMaxSplits, std::max<int64_t>(1, most_keys / kMinSplitKeys)));
  }
  const size_t partial_bytes = a.splits > 1 ? partial_units * static_cast<size_t>(a.splits * (a.head_size + 2)) * sizeof(float) : 0;
  a.unit_starts_offset = align256(partial_bytes);
  a.workspace_bytes = a.flash_dims > 0 ? a.unit_starts_offset + static_cast<size_t>(a.sequences + 1) * sizeof(int32_t) : partial_bytes;
  return Status::ok();
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
  if ((a.splits > 1 || a.flash_dims > 0) && a.partials == nullptr) return OG_ERROR("PagedAttention: the plan needs its workspace");
  const dim3 attention_grid(static_cast<unsigned>(a.tokens), static_cast<unsigned>(a.num_heads),
                            static_cast<unsigned>(a.splits));
  const dim3 heads_grid(static_cast<unsigned>(a.tokens), static_cast<unsigned>(a.num_heads));
  const bool known = dispatch_float_type(a.dtype, [&]<typename T>() {
    paged_append_kernel<T><<<static_cast<unsigned>(a.tokens), 128, 0, s>>>(a);
    if (a.flash_dims > 0) launch_paged_flash(a, s);
    else paged_attention_kernel<T><<<attention_grid, kWarps * 32, 0, s>>>(a);
    if (a.splits > 1) paged_combine_kernel<T><<<heads_grid, 64, 0, s>>>(a);
  });
  if (!known) return OG_ERROR("PagedAttention: unsupported dtype ", dtype_name(a.dtype));
  return launch_status("paged_attention_kernel");
}

}  // namespace onnx_genai::cuda
