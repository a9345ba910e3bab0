// Device helpers shared by the PagedAttention kernels (paged_attention_kernels.cu: the append,
// the CUDA-core attention and the combine; paged_attention_flash.cu: the tensor-core kernel), and
// the interface between those two files. .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "onnx_genai/status.h"
#include "ops/cuda/attention_device.cuh"
#include "ops/cuda/paged_attention_kernels.h"

namespace onnx_genai::cuda {

// The sequence owning packed token t (query_starts[s] <= t < query_starts[s + 1]), or -1.
__device__ inline int64_t sequence_of(const PagedAttentionArgs& a, int64_t t) {
  if (t >= a.query_starts[a.sequences] || t < a.query_starts[0]) return -1;
  int64_t lo = 0, hi = a.sequences - 1;
  while (lo < hi) {  // the last s with query_starts[s] <= t
    const int64_t mid = (lo + hi + 1) / 2;
    if (a.query_starts[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

__device__ inline int64_t position_of(const PagedAttentionArgs& a, int64_t s, int64_t t) {
  return a.seq_lens[s] - (a.query_starts[s + 1] - a.query_starts[s]) + (t - a.query_starts[s]);
}

// Element offset of (pos, KV head g) of sequence s, or -1 when its block id is out of range.
__device__ inline int64_t slot_of(const PagedAttentionArgs& a, int64_t s, int64_t pos, int64_t g) {
  if (pos < 0 || pos >= a.max_blocks * a.block_size) return -1;
  const int64_t block = a.block_tables[s * a.max_blocks + pos / a.block_size];
  if (block < 0 || block >= a.num_blocks) return -1;
  return ((block * a.block_size + pos % a.block_size) * a.kv_heads + g) * a.head_size;
}

// Factor of a (token, head h)'s accumulated output, given its running max m (natural-log units,
// -inf when it saw no key) and sum l: 1 / l, or with a head sink 1 / (l + e^(sink - m)), rescaled to
// the larger of the two (the CPU's finish).
template <typename T>
__device__ inline float paged_finish(const PagedAttentionArgs& a, float m, float l, int64_t h) {
  if (a.head_sink == nullptr) return l > 0.0f ? 1.0f / l : 0.0f;
  const float sink = to_float(static_cast<const T*>(a.head_sink)[h]);
  const float top = fmaxf(m, sink), kept = expf(m - top);  // exp(-inf) = 0
  return kept / (l * kept + expf(sink - top));
}

// ---- paged_attention_flash.cu: the tensor-core kernel (f16 / bf16, head sizes up to 128 in
// multiples of 8) ----
// Plans it (host-side, once per plan): flash_dims stays 0 where it does not apply (the CUDA-core
// kernel runs). The launch queues it on `stream` after the append kernel.
Status plan_paged_flash(PagedAttentionArgs& args);
void launch_paged_flash(const PagedAttentionArgs& args, cudaStream_t stream);

}  // namespace onnx_genai::cuda
