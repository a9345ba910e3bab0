// Attributes and input shapes of the attention ops, parsed and checked once: by the schemas
// (ops/schema/attention.cc, plan-time shape inference) and again by the kernels' prepare().
//
// com.microsoft GroupQueryAttention (ORT 1.30 CPU semantics), with B batch, S new tokens,
// N query heads, Nkv key/value heads, D head size, P the present length:
//
//   query       [B, S, N*D], or packed [B, S, (N + 2*Nkv)*D] with key and value omitted
//   key, value  [B, S, Nkv*D], or [B, 0, Nkv*D] (shared KV: attend to past only, append nothing)
//   past_key/value [B, Nkv, past_len, D] (BNSH), optional
//   seqlens_k   int32 [B] (or [B, 1], [1, B]): valid total length - 1 per batch entry (right padding)
//   total_sequence_length int32 scalar: the batch's longest total length; a plan-time value
//   cos_cache, sin_cache [rows, rotary_dim/2] (do_rotary = 1)
//   position_ids int64 [B, S]; attention_bias [B|1, N|1, S, total]; head_sink [N]
//   outputs: output [B, S, N*D]; present_key/value [B, Nkv, P, D], P = max(total, past_len)
//
// Phases (per batch entry b, total_b = seqlens_k[b] + 1): the first prompt (S == total) ignores
// any past and writes its S new rows (padding rows too) at row 0; later steps keep past rows
// [0, total_b - S) and write the new rows after them. Present rows past the written ones are
// zero unless present and past share one buffer. Query row s attends to keys
// [0, min(offset_b + s + 1, total_b)) (offset_b = 0 for the first prompt, total_b - S after),
// all of [0, total_b) when causal = 0, cut to the last local_window_size keys.
//
// com.microsoft MultiHeadAttention (ORT 1.30 CPU semantics), T = P + L keys:
//
//   query [B, S, N*D]; key [B, L, N*D] and value [B, L, N*Dv] (+ bias [2*N*D + N*Dv]), or key /
//   value already per head [B, N, L, D] / [B, N, L, Dv] (cross attention, no bias, no past)
//   key_padding_mask int32: [B] or [3B+2] (key lengths: keys >= len[b] are padding), [B, T] or
//   [B, S, T] (0 = padding); padding adds mask_filter_value to the score
//   attention_bias [B|1, N|1, S, T]; past_key / past_value [B, N, P, D] -> present [B, N, T, D]
//   unidirectional with S > 1: query row s < S-1 drops keys j > P + s; the last row sees all
//   score = scale * q.k + attention_bias + padding
//
// ONNX Attention (opset 23, 24), T = P + L keys, G = q_num_heads / kv_num_heads:
//
//   Q [B, Nq, S, D] / K [B, Nkv, L, D] / V [B, Nkv, L, Dv], or 3-D [B, S, heads*D] with
//   q_num_heads / kv_num_heads; past_key / past_value [B, Nkv, P, D] -> present [B, Nkv, T, D]
//   attn_mask bool (false = -inf) or float (added), broadcasting to [B, Nq, S, T]
//   is_causal: row s sees keys j <= P + s; nonpad_kv_seqlen (opset 24) [B]: keys j >= n[b]
//   masked (and, without past, the causal offset becomes n[b] - S)
//   score = softcap(scale * q.k) + mask; a row with every key masked outputs 0
//   qk_matmul_output (mode 0..3): scaled q.k, after softcap, after the mask, after softmax
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op.h"

namespace onnx_genai {

struct GqaParams {
  // Input and output slots in the ORT schema.
  static constexpr int kQuery = 0, kKey = 1, kValue = 2, kPastKey = 3, kPastValue = 4, kSeqlensK = 5,
                       kTotalSequenceLength = 6, kCosCache = 7, kSinCache = 8, kPositionIds = 9,
                       kAttentionBias = 10, kHeadSink = 11;
  static constexpr int kOutput = 0, kPresentKey = 1, kPresentValue = 2;

  DType dtype = DType::kUndefined;  // of query, key, value, caches and outputs
  int64_t batch = 0, q_len = 0, kv_len = 0;  // kv_len: S, or 0 for shared KV
  int64_t num_heads = 0, kv_heads = 0, head_size = 0;
  int64_t past_len = 0;     // past buffer length (dim 2), 0 without past
  int64_t total_len = 0;    // the total_sequence_length value
  int64_t present_len = 0;  // max(total_len, past_len)
  bool packed_qkv = false;
  bool has_past = false;
  bool first_prompt = false;  // S == total_sequence_length: past ignored, positions start at 0
  bool causal = true;
  int64_t window = -1;       // local_window_size; -1 = unlimited
  float scale = 0.0f;        // 0 means 1/sqrt(D)
  float softcap = 0.0f;
  bool smooth_softmax = false;
  // Rotary (do_rotary = 1): pairs rotate-half or interleaved over the first rotary_dim elements.
  bool do_rotary = false;
  bool rotary_interleaved = false;
  int64_t rotary_dim = 0, rotary_rows = 0;
  bool has_position_ids = false;
  bool has_bias = false;
  int64_t bias_batch = 1, bias_heads = 1, bias_keys = 0;  // attention_bias dims 0, 1 and 3
  bool has_head_sink = false;

  float effective_scale() const;

  // Checks attributes, dtypes and shapes; `total_sequence_length` is the plan-time value of
  // input 6 (null when unknown, which is an error). Errors name `node`.
  static Result<GqaParams> make(const Node& node, const std::vector<const TensorInfo*>& inputs,
                                const Tensor* total_sequence_length);
};

struct MhaParams {
  static constexpr int kQuery = 0, kKey = 1, kValue = 2, kBias = 3, kKeyPaddingMask = 4, kAttentionBias = 5,
                       kPastKey = 6, kPastValue = 7;
  static constexpr int kOutput = 0, kPresentKey = 1, kPresentValue = 2;

  // How key_padding_mask marks padding.
  enum class Mask { kNone, kKeyLengths, kPerKey, kPerQueryKey };

  DType dtype = DType::kUndefined;
  int64_t batch = 0, q_len = 0, kv_len = 0, past_len = 0, total_len = 0;
  int64_t num_heads = 0, head_size = 0, v_head_size = 0;
  bool kv_per_head = false;  // key / value given as [B, N, L, D]
  bool has_bias = false, has_past = false;
  Mask mask = Mask::kNone;
  bool has_attention_bias = false;
  int64_t bias_batch = 1, bias_heads = 1;
  float mask_filter_value = -10000.0f, scale = 0.0f;
  bool unidirectional = false;

  float effective_scale() const;
  static Result<MhaParams> make(const Node& node, const std::vector<const TensorInfo*>& inputs);
};

struct OnnxAttentionParams {
  static constexpr int kQ = 0, kK = 1, kV = 2, kAttnMask = 3, kPastKey = 4, kPastValue = 5, kNonpadKvSeqlen = 6;
  static constexpr int kY = 0, kPresentKey = 1, kPresentValue = 2, kQkMatmulOutput = 3;

  DType dtype = DType::kUndefined;
  bool four_d = false;  // [B, heads, seq, D] inputs and output
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, past_len = 0, total_len = 0;
  int64_t head_size = 0, v_head_size = 0;
  bool is_causal = false;
  float scale = 0.0f, softcap = 0.0f;
  bool has_past = false, has_nonpad = false;
  bool has_mask = false, mask_bool = false;
  int64_t mask_batch_stride = 0, mask_head_stride = 0, mask_row_stride = 0;  // 0 where the mask broadcasts
  int qk_mode = -1;  // qk_matmul_output_mode when that output is requested, else -1

  float effective_scale() const;
  // `qk_output_requested`: the node asks for output 3.
  static Result<OnnxAttentionParams> make(const Node& node, const std::vector<const TensorInfo*>& inputs,
                                          bool qk_output_requested);
};

}  // namespace onnx_genai
