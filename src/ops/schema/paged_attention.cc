// Type and shape inference for onnx_genai PagedAttention (contract in paged_attention.h).
#include "ops/schema/paged_attention.h"

#include <cmath>
#include <set>
#include <string>

namespace onnx_genai {

namespace {

bool is_attention_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

const TensorInfo* input_at(const std::vector<const TensorInfo*>& inputs, int i) {
  return i < static_cast<int>(inputs.size()) ? inputs[static_cast<size_t>(i)] : nullptr;
}

Status parse_attributes(const Node& node, PagedAttentionParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  static const std::set<std::string> kKnown = {"num_heads", "kv_num_heads",  "scale",           "softcap",
                                               "local_window_size", "do_rotary", "rotary_interleaved"};
  for (const auto& [name, attr] : node.attrs.all()) {
    if (kKnown.count(name) == 0) return fail("unsupported attribute '", name, "'");
  }
  const Attributes& a = node.attrs;
  p.num_heads = a.get_int("num_heads", 0);
  p.kv_heads = a.get_int("kv_num_heads", 0);
  if (p.num_heads <= 0 || p.kv_heads <= 0 || p.num_heads % p.kv_heads != 0) {
    return fail("num_heads (", p.num_heads, ") must be a positive multiple of kv_num_heads (", p.kv_heads, ")");
  }
  p.scale = a.get_float("scale", 0.0f);
  p.softcap = a.get_float("softcap", 0.0f);
  if (p.softcap < 0.0f) return fail("softcap must be >= 0, got ", p.softcap);
  p.window = a.get_int("local_window_size", -1);
  if (p.window < -1) return fail("local_window_size must be -1 (off) or >= 0, got ", p.window);
  p.do_rotary = a.get_int("do_rotary", 0) != 0;
  p.rotary_interleaved = a.get_int("rotary_interleaved", 0) != 0;
  return Status::ok();
}

Status parse_qkv(const Node& node, const std::vector<const TensorInfo*>& inputs, PagedAttentionParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  const TensorInfo* query = input_at(inputs, PagedAttentionParams::kQuery);
  const TensorInfo* key = input_at(inputs, PagedAttentionParams::kKey);
  const TensorInfo* value = input_at(inputs, PagedAttentionParams::kValue);
  if (query == nullptr) return fail("input query is required");
  if (!is_attention_float(query->dtype)) return fail("query must be float32, float16 or bfloat16, got ", dtype_name(query->dtype));
  if (query->shape.rank() != 3 || query->shape[0] != 1) {
    return fail("query must be [1, tokens, hidden] (packed rows), got ", query->shape.to_string());
  }
  p.dtype = query->dtype;
  p.tokens = query->shape[1];
  if ((key == nullptr) != (value == nullptr)) return fail("key and value must be both present or both absent (packed QKV)");
  p.packed_qkv = key == nullptr;
  const int64_t heads_in_query = p.packed_qkv ? p.num_heads + 2 * p.kv_heads : p.num_heads;
  if (query->shape[2] % heads_in_query != 0 || query->shape[2] == 0) {
    return fail("query hidden size ", query->shape[2], " is not a positive multiple of ", heads_in_query, " heads");
  }
  p.head_size = query->shape[2] / heads_in_query;
  if (p.packed_qkv) return Status::ok();
  const Shape expected{1, p.tokens, p.kv_heads * p.head_size};
  for (const auto& [name, t] : {std::pair{"key", key}, std::pair{"value", value}}) {
    if (t->dtype != p.dtype || t->shape != expected) {
      return fail(name, " must be ", dtype_name(p.dtype), " ", expected.to_string(), ", got ", dtype_name(t->dtype), " ",
                  t->shape.to_string());
    }
  }
  return Status::ok();
}

Status parse_cache_and_tables(const Node& node, const std::vector<const TensorInfo*>& inputs, PagedAttentionParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  const TensorInfo* key_cache = input_at(inputs, PagedAttentionParams::kKeyCache);
  const TensorInfo* value_cache = input_at(inputs, PagedAttentionParams::kValueCache);
  const TensorInfo* tables = input_at(inputs, PagedAttentionParams::kBlockTables);
  const TensorInfo* starts = input_at(inputs, PagedAttentionParams::kQueryStarts);
  const TensorInfo* lens = input_at(inputs, PagedAttentionParams::kSeqLens);
  if (!key_cache || !value_cache || !tables || !starts || !lens) {
    return fail("key_cache, value_cache, block_tables, query_starts and seq_lens are required");
  }
  const Shape& cache = key_cache->shape;
  if (cache.rank() != 4 || cache[2] != p.kv_heads || cache[3] != p.head_size || cache[0] < 1 || cache[1] < 1) {
    return fail("key_cache must be [blocks, block_size, kv_num_heads=", p.kv_heads, ", head_size=", p.head_size, "], got ",
                cache.to_string());
  }
  if (key_cache->dtype != p.dtype || value_cache->dtype != p.dtype || value_cache->shape != cache) {
    return fail("key_cache and value_cache must both be ", dtype_name(p.dtype), " ", cache.to_string(), ", got ",
                dtype_name(value_cache->dtype), " ", value_cache->shape.to_string());
  }
  p.num_blocks = cache[0];
  p.block_size = cache[1];
  if (tables->dtype != DType::kI32 || tables->shape.rank() != 2 || tables->shape[0] < 1) {
    return fail("block_tables must be int32 [sequences, max_blocks], got ", dtype_name(tables->dtype), " ",
                tables->shape.to_string());
  }
  p.sequences = tables->shape[0];
  p.max_blocks = tables->shape[1];
  if (starts->dtype != DType::kI32 || starts->shape != Shape{p.sequences + 1}) {
    return fail("query_starts must be int32 [sequences + 1 = ", p.sequences + 1, "], got ", dtype_name(starts->dtype), " ",
                starts->shape.to_string());
  }
  if (lens->dtype != DType::kI32 || lens->shape != Shape{p.sequences}) {
    return fail("seq_lens must be int32 [sequences = ", p.sequences, "], got ", dtype_name(lens->dtype), " ",
                lens->shape.to_string());
  }
  return Status::ok();
}

Status parse_rotary(const Node& node, const std::vector<const TensorInfo*>& inputs, PagedAttentionParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  if (!p.do_rotary) return Status::ok();
  const TensorInfo* cos = input_at(inputs, PagedAttentionParams::kCosCache);
  const TensorInfo* sin = input_at(inputs, PagedAttentionParams::kSinCache);
  if (cos == nullptr || sin == nullptr) return fail("do_rotary=1 needs cos_cache and sin_cache");
  if (cos->dtype != p.dtype || sin->dtype != p.dtype || cos->shape != sin->shape || cos->shape.rank() != 2 ||
      cos->shape[1] <= 0 || 2 * cos->shape[1] > p.head_size || p.head_size % 2 != 0) {
    return fail("cos_cache and sin_cache must both be ", dtype_name(p.dtype), " [positions, rotary_dim/2] with rotary_dim <= ",
                "head_size=", p.head_size, " (even), got ", cos->shape.to_string(), " and ", sin->shape.to_string());
  }
  p.rotary_dim = 2 * cos->shape[1];
  p.rotary_rows = cos->shape[0];
  return Status::ok();
}

Status parse_head_sink(const Node& node, const std::vector<const TensorInfo*>& inputs, PagedAttentionParams& p) {
  const TensorInfo* sink = input_at(inputs, PagedAttentionParams::kHeadSink);
  if (sink == nullptr) return Status::ok();
  if (sink->dtype != p.dtype || sink->shape != Shape{p.num_heads}) {
    return OG_ERROR(node.describe(), ": head_sink must be ", dtype_name(p.dtype), " [num_heads=", p.num_heads, "], got ",
                    dtype_name(sink->dtype), " ", sink->shape.to_string());
  }
  p.has_head_sink = true;
  return Status::ok();
}

Status infer_shapes(InferContext& ctx) {
  OG_ASSIGN_OR_RETURN(const PagedAttentionParams p, PagedAttentionParams::make(ctx.node, ctx.inputs));
  ctx.set_output(PagedAttentionParams::kOutput, p.dtype, Shape{1, p.tokens, p.num_heads * p.head_size});
  const Shape cache = ctx.shape(PagedAttentionParams::kKeyCache);
  for (int i : {PagedAttentionParams::kKeyCacheOut, PagedAttentionParams::kValueCacheOut}) {
    if (i < static_cast<int>(ctx.outputs.size())) ctx.set_output(i, p.dtype, cache);
  }
  return Status::ok();
}

}  // namespace

float PagedAttentionParams::effective_scale() const {
  return scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_size));
}

Result<PagedAttentionParams> PagedAttentionParams::make(const Node& node, const std::vector<const TensorInfo*>& inputs) {
  if (inputs.size() > kHeadSink + 1) return OG_ERROR(node.describe(), ": takes at most ", kHeadSink + 1, " inputs");
  PagedAttentionParams p;
  OG_RETURN_IF_ERROR(parse_attributes(node, p));
  OG_RETURN_IF_ERROR(parse_qkv(node, inputs, p));
  OG_RETURN_IF_ERROR(parse_cache_and_tables(node, inputs, p));
  OG_RETURN_IF_ERROR(parse_rotary(node, inputs, p));
  OG_RETURN_IF_ERROR(parse_head_sink(node, inputs, p));
  return p;
}

void register_paged_attention_schemas(OpRegistry& registry) {
  registry.add_schema(OpSchema{.domain = PagedAttentionParams::kDomain,
                               .op_type = PagedAttentionParams::kOpType,
                               .infer_shapes = infer_shapes});
}

}  // namespace onnx_genai
