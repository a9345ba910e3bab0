// The load-time rewrite that lets a decoder serve many sequences at once over a paged KV cache
// (the serving engine, src/engine/): every com.microsoft GroupQueryAttention becomes an
// onnx_genai PagedAttention (ops/schema/paged_attention.h) reading and writing K/V through block
// tables, so one run takes packed, variable-length rows: input_ids [1, T] holds the new tokens of
// every scheduled sequence back to back (prefill chunks and decode tokens alike).
//
// The graph gains the inputs
//   onnx_genai.block_tables int32 [S, max_blocks], onnx_genai.query_starts int32 [S + 1],
//   onnx_genai.seq_lens int32 [S], and per attention node (in graph order, i.e. layer order)
//   onnx_genai.key_cache.L / onnx_genai.value_cache.L [blocks, block_size, kv_heads, head_size]
// and the outputs onnx_genai.key_cache_out.L / onnx_genai.value_cache_out.L, which the caller binds
// to the cache tensors (the kernel writes the new rows in place). The past inputs and present
// outputs go, and so does whatever only computed GroupQueryAttention's lengths (the attention
// mask's ReduceSum and Shape plumbing, and the attention_mask input itself when nothing else reads
// it).
//
// A graph is rewritten only when every GroupQueryAttention node can be: past from graph inputs,
// present (if any) to graph outputs, no position_ids or attention_bias (a head_sink is carried
// over), causal, no smooth softmax. Otherwise nothing changes and the reason says which node stopped it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

inline constexpr const char* kBlockTablesInput = "onnx_genai.block_tables";
inline constexpr const char* kQueryStartsInput = "onnx_genai.query_starts";
inline constexpr const char* kSeqLensInput = "onnx_genai.seq_lens";

struct PagedLayer {
  std::string key_cache, value_cache;          // graph inputs
  std::string key_cache_out, value_cache_out;  // graph outputs
};

struct PagedRewrite {
  bool rewritten = false;
  std::string reason;              // why not, when not
  std::vector<PagedLayer> layers;  // one per attention node, in graph order
  DType kv_dtype = DType::kUndefined;
  int64_t kv_heads = 0, head_size = 0;
  int64_t rotary_rows = 0;  // positions the rotary caches cover (0: no rotary); bounds the context
};

// Rewrites `graph` for KV blocks of `block_size` positions. Errors only for a graph that cannot be
// finalized afterwards; an unsupported graph is reported in PagedRewrite::reason.
Result<PagedRewrite> rewrite_to_paged_attention(Graph& graph, int64_t block_size);

}  // namespace onnx_genai
