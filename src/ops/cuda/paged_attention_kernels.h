// Launch interface of the CUDA PagedAttention kernels (paged_attention_kernels.cu). No CUDA
// headers needed. Semantics: ops/schema/paged_attention.h, as computed by
// ops/cpu/paged_attention.cc.
//
// The metadata (block tables, offsets, lengths) lives on the device, so a bad entry cannot fail
// the run as the CPU kernel's checks do: a token outside every sequence gets a zero output row; a
// position whose block id is outside the pool is never written or read (the CUDA-core kernel
// skips the key, the tensor-core kernel reads zeros for its key and value).
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

inline constexpr int64_t kPagedMaxHeadSize = 256;

// kAuto: the tensor-core kernel (paged_attention_flash.cu) where it supports the step, else the
// CUDA-core one; kCudaCore: always the CUDA-core kernel (the benchmark's baseline).
enum class PagedKernel { kAuto, kCudaCore };

struct PagedAttentionArgs {
  DType dtype = DType::kF32;
  int64_t tokens = 0, sequences = 0, max_blocks = 0, num_blocks = 0, block_size = 0;
  int64_t num_heads = 0, kv_heads = 0, head_size = 0;
  int64_t query_row = 0, new_kv_row = 0;  // elements per token in query / new_k, new_v
  float scale = 0, softcap = 0;
  int64_t window = -1;
  bool do_rotary = false, rotary_interleaved = false;
  int64_t rotary_dim = 0, rotary_rows = 0;
  // Device pointers.
  const void* query = nullptr;
  const void* new_k = nullptr;
  const void* new_v = nullptr;
  const void* key_cache_in = nullptr;  // the cache inputs
  const void* value_cache_in = nullptr;
  void* key_cache = nullptr;  // the cache outputs, written in place (copied from the inputs first when apart)
  void* value_cache = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* query_starts = nullptr;
  const int32_t* seq_lens = nullptr;
  const void* cos_cache = nullptr;
  const void* sin_cache = nullptr;
  const void* head_sink = nullptr;  // [num_heads] of the storage type, or null
  void* out = nullptr;
  PagedKernel kernel = PagedKernel::kAuto;  // set before plan_paged_attention
  // Plan (plan_paged_attention): blocks per unit of work over its keys (splits), and the workspace
  // for their partial results when more than one; the tensor-core kernel's head-size instance
  // (flash_dims, 0 when the CUDA-core kernel runs), shared memory, grid of slices (an upper bound:
  // the step's own count is computed on the device into the workspace at unit_starts_offset).
  int64_t splits = 1;
  size_t workspace_bytes = 0;
  int64_t flash_dims = 0, flash_units = 0;
  size_t flash_smem_bytes = 0, unit_starts_offset = 0;
  float* partials = nullptr;  // the workspace, set per run
};

// Fills the plan fields from the shape fields (host-side, once per plan).
Status plan_paged_attention(PagedAttentionArgs& args);

// Queues the append and attention kernels on `stream` (a cudaStream_t); no allocation, no sync.
Status launch_paged_attention(const PagedAttentionArgs& args, void* stream);

}  // namespace onnx_genai::cuda
