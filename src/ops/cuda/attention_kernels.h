// Launch interface of the CUDA GroupQueryAttention kernels (attention_kernels.cu). No CUDA
// headers needed. Semantics: ops/schema/attention.h (GroupQueryAttention), as computed by
// ops/cpu/attention_gqa.cc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// Head sizes the kernels take: 16-byte rows (a multiple of 8 elements) up to this many.
inline constexpr int64_t kGqaMaxHeadSize = 256;
inline constexpr int64_t kGqaHeadSizeMultiple = 8;

// Which kernel a plan may run a prompt (a step the tensor-core decode does not take) on. kAuto:
// the flash kernel (attention_prompt_kernels.cu) where it supports the step, else the tiled one;
// kTiled: always the tiled gqa_attention_kernel (the benchmark's baseline).
enum class GqaPromptKernel { kAuto, kTiled };

// Everything one GroupQueryAttention launch needs. The shape fields come from GqaParams; the
// split fields and workspace offsets are filled by plan_gqa; the pointers (device memory, of
// `dtype` unless noted) are set per run.
struct GqaArgs {
  // ---- shapes and attributes (GqaParams) ----
  DType dtype = DType::kF32;
  int64_t batch = 0, q_len = 0, kv_len = 0;
  int64_t num_heads = 0, kv_heads = 0, head_size = 0;
  int64_t past_len = 0, present_len = 0;
  bool first_prompt = false, causal = true, smooth_softmax = false;
  int64_t window = -1;
  float scale = 0.0f;  // effective scale
  float softcap = 0.0f;
  bool do_rotary = false, rotary_interleaved = false;
  int64_t rotary_dim = 0, rotary_rows = 0;
  int64_t bias_batch = 1, bias_heads = 1, bias_keys = 0;
  int64_t query_row = 0;  // elements per token in `query` (N*D, or (N + 2*Nkv)*D when packed)
  int64_t new_kv_row = 0;  // elements per token in `new_k` / `new_v`

  GqaPromptKernel prompt_kernel = GqaPromptKernel::kAuto;  // set before plan_gqa

  // ---- plan (plan_gqa) ----
  int vectors_per_block = 8;  // query vectors (head, row) one block carries: 8 or 16
  // The tiled prompt kernel's: query heads and rows per block, blocks over a KV head's heads and rows.
  // The tensor-core kernel's: query vectors per block, slices of a KV head's (row, head) vectors.
  int64_t heads_per_block = 1, head_slices = 1, rows_per_block = 1, row_tiles = 1;
  // KV split of a decode: `chunks` blocks per row. The prompt kernel's (q_len == 1) hold
  // chunk_len keys of the cache; the tensor-core kernel's divide each batch entry's own keys, at
  // least min_chunk_keys each.
  int64_t chunks = 1, chunk_len = 0, min_chunk_keys = 0;
  // > 0: the step runs on the tensor-core kernel built for head sizes up to this (64, 128 or
  // 256; f16 / bf16, q_len up to 16), with decode_smem_bytes of dynamic shared memory; its chunks
  // merge in a thread-block cluster (decode_cluster) or through gqa_combine_kernel.
  int decode_dims = 0;
  size_t decode_smem_bytes = 0;
  bool decode_cluster = false;
  // > 0: the step runs on the flash prompt kernel built for head sizes up to this (64 or 128;
  // f16 / bf16), with prompt_smem_bytes of dynamic shared memory.
  int prompt_dims = 0;
  size_t prompt_smem_bytes = 0;
  bool cache_in_workspace = false;    // no present outputs: the cache lives in the workspace
  size_t rotated_q_offset = 0, cache_offset = 0, partial_offset = 0;  // bytes into the workspace
  size_t workspace_bytes = 0;

  // ---- per run ----
  const void* query = nullptr;  // [B, S, query_row]
  const void* new_k = nullptr;  // key rows: element (b, s, g, i) at (b*S + s)*new_kv_row + g*D + i
  const void* new_v = nullptr;
  const void* past_k = nullptr;  // [B, Nkv, past_len, D] or null
  const void* past_v = nullptr;
  void* present_k = nullptr;  // [B, Nkv, present_len, D]; null with cache_in_workspace
  void* present_v = nullptr;
  bool shared_kv = false;  // present is the past buffer: only the new rows are written
  const int32_t* seqlens_k = nullptr;      // [B]
  const int64_t* position_ids = nullptr;   // [B, S] or null
  const void* cos_cache = nullptr;         // [rotary_rows, rotary_dim / 2]
  const void* sin_cache = nullptr;
  const void* attention_bias = nullptr;    // [bias_batch, bias_heads, S, bias_keys] or null
  const void* head_sink = nullptr;         // [N] or null
  void* out = nullptr;                     // [B, S, N*D]
  void* workspace = nullptr;
};

// Chooses the work split and the workspace layout from the shapes in `args`, and raises the
// kernels' shared-memory limit where they need more than the default. Host-side, once per plan.
Status plan_gqa(GqaArgs& args);

// Queues the GroupQueryAttention kernels on `stream` (a cudaStream_t): no allocation, no
// synchronisation, launch configuration fixed by the plan (CUDA-graph safe). seqlens_k is read
// on the device: entries the CPU kernel rejects (out of range) leave that batch entry's present
// rows untouched and its output rows zero; rotary positions are clamped to cos_cache.
Status launch_gqa(const GqaArgs& args, void* stream);

}  // namespace onnx_genai::cuda
