// Load-time sharding of a decoder graph for tensor parallelism (Megatron-style), so N ranks run
// the same ONNX file without a re-export. Rank r of N keeps:
//
//   attention   per com.microsoft GroupQueryAttention: query heads [r H/N, (r+1) H/N) and KV heads
//               [r KV/N, (r+1) KV/N), whole GQA groups (KV % N == 0); the q/k/v projections keep
//               those heads' output columns (one packed q|k|v projection, three, or one split
//               into three by a Split whose sizes shrink; a constant bias Add after them is cut
//               alike; per-head steps between, com.microsoft RotaryEmbedding and Qwen3's q/k
//               norms (Reshape -> (Simplified)RMS norm -> Reshape), pass the rank's heads through,
//               a rotary's num_heads and the last Reshape's width shrinking),
//               num_heads / kv_num_heads shrink, and so do the past/present KV dims: each rank
//               caches only its KV heads.
//               The o-projection keeps the matching input rows and is followed by an AllReduce.
//   MLP         a projection whose input is computed elementwise (Mul, Sigmoid, Gelu, ...) from
//               projections of one activation (gate/up) is a down-projection: gate/up keep
//               intermediate columns [r I/N, (r+1) I/N), down keeps those input rows and is
//               followed by an AllReduce.
//   MoE         per com.microsoft MoE / QMoE: each expert's intermediate features [r I/N, (r+1) I/N)
//               (fc1 / fc3 rows, with fused gate/up their pairs or halves; fc2 along K on whole
//               bytes and quantization blocks), fc2's bias on rank 0 only, then an AllReduce; the
//               router stays whole, so every rank picks the same experts.
//   LM head     the projection feeding the logits keeps vocabulary columns [r V/N, (r+1) V/N),
//               and an AllGather along the last axis gives every rank the whole logits.
//   embedding   a Gather from a constant [V, hidden] table keeps rows [r V/N, (r+1) V/N): each
//               rank looks up the ids in its range, zeros elsewhere, and an AllReduce adds them.
//
// Everything else (norms, residual adds, the mask's length plumbing) is computed by every rank on
// replicated values. Projections are MatMul with a constant 2-D weight (any float dtype) or
// com.microsoft MatMulNBits (4/8-bit): a K split (o/down) must fall on quantization blocks. The
// collectives (ops/schema/collective.h) run through the session's communicator; an AllReduce
// of float16 / bfloat16 activations sums them in float32 and rounds once.
//
// A graph the pass does not recognise is refused with one error naming the node; N = 1 leaves
// the graph as it is.
#pragma once

#include <cstdint>

#include "graph/graph.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

struct TensorParallelShards {
  int attention_layers = 0;  // GroupQueryAttention nodes sharded by heads
  int mlps = 0;              // down projections sharded by intermediate rows
  int moe_layers = 0;        // MoE / QMoE nodes sharded by each expert's intermediate features
  bool lm_head = false;      // the LM head sharded by vocabulary
  bool embedding = false;    // the token embedding sharded by vocabulary
};

// Rewrites `graph` into rank `rank`'s part of a `world_size`-way tensor-parallel model; `logits`
// names the logits output.
Result<TensorParallelShards> shard_for_tensor_parallel(Graph& graph, const std::string& logits, int rank,
                                                       int world_size);

}  // namespace onnx_genai
