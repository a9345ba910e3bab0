// Type and shape inference for GroupQueryAttention, MultiHeadAttention (com.microsoft) and the
// ONNX Attention; parameters and their checks are in ops/schema/attention.h (shared with
// the CPU kernels' prepare()).
#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "ops/schema/attention.h"

namespace onnx_genai {

namespace {

bool is_attention_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

const TensorInfo* input_at(const std::vector<const TensorInfo*>& inputs, int i) {
  return i < static_cast<int>(inputs.size()) ? inputs[static_cast<size_t>(i)] : nullptr;
}

// Fails on any attribute outside `known`.
Status check_attribute_names(const Node& node, const std::set<std::string>& known) {
  for (const auto& [name, attr] : node.attrs.all()) {
    if (known.count(name) == 0) return OG_ERROR(node.describe(), ": unsupported attribute '", name, "'");
  }
  return Status::ok();
}

// Attributes ORT 1.30 defines for GroupQueryAttention whose non-default values select features
// this runtime does not implement (windowed or quantized KV caches, QK outputs).
Status check_gqa_unsupported_attributes(const Node& node) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  const Attributes& a = node.attrs;
  if (a.get_int("sliding_window_cache", 0) != 0) return fail("sliding_window_cache=1 is not supported");
  if (a.get_int("qk_output", 0) != 0) return fail("qk_output (the output_qk output) is not supported");
  if (a.get_string("k_quant_type", "NONE") != "NONE" || a.get_string("v_quant_type", "NONE") != "NONE" ||
      a.get_int("kv_cache_bit_width", 0) != 0) {
    return fail("quantized KV caches (k_quant_type, v_quant_type, kv_cache_bit_width) are not supported");
  }
  return Status::ok();
}

// Query / key / value shapes, head size and packing.
Status parse_gqa_qkv(const Node& node, const std::vector<const TensorInfo*>& inputs, GqaParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  const TensorInfo* query = input_at(inputs, GqaParams::kQuery);
  const TensorInfo* key = input_at(inputs, GqaParams::kKey);
  const TensorInfo* value = input_at(inputs, GqaParams::kValue);
  if (query == nullptr) return fail("input query is required");
  if (!is_attention_float(query->dtype)) {
    return fail("query must be float32, float16 or bfloat16, got ", dtype_name(query->dtype));
  }
  p.dtype = query->dtype;
  if (query->shape.rank() != 3) return fail("query must be 3-D [batch, sequence, hidden], got ", query->shape.to_string());
  p.batch = query->shape[0];
  p.q_len = query->shape[1];
  const int64_t hidden = query->shape[2];
  if ((key == nullptr) != (value == nullptr)) return fail("key and value must be both present or both absent (packed QKV)");
  p.packed_qkv = key == nullptr;
  const int64_t heads_in_query = p.packed_qkv ? p.num_heads + 2 * p.kv_heads : p.num_heads;
  if (hidden % heads_in_query != 0) {
    return fail("query hidden size ", hidden, " is not divisible by ", heads_in_query,
                p.packed_qkv ? " (num_heads + 2 * kv_num_heads, packed QKV)" : " (num_heads)");
  }
  p.head_size = hidden / heads_in_query;
  if (p.head_size == 0) return fail("head size is 0 (query ", query->shape.to_string(), ")");
  p.kv_len = p.q_len;
  if (p.packed_qkv) return Status::ok();
  for (const auto& [name, t] : {std::pair{"key", key}, std::pair{"value", value}}) {
    if (t->dtype != p.dtype) return fail(name, " dtype ", dtype_name(t->dtype), " differs from query dtype ", dtype_name(p.dtype));
    const int64_t kv_hidden = p.kv_heads * p.head_size;
    if (t->shape.rank() != 3 || t->shape[0] != p.batch || t->shape[2] != kv_hidden) {
      return fail(name, " shape ", t->shape.to_string(), " must be [batch=", p.batch, ", sequence, kv_num_heads*head_size=", kv_hidden, "]");
    }
  }
  if (key->shape[1] != value->shape[1]) {
    return fail("key and value sequence lengths differ: ", key->shape.to_string(), " vs ", value->shape.to_string());
  }
  p.kv_len = key->shape[1];
  if (p.kv_len != p.q_len && p.kv_len != 0) {
    return fail("key sequence length ", p.kv_len, " must equal the query's (", p.q_len, ") or be 0 (shared KV)");
  }
  return Status::ok();
}

Status parse_gqa_past(const Node& node, const std::vector<const TensorInfo*>& inputs, GqaParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  const TensorInfo* past_key = input_at(inputs, GqaParams::kPastKey);
  const TensorInfo* past_value = input_at(inputs, GqaParams::kPastValue);
  if ((past_key == nullptr) != (past_value == nullptr)) return fail("past_key and past_value must be both present or both absent");
  p.has_past = past_key != nullptr;
  if (!p.has_past) {
    if (p.kv_len == 0) return fail("shared KV (key sequence length 0) needs past_key and past_value");
    return Status::ok();
  }
  for (const auto& [name, t] : {std::pair{"past_key", past_key}, std::pair{"past_value", past_value}}) {
    if (t->dtype != p.dtype) {
      return fail(name, " dtype ", dtype_name(t->dtype), " differs from query dtype ", dtype_name(p.dtype),
                  " (quantized KV caches are not supported)");
    }
    if (t->shape.rank() != 4 || t->shape[0] != p.batch || t->shape[1] != p.kv_heads || t->shape[3] != p.head_size) {
      return fail(name, " shape ", t->shape.to_string(), " must be [batch=", p.batch, ", kv_num_heads=", p.kv_heads,
                  ", past_sequence, head_size=", p.head_size, "]");
    }
  }
  if (past_key->shape[2] != past_value->shape[2]) {
    return fail("past_key ", past_key->shape.to_string(), " and past_value ", past_value->shape.to_string(),
                " have different sequence lengths");
  }
  p.past_len = past_key->shape[2];
  return Status::ok();
}

Status parse_gqa_lengths(const Node& node, const std::vector<const TensorInfo*>& inputs, const Tensor* total, GqaParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  const TensorInfo* seqlens = input_at(inputs, GqaParams::kSeqlensK);
  const TensorInfo* total_info = input_at(inputs, GqaParams::kTotalSequenceLength);
  if (seqlens == nullptr || total_info == nullptr) return fail("inputs seqlens_k and total_sequence_length are required");
  // ORT reads seqlens_k as batch values in a row, whatever its rank: older onnxruntime-genai
  // builders feed [batch, 1] (their ReduceSum keeps dims). A shape with two dims above 1 holds
  // batch values only by accident (ORT 1.30 reads it flat, later versions reject it).
  const Shape& seqlens_shape = seqlens->shape;
  const int64_t dims_above_one = std::count_if(seqlens_shape.dims().begin(), seqlens_shape.dims().end(),
                                               [](int64_t d) { return d != 1; });
  if (seqlens->dtype != DType::kI32 || seqlens_shape.rank() < 1 || seqlens_shape.numel() != p.batch || dims_above_one > 1) {
    return fail("seqlens_k must be int32 [batch=", p.batch, "] (or that with dims of 1 added, like [batch, 1]), got ",
                dtype_name(seqlens->dtype), " ", seqlens_shape.to_string());
  }
  // ORT: a scalar or a one-element vector.
  if (total_info->dtype != DType::kI32 || total_info->shape.rank() > 1 || total_info->shape.numel() != 1) {
    return fail("total_sequence_length must be an int32 scalar or [1], got ", dtype_name(total_info->dtype), " ",
                total_info->shape.to_string());
  }
  if (total == nullptr) return fail("total_sequence_length must be known when planning (it decides the present shape)");
  p.total_len = total->data<int32_t>()[0];
  if (p.total_len <= 0) return fail("total_sequence_length must be positive, got ", p.total_len);
  p.present_len = std::max(p.total_len, p.past_len);
  // ORT: S == total is the first prompt; S > 1 otherwise continues a prompt, for one sequence.
  p.first_prompt = p.q_len == p.total_len;
  if (!p.first_prompt && p.q_len > 1 && p.batch != 1) {
    return fail("batch must be 1 when a prompt continues past context (sequence ", p.q_len, " != total_sequence_length ",
                p.total_len, "), got batch ", p.batch);
  }
  if (p.kv_len == 0 && p.total_len > p.past_len) {
    return fail("shared KV: total_sequence_length ", p.total_len, " exceeds the past buffer length ", p.past_len);
  }
  return Status::ok();
}

Status parse_gqa_rotary(const Node& node, const std::vector<const TensorInfo*>& inputs, GqaParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  const TensorInfo* cos = input_at(inputs, GqaParams::kCosCache);
  const TensorInfo* sin = input_at(inputs, GqaParams::kSinCache);
  if ((cos == nullptr) != (sin == nullptr)) return fail("cos_cache and sin_cache must be both present or both absent");
  const TensorInfo* position_ids = input_at(inputs, GqaParams::kPositionIds);
  p.has_position_ids = position_ids != nullptr;
  if (!p.do_rotary) return Status::ok();  // ORT ignores the caches (and position_ids) without do_rotary
  if (cos == nullptr) return fail("do_rotary=1 needs cos_cache and sin_cache");
  for (const auto& [name, t] : {std::pair{"cos_cache", cos}, std::pair{"sin_cache", sin}}) {
    if (t->dtype != p.dtype) return fail(name, " dtype ", dtype_name(t->dtype), " differs from query dtype ", dtype_name(p.dtype));
    if (t->shape.rank() != 2 || t->shape[1] <= 0 || 2 * t->shape[1] > p.head_size) {
      return fail(name, " shape ", t->shape.to_string(), " must be [positions, rotary_dim/2] with rotary_dim <= head_size=", p.head_size);
    }
  }
  if (cos->shape != sin->shape) return fail("cos_cache ", cos->shape.to_string(), " and sin_cache ", sin->shape.to_string(), " differ");
  p.rotary_dim = 2 * cos->shape[1];
  p.rotary_rows = cos->shape[0];
  if (p.rotary_rows < p.total_len) {
    return fail("cos_cache has ", p.rotary_rows, " positions, fewer than total_sequence_length ", p.total_len);
  }
  if (position_ids != nullptr) {
    if (position_ids->dtype != DType::kI64 || position_ids->shape != Shape{p.batch, p.q_len}) {
      return fail("position_ids must be int64 [batch=", p.batch, ", sequence=", p.q_len, "], got ", dtype_name(position_ids->dtype),
                  " ", position_ids->shape.to_string());
    }
  }
  return Status::ok();
}

Status parse_gqa_bias_and_sink(const Node& node, const std::vector<const TensorInfo*>& inputs, GqaParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  if (const TensorInfo* bias = input_at(inputs, GqaParams::kAttentionBias)) {
    const Shape& s = bias->shape;
    if (bias->dtype != p.dtype) return fail("attention_bias dtype ", dtype_name(bias->dtype), " differs from query dtype ", dtype_name(p.dtype));
    if (s.rank() != 4 || (s[0] != 1 && s[0] != p.batch) || (s[1] != 1 && s[1] != p.num_heads) || s[2] != p.q_len ||
        s[3] != p.total_len) {
      return fail("attention_bias shape ", s.to_string(), " must be [1 or batch=", p.batch, ", 1 or num_heads=", p.num_heads,
                  ", sequence=", p.q_len, ", total_sequence_length=", p.total_len, "]");
    }
    p.has_bias = true;
    p.bias_batch = s[0];
    p.bias_heads = s[1];
    p.bias_keys = s[3];
  }
  if (const TensorInfo* sink = input_at(inputs, GqaParams::kHeadSink)) {
    if (sink->dtype != p.dtype || sink->shape != Shape{p.num_heads}) {
      return fail("head_sink must be ", dtype_name(p.dtype), " [num_heads=", p.num_heads, "], got ", dtype_name(sink->dtype), " ",
                  sink->shape.to_string());
    }
    p.has_head_sink = true;
  }
  return Status::ok();
}

}  // namespace

float GqaParams::effective_scale() const {
  return scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_size));
}

Result<GqaParams> GqaParams::make(const Node& node, const std::vector<const TensorInfo*>& inputs, const Tensor* total_sequence_length) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  OG_RETURN_IF_ERROR(check_attribute_names(
      node, {"num_heads", "kv_num_heads", "scale", "softcap", "local_window_size", "do_rotary", "rotary_interleaved",
             "smooth_softmax", "causal", "sliding_window_cache", "qk_output", "k_quant_type", "v_quant_type",
             "kv_cache_bit_width", "qk_norm_epsilon"}));
  OG_RETURN_IF_ERROR(check_gqa_unsupported_attributes(node));
  for (int i = kHeadSink + 1; i < static_cast<int>(inputs.size()); ++i) {
    if (inputs[static_cast<size_t>(i)] != nullptr) {
      return fail("input ", i, " (k_scale, v_scale, q_norm_weight or k_norm_weight) is not supported");
    }
  }
  GqaParams p;
  const Attributes& a = node.attrs;
  p.num_heads = a.get_int("num_heads", 0);
  p.kv_heads = a.get_int("kv_num_heads", 0);
  if (p.num_heads <= 0 || p.kv_heads <= 0) {
    return fail("num_heads and kv_num_heads must be positive, got ", p.num_heads, " and ", p.kv_heads);
  }
  if (p.num_heads % p.kv_heads != 0) {
    return fail("num_heads ", p.num_heads, " must be a multiple of kv_num_heads ", p.kv_heads);
  }
  p.scale = a.get_float("scale", 0.0f);
  p.softcap = a.get_float("softcap", 0.0f);
  if (p.softcap < 0.0f) return fail("softcap must be >= 0, got ", p.softcap);
  p.window = a.get_int("local_window_size", -1);
  if (p.window < -1) return fail("local_window_size must be -1 (off) or >= 0, got ", p.window);
  p.smooth_softmax = a.get_int("smooth_softmax", 0) != 0;
  p.causal = a.get_int("causal", 1) != 0;
  if (!p.causal && p.window != -1) return fail("local_window_size must be -1 when causal is 0");
  p.do_rotary = a.get_int("do_rotary", 0) != 0;
  p.rotary_interleaved = a.get_int("rotary_interleaved", 0) != 0;

  OG_RETURN_IF_ERROR(parse_gqa_qkv(node, inputs, p));
  OG_RETURN_IF_ERROR(parse_gqa_past(node, inputs, p));
  OG_RETURN_IF_ERROR(parse_gqa_lengths(node, inputs, total_sequence_length, p));
  OG_RETURN_IF_ERROR(parse_gqa_rotary(node, inputs, p));
  OG_RETURN_IF_ERROR(parse_gqa_bias_and_sink(node, inputs, p));
  if (p.do_rotary && p.head_size % 2 != 0) return fail("rotary needs an even head size, got ", p.head_size);
  return p;
}

namespace {

// key / value of MultiHeadAttention: [B, L, heads*D] (+ bias) or per head [B, N, L, D].
Status parse_mha_key_value(const Node& node, const TensorInfo& key, const TensorInfo& value, MhaParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  for (const auto& [name, t] : {std::pair{"key", &key}, std::pair{"value", &value}}) {
    if (t->dtype != p.dtype) return fail(name, " dtype ", dtype_name(t->dtype), " differs from query dtype ", dtype_name(p.dtype));
  }
  if (key.shape.rank() == 5) return fail("packed KV (key of rank 5) is not supported");
  if (key.shape.rank() != value.shape.rank() || (key.shape.rank() != 3 && key.shape.rank() != 4)) {
    return fail("key ", key.shape.to_string(), " and value ", value.shape.to_string(),
                " must both be [batch, kv_sequence, hidden] or both [batch, num_heads, kv_sequence, head_size]");
  }
  p.kv_per_head = key.shape.rank() == 4;
  if (p.kv_per_head) {
    if (key.shape != Shape{p.batch, p.num_heads, key.shape[2], p.head_size} || value.shape[0] != p.batch ||
        value.shape[1] != p.num_heads || value.shape[2] != key.shape[2]) {
      return fail("per-head key ", key.shape.to_string(), " / value ", value.shape.to_string(), " must be [batch=", p.batch,
                  ", num_heads=", p.num_heads, ", kv_sequence, head_size=", p.head_size, "] and [..., v_head_size]");
    }
    p.kv_len = key.shape[2];
    p.v_head_size = value.shape[3];
    return Status::ok();
  }
  if (key.shape != Shape{p.batch, key.shape[1], p.num_heads * p.head_size} || value.shape[0] != p.batch ||
      value.shape[1] != key.shape[1] || value.shape[2] % p.num_heads != 0) {
    return fail("key ", key.shape.to_string(), " / value ", value.shape.to_string(), " must be [batch=", p.batch,
                ", kv_sequence, hidden=", p.num_heads * p.head_size, "] and [batch, kv_sequence, num_heads*v_head_size]");
  }
  p.kv_len = key.shape[1];
  p.v_head_size = value.shape[2] / p.num_heads;
  return Status::ok();
}

Status parse_mha_past(const Node& node, const TensorInfo* past_key, const TensorInfo* past_value, MhaParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  if ((past_key == nullptr) != (past_value == nullptr)) return fail("past_key and past_value must be both present or both absent");
  p.has_past = past_key != nullptr;
  if (!p.has_past) return Status::ok();
  if (p.kv_per_head) return fail("past_key / past_value cannot be combined with per-head (4-D) key and value");
  const int64_t past = past_key->shape.rank() == 4 ? past_key->shape[2] : -1;
  if (past_key->dtype != p.dtype || past_value->dtype != p.dtype || past_key->shape != Shape{p.batch, p.num_heads, past, p.head_size} ||
      past_value->shape != Shape{p.batch, p.num_heads, past, p.v_head_size}) {
    return fail("past_key ", past_key->shape.to_string(), " / past_value ", past_value->shape.to_string(), " must be ",
                dtype_name(p.dtype), " [batch=", p.batch, ", num_heads=", p.num_heads, ", past_sequence, head_size=", p.head_size,
                " / v_head_size=", p.v_head_size, "]");
  }
  p.past_len = past;
  return Status::ok();
}

Status parse_mha_masks(const Node& node, const TensorInfo* mask, const TensorInfo* bias, MhaParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  if (mask != nullptr) {
    const Shape& s = mask->shape;
    if (mask->dtype != DType::kI32) return fail("key_padding_mask must be int32, got ", dtype_name(mask->dtype));
    if (s.rank() == 1 && (s[0] == p.batch || s[0] == 3 * p.batch + 2)) {
      p.mask = MhaParams::Mask::kKeyLengths;
    } else if (s == Shape{p.batch, p.total_len}) {
      p.mask = MhaParams::Mask::kPerKey;
    } else if (s == Shape{p.batch, p.q_len, p.total_len}) {
      p.mask = MhaParams::Mask::kPerQueryKey;
    } else {
      return fail("key_padding_mask shape ", s.to_string(), " must be [batch=", p.batch, "], [3*batch+2], [batch, total=",
                  p.total_len, "] or [batch, sequence=", p.q_len, ", total]");
    }
  }
  if (bias != nullptr) {
    const Shape& s = bias->shape;
    if (bias->dtype != p.dtype || s.rank() != 4 || (s[0] != 1 && s[0] != p.batch) || (s[1] != 1 && s[1] != p.num_heads) ||
        s[2] != p.q_len || s[3] != p.total_len) {
      return fail("attention_bias ", dtype_name(bias->dtype), " ", s.to_string(), " must be ", dtype_name(p.dtype), " [1 or batch=",
                  p.batch, ", 1 or num_heads=", p.num_heads, ", sequence=", p.q_len, ", total=", p.total_len, "]");
    }
    p.has_attention_bias = true;
    p.bias_batch = s[0];
    p.bias_heads = s[1];
  }
  return Status::ok();
}

}  // namespace

float MhaParams::effective_scale() const {
  return scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_size));
}

Result<MhaParams> MhaParams::make(const Node& node, const std::vector<const TensorInfo*>& inputs) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  OG_RETURN_IF_ERROR(check_attribute_names(node, {"num_heads", "mask_filter_value", "scale", "unidirectional"}));
  if (input_at(inputs, 8) != nullptr || input_at(inputs, 9) != nullptr) {
    return fail("inputs past_sequence_length and cache_indirection (shared KV buffers, beam search) are not supported");
  }
  MhaParams p;
  p.num_heads = node.attrs.get_int("num_heads", 0);
  if (p.num_heads <= 0) return fail("num_heads must be positive, got ", p.num_heads);
  p.mask_filter_value = node.attrs.get_float("mask_filter_value", -10000.0f);
  p.scale = node.attrs.get_float("scale", 0.0f);
  p.unidirectional = node.attrs.get_int("unidirectional", 0) != 0;
  const TensorInfo* query = input_at(inputs, kQuery);
  if (query == nullptr) return fail("input query is required");
  if (!is_attention_float(query->dtype)) return fail("query must be float32, float16 or bfloat16, got ", dtype_name(query->dtype));
  p.dtype = query->dtype;
  if (query->shape.rank() != 3) return fail("query must be [batch, sequence, hidden] (packed QKV is not supported), got ", query->shape.to_string());
  p.batch = query->shape[0];
  p.q_len = query->shape[1];
  if (query->shape[2] % p.num_heads != 0 || query->shape[2] == 0) {
    return fail("query hidden size ", query->shape[2], " is not a positive multiple of num_heads ", p.num_heads);
  }
  p.head_size = query->shape[2] / p.num_heads;
  const TensorInfo* key = input_at(inputs, kKey);
  const TensorInfo* value = input_at(inputs, kValue);
  if (key == nullptr || value == nullptr) return fail("key and value are required (packed QKV in query is not supported)");
  OG_RETURN_IF_ERROR(parse_mha_key_value(node, *key, *value, p));
  if (const TensorInfo* bias = input_at(inputs, kBias)) {
    if (p.kv_per_head) return fail("bias cannot be combined with per-head (4-D) key and value");
    const int64_t want = (2 * p.head_size + p.v_head_size) * p.num_heads;
    if (bias->dtype != p.dtype || bias->shape != Shape{want}) {
      return fail("bias must be ", dtype_name(p.dtype), " [", want, "] (q, k and v hidden sizes), got ", dtype_name(bias->dtype), " ",
                  bias->shape.to_string());
    }
    p.has_bias = true;
  }
  OG_RETURN_IF_ERROR(parse_mha_past(node, input_at(inputs, kPastKey), input_at(inputs, kPastValue), p));
  p.total_len = p.past_len + p.kv_len;
  OG_RETURN_IF_ERROR(parse_mha_masks(node, input_at(inputs, kKeyPaddingMask), input_at(inputs, kAttentionBias), p));
  return p;
}

namespace {

// Q / K / V of the ONNX Attention: heads and sizes from 4-D shapes or from the head attributes.
Status parse_onnx_attention_qkv(const Node& node, const TensorInfo& q, const TensorInfo& k, const TensorInfo& v,
                                OnnxAttentionParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  if (!is_attention_float(q.dtype)) return fail("Q must be float32, float16 or bfloat16, got ", dtype_name(q.dtype));
  p.dtype = q.dtype;
  if (k.dtype != p.dtype || v.dtype != p.dtype) return fail("K and V must have Q's dtype ", dtype_name(p.dtype));
  const int rank = q.shape.rank();
  if ((rank != 3 && rank != 4) || k.shape.rank() != rank || v.shape.rank() != rank) {
    return fail("Q, K and V must all be 3-D or all 4-D, got ", q.shape.to_string(), ", ", k.shape.to_string(), ", ", v.shape.to_string());
  }
  p.four_d = rank == 4;
  const int64_t q_heads = node.attrs.get_int("q_num_heads", 0), kv_heads = node.attrs.get_int("kv_num_heads", 0);
  p.batch = q.shape[0];
  if (p.four_d) {
    p.q_heads = q.shape[1];
    p.kv_heads = k.shape[1];
    p.q_len = q.shape[2];
    p.kv_len = k.shape[2];
    p.head_size = q.shape[3];
    p.v_head_size = v.shape[3];
    if ((q_heads != 0 && q_heads != p.q_heads) || (kv_heads != 0 && kv_heads != p.kv_heads)) {
      return fail("q_num_heads / kv_num_heads (", q_heads, ", ", kv_heads, ") disagree with Q / K (", p.q_heads, ", ", p.kv_heads, ")");
    }
  } else {
    if (q_heads <= 0 || kv_heads <= 0) return fail("3-D inputs need positive q_num_heads and kv_num_heads attributes");
    p.q_heads = q_heads;
    p.kv_heads = kv_heads;
    p.q_len = q.shape[1];
    p.kv_len = k.shape[1];
    if (q.shape[2] % q_heads != 0 || k.shape[2] % kv_heads != 0 || v.shape[2] % kv_heads != 0) {
      return fail("hidden sizes of Q ", q.shape.to_string(), ", K ", k.shape.to_string(), ", V ", v.shape.to_string(),
                  " are not divisible by q_num_heads ", q_heads, " / kv_num_heads ", kv_heads);
    }
    p.head_size = q.shape[2] / q_heads;
    p.v_head_size = v.shape[2] / kv_heads;
  }
  const Shape want_k = p.four_d ? Shape{p.batch, p.kv_heads, p.kv_len, p.head_size} : Shape{p.batch, p.kv_len, p.kv_heads * p.head_size};
  const Shape want_v = p.four_d ? Shape{p.batch, p.kv_heads, p.kv_len, p.v_head_size}
                                : Shape{p.batch, p.kv_len, p.kv_heads * p.v_head_size};
  if (k.shape != want_k || v.shape != want_v) {
    return fail("K ", k.shape.to_string(), " / V ", v.shape.to_string(), " must be ", want_k.to_string(), " / ", want_v.to_string());
  }
  if (p.q_heads <= 0 || p.kv_heads <= 0 || p.q_heads % p.kv_heads != 0) {
    return fail("q_num_heads ", p.q_heads, " must be a positive multiple of kv_num_heads ", p.kv_heads);
  }
  if (p.head_size == 0) return fail("head size is 0");
  return Status::ok();
}

// attn_mask broadcasts to [B, Nq, S, T]; its last dim must be T (as ORT requires).
Status parse_onnx_attention_mask(const Node& node, const TensorInfo& mask, OnnxAttentionParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  if (mask.dtype != DType::kBool && mask.dtype != p.dtype) {
    return fail("attn_mask must be bool or ", dtype_name(p.dtype), ", got ", dtype_name(mask.dtype));
  }
  const Shape& s = mask.shape;
  const int r = s.rank();
  const int64_t full[4] = {p.batch, p.q_heads, p.q_len, p.total_len};
  bool ok = r >= 1 && r <= 4 && s[r - 1] == p.total_len;
  for (int i = 0; ok && i < r - 1; ++i) ok = s[i] == 1 || s[i] == full[4 - r + i];
  if (!ok) {
    return fail("attn_mask shape ", s.to_string(), " does not broadcast to [batch=", p.batch, ", q_num_heads=", p.q_heads,
                ", q_sequence=", p.q_len, ", total_sequence=", p.total_len, "] with its last dim equal to total_sequence");
  }
  // Strides over (batch, head, row); 0 where the mask broadcasts.
  const auto dim = [&](int axis) { return axis >= 4 - r ? s[axis - (4 - r)] : 1; };
  p.mask_row_stride = dim(2) == 1 ? 0 : p.total_len;
  p.mask_head_stride = dim(1) == 1 ? 0 : dim(2) * p.total_len;
  p.mask_batch_stride = dim(0) == 1 ? 0 : dim(1) * dim(2) * p.total_len;
  p.has_mask = true;
  p.mask_bool = mask.dtype == DType::kBool;
  return Status::ok();
}

}  // namespace

float OnnxAttentionParams::effective_scale() const {
  return scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_size));
}

Result<OnnxAttentionParams> OnnxAttentionParams::make(const Node& node, const std::vector<const TensorInfo*>& inputs,
                                                      bool qk_output_requested) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  OG_RETURN_IF_ERROR(check_attribute_names(node, {"is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode",
                                                  "scale", "softcap", "softmax_precision"}));
  OnnxAttentionParams p;
  p.is_causal = node.attrs.get_int("is_causal", 0) != 0;
  p.scale = node.attrs.get_float("scale", 0.0f);
  p.softcap = node.attrs.get_float("softcap", 0.0f);
  if (p.softcap < 0.0f) return fail("softcap must be >= 0, got ", p.softcap);
  // softmax_precision only asks for at least that precision: softmax always runs in f32 here.
  const int64_t precision = node.attrs.get_int("softmax_precision", 1);
  if (precision != 1 && precision != 10 && precision != 16) {
    return fail("softmax_precision ", precision, " is not supported (float, float16 or bfloat16)");
  }
  if (qk_output_requested) {
    p.qk_mode = static_cast<int>(node.attrs.get_int("qk_matmul_output_mode", 0));
    if (p.qk_mode < 0 || p.qk_mode > 3) return fail("qk_matmul_output_mode must be 0, 1, 2 or 3, got ", p.qk_mode);
  }
  const TensorInfo* q = input_at(inputs, kQ);
  const TensorInfo* k = input_at(inputs, kK);
  const TensorInfo* v = input_at(inputs, kV);
  if (q == nullptr || k == nullptr || v == nullptr) return fail("inputs Q, K and V are required");
  OG_RETURN_IF_ERROR(parse_onnx_attention_qkv(node, *q, *k, *v, p));
  const TensorInfo* past_key = input_at(inputs, kPastKey);
  const TensorInfo* past_value = input_at(inputs, kPastValue);
  if ((past_key == nullptr) != (past_value == nullptr)) return fail("past_key and past_value must be both present or both absent");
  if (past_key != nullptr) {
    const int64_t past = past_key->shape.rank() == 4 ? past_key->shape[2] : -1;
    if (past_key->dtype != p.dtype || past_value->dtype != p.dtype ||
        past_key->shape != Shape{p.batch, p.kv_heads, past, p.head_size} ||
        past_value->shape != Shape{p.batch, p.kv_heads, past, p.v_head_size}) {
      return fail("past_key ", past_key->shape.to_string(), " / past_value ", past_value->shape.to_string(), " must be ",
                  dtype_name(p.dtype), " [batch=", p.batch, ", kv_num_heads=", p.kv_heads, ", past_sequence, ", p.head_size,
                  " / ", p.v_head_size, "]");
    }
    p.has_past = true;
    p.past_len = past;
  }
  p.total_len = p.past_len + p.kv_len;
  if (const TensorInfo* mask = input_at(inputs, kAttnMask)) OG_RETURN_IF_ERROR(parse_onnx_attention_mask(node, *mask, p));
  if (const TensorInfo* nonpad = input_at(inputs, kNonpadKvSeqlen)) {
    if (node.opset < 24) return fail("input nonpad_kv_seqlen needs opset 24, the model imports opset ", node.opset);
    if (nonpad->dtype != DType::kI64 || nonpad->shape != Shape{p.batch}) {
      return fail("nonpad_kv_seqlen must be int64 [batch=", p.batch, "], got ", dtype_name(nonpad->dtype), " ", nonpad->shape.to_string());
    }
    p.has_nonpad = true;
  }
  return p;
}

namespace {

Status infer_onnx_attention_shapes(InferContext& ctx) {
  const bool qk = ctx.outputs.size() > 3 && ctx.node.outputs[3] != nullptr;
  OG_ASSIGN_OR_RETURN(OnnxAttentionParams p, OnnxAttentionParams::make(ctx.node, ctx.inputs, qk));
  ctx.set_output(OnnxAttentionParams::kY, p.dtype,
                 p.four_d ? Shape{p.batch, p.q_heads, p.q_len, p.v_head_size} : Shape{p.batch, p.q_len, p.q_heads * p.v_head_size});
  if (ctx.outputs.size() > 1) ctx.set_output(OnnxAttentionParams::kPresentKey, p.dtype, Shape{p.batch, p.kv_heads, p.total_len, p.head_size});
  if (ctx.outputs.size() > 2) {
    ctx.set_output(OnnxAttentionParams::kPresentValue, p.dtype, Shape{p.batch, p.kv_heads, p.total_len, p.v_head_size});
  }
  if (qk) ctx.set_output(OnnxAttentionParams::kQkMatmulOutput, p.dtype, Shape{p.batch, p.q_heads, p.q_len, p.total_len});
  return Status::ok();
}

Status infer_mha_shapes(InferContext& ctx) {
  OG_ASSIGN_OR_RETURN(MhaParams p, MhaParams::make(ctx.node, ctx.inputs));
  if (ctx.outputs.size() > 3 && ctx.node.outputs[3] != nullptr) return ctx.fail("the qk output is not supported");
  ctx.set_output(MhaParams::kOutput, p.dtype, Shape{p.batch, p.q_len, p.num_heads * p.v_head_size});
  if (ctx.outputs.size() > 1) ctx.set_output(MhaParams::kPresentKey, p.dtype, Shape{p.batch, p.num_heads, p.total_len, p.head_size});
  if (ctx.outputs.size() > 2) ctx.set_output(MhaParams::kPresentValue, p.dtype, Shape{p.batch, p.num_heads, p.total_len, p.v_head_size});
  return Status::ok();
}

Status infer_gqa_types(TypeContext& ctx) {
  for (DType& t : ctx.outputs) t = ctx.input(GqaParams::kQuery);
  if (ctx.outputs.size() > 3 && ctx.node.outputs[3] != nullptr) {
    return OG_ERROR(ctx.node.describe(), ": the output_qk output is not supported");
  }
  return Status::ok();
}

Status infer_gqa_shapes(InferContext& ctx) {
  OG_ASSIGN_OR_RETURN(GqaParams p, GqaParams::make(ctx.node, ctx.inputs, ctx.value(GqaParams::kTotalSequenceLength)));
  ctx.set_output(GqaParams::kOutput, p.dtype, Shape{p.batch, p.q_len, p.num_heads * p.head_size});
  const Shape present{p.batch, p.kv_heads, p.present_len, p.head_size};
  for (int i : {GqaParams::kPresentKey, GqaParams::kPresentValue}) {
    if (i < static_cast<int>(ctx.outputs.size())) ctx.set_output(i, p.dtype, present);
  }
  return Status::ok();
}

}  // namespace

void register_attention_schemas(OpRegistry& registry) {
  OpSchema gqa;
  gqa.domain = "com.microsoft";
  gqa.op_type = "GroupQueryAttention";
  gqa.infer_types = infer_gqa_types;
  gqa.infer_shapes = infer_gqa_shapes;
  gqa.value_inputs = {GqaParams::kTotalSequenceLength};
  registry.add_schema(std::move(gqa));

  OpSchema mha;
  mha.domain = "com.microsoft";
  mha.op_type = "MultiHeadAttention";
  mha.infer_shapes = infer_mha_shapes;
  registry.add_schema(std::move(mha));

  OpSchema attention;
  attention.op_type = "Attention";
  attention.infer_shapes = infer_onnx_attention_shapes;
  registry.add_schema(std::move(attention));
}

}  // namespace onnx_genai
