// onnx_genai PagedAttention: attention over a paged KV cache for packed, variable-length rows
// (prefill chunks and decode tokens of many sequences in one call). The serving engine's decoder
// graph gets it at load in place of GroupQueryAttention (runtime/paged_attention_pass.h).
//
// With T packed tokens, S sequence slots, N query heads, Nkv KV heads, D head size and blocks of
// P positions:
//
//   query        [1, T, N*D], or packed [1, T, (N + 2*Nkv)*D] with key and value omitted
//   key, value   [1, T, Nkv*D]
//   key_cache, value_cache [blocks, P, Nkv, D]: position p of a sequence lives in block
//                block_tables[s][p / P], row p % P (sequence-major within a block)
//   block_tables int32 [S, max_blocks]
//   query_starts int32 [S + 1]: sequence s owns tokens [query_starts[s], query_starts[s + 1]);
//                tokens from query_starts[S] on are padding (their output is zero)
//   seq_lens     int32 [S]: positions sequence s holds after this call (cached + its new tokens);
//                a slot with no tokens and length 0 is unused
//   cos_cache, sin_cache [rows, rotary_dim/2] when do_rotary = 1
//   head_sink    [N] (optional): a per-head logit that joins every softmax denominator
//                (gpt-oss's attention sinks, GroupQueryAttention's input 11)
//   -> output [1, T, N*D]; key_cache_out, value_cache_out [blocks, P, Nkv, D], which the caller
//      binds to the key_cache / value_cache tensors (written in place; a distinct buffer gets a
//      copy of the cache first)
//
// New token i of sequence s sits at position seq_lens[s] - n_s + i (n_s its token count): its key
// (rotated at that position) and value are written to that slot, and its query attends causally
// to positions [0, position], cut to the last local_window_size of them. Attributes as
// GroupQueryAttention's: num_heads, kv_num_heads, scale, softcap, local_window_size, do_rotary,
// rotary_interleaved. Every index is data: the kernels bounds-check block ids, lengths and
// offsets and fail naming the sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op.h"

namespace onnx_genai {

struct PagedAttentionParams {
  static constexpr const char* kDomain = "onnx_genai";
  static constexpr const char* kOpType = "PagedAttention";
  static constexpr int kQuery = 0, kKey = 1, kValue = 2, kKeyCache = 3, kValueCache = 4, kBlockTables = 5,
                       kQueryStarts = 6, kSeqLens = 7, kCosCache = 8, kSinCache = 9, kHeadSink = 10;
  static constexpr int kOutput = 0, kKeyCacheOut = 1, kValueCacheOut = 2;

  DType dtype = DType::kUndefined;  // of query, key, value, the caches and the output
  int64_t tokens = 0, sequences = 0, max_blocks = 0;
  int64_t num_blocks = 0, block_size = 0;
  int64_t num_heads = 0, kv_heads = 0, head_size = 0;
  bool packed_qkv = false;
  float scale = 0.0f;  // 0 means 1/sqrt(D)
  float softcap = 0.0f;
  int64_t window = -1;
  bool do_rotary = false, rotary_interleaved = false;
  bool has_head_sink = false;
  int64_t rotary_dim = 0, rotary_rows = 0;

  float effective_scale() const;
  int64_t query_row_elems() const { return (packed_qkv ? num_heads + 2 * kv_heads : num_heads) * head_size; }

  // Checks attributes, dtypes and shapes; errors name `node`.
  static Result<PagedAttentionParams> make(const Node& node, const std::vector<const TensorInfo*>& inputs);
};

}  // namespace onnx_genai
