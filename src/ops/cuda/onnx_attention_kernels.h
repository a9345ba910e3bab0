// Launch interface of the kernel that readies an ONNX Attention step for the GroupQueryAttention
// kernels (onnx_attention_kernels.cu; the op: ops/cuda/onnx_attention.cc). No CUDA headers needed.
//
// It writes seqlens_k (T - 1 for every batch entry: every key exists) and, where the node needs
// one, the additive bias [bias_batch, bias_heads, S, T] that carries what GroupQueryAttention has
// no input for (semantics: ops/schema/attention.h, as ops/cpu/attention_onnx.cc computes them):
//
//   bias = -inf   where a bool attn_mask is false, key j >= nonpad_kv_seqlen[b] (clamped to
//                 [0, T]), or, with causal_nonpad, j > clamp(nonpad[b], 0, T + S) - S + s
//          mask   the float attn_mask's value elsewhere, 0 without one
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

struct OnnxAttentionSetup {
  DType dtype = DType::kF32;  // of Q, a float attn_mask and the bias
  int64_t batch = 0, q_len = 0, total_len = 0;
  int32_t* seqlens_k = nullptr;  // [B], written

  void* bias = nullptr;  // [bias_batch, bias_heads, S, T], written; null: seqlens_k only
  int64_t bias_batch = 1, bias_heads = 1;
  // attn_mask broadcast to [B, Nq, S, T]: element (b, h, s, j) at b * mask_batch_stride +
  // h * mask_head_stride + s * mask_row_stride + j (strides 0 where it broadcasts); null for none.
  const void* mask = nullptr;
  bool mask_bool = false;
  int64_t mask_batch_stride = 0, mask_head_stride = 0, mask_row_stride = 0;
  const int64_t* nonpad_kv_seqlen = nullptr;  // [B] or null
  // is_causal with the diagonal nonpad_kv_seqlen moves (no past): row s of entry b sees keys up
  // to clamp(nonpad[b], 0, T + S) - S + s.
  bool causal_nonpad = false;
};

// Queues the kernel on `stream` (a cudaStream_t): no allocation, no synchronisation.
Status launch_onnx_attention_setup(const OnnxAttentionSetup& args, void* stream);

}  // namespace onnx_genai::cuda
