// Shape inference and validation for RotaryEmbedding (both forms; see ops/schema/rotary.h).
#include "ops/schema/rotary.h"

namespace onnx_genai {

namespace {

// head_size and num_heads of X, from its shape and the attributes.
Status resolve_heads(const Node& node, bool contrib, const Shape& x, int64_t cache_width, RotaryParams& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  const int64_t num_heads = node.attrs.get_int("num_heads", 0);
  const int64_t rotary_attr = node.attrs.get_int("rotary_embedding_dim", 0);
  if (num_heads < 0 || rotary_attr < 0) return fail("num_heads and rotary_embedding_dim must not be negative");
  if (contrib && rotary_attr > 0 && num_heads == 0) return fail("num_heads is required when rotary_embedding_dim is set");
  p.batch = x[0];
  if (x.rank() == 4) {
    p.heads_first = true;
    p.heads = x[1];
    p.seq = x[2];
    p.head_size = x[3];
  } else {
    p.seq = x[1];
    const int64_t hidden = x[2];
    if (num_heads > 0) {
      p.head_size = hidden / num_heads;
    } else if (contrib && rotary_attr == 0) {
      p.head_size = 2 * cache_width;  // ONNX Runtime infers the head from the cache width
    } else {
      return fail("num_heads is required for 3-D input ", x.to_string());
    }
    if (p.head_size <= 0 || hidden % p.head_size != 0) {
      return fail("hidden size ", hidden, " does not split into heads of ", p.head_size,
                  num_heads > 0 ? " (num_heads " + std::to_string(num_heads) + ")" : std::string(" (2 * cache width)"));
    }
    p.heads = hidden / p.head_size;
  }
  p.rotary_dim = rotary_attr > 0 ? rotary_attr : p.head_size;
  if (p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_size) {
    return fail("rotary_embedding_dim ", p.rotary_dim, " must be even and at most head_size ", p.head_size);
  }
  return Status::ok();
}

}  // namespace

Result<RotaryParams> RotaryParams::make(const Node& node, const std::vector<const TensorInfo*>& inputs) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  const bool contrib = node.domain == "com.microsoft";
  RotaryParams p;
  p.position_input = contrib ? 1 : 3;
  p.cos_input = contrib ? 2 : 1;
  p.sin_input = contrib ? 3 : 2;
  const auto input = [&](int i) { return i < static_cast<int>(inputs.size()) ? inputs[static_cast<size_t>(i)] : nullptr; };
  if (inputs.size() > 4) return fail("expects at most 4 inputs, got ", inputs.size());
  if (input(p.x_input) == nullptr || input(p.cos_input) == nullptr || input(p.sin_input) == nullptr ||
      (contrib && input(p.position_input) == nullptr)) {
    return fail(contrib ? "inputs input, position_ids, cos_cache and sin_cache are required"
                        : "inputs X, cos_cache and sin_cache are required");
  }
  const TensorInfo& x = *input(p.x_input);
  const TensorInfo& cos = *input(p.cos_input);
  const TensorInfo& sin = *input(p.sin_input);
  if (x.dtype != DType::kF32 && x.dtype != DType::kF16 && x.dtype != DType::kBF16) {
    return fail("input must be float32, float16 or bfloat16, got ", dtype_name(x.dtype));
  }
  if (x.shape.rank() != 3 && x.shape.rank() != 4) return fail("input must be 3-D or 4-D, got ", x.shape.to_string());
  if (cos.dtype != x.dtype || sin.dtype != x.dtype) return fail("cos_cache and sin_cache must have the input dtype ", dtype_name(x.dtype));
  if (cos.shape != sin.shape) return fail("cos_cache ", cos.shape.to_string(), " and sin_cache ", sin.shape.to_string(), " differ");
  const int64_t cache_width = cos.shape.rank() > 0 ? cos.shape[cos.shape.rank() - 1] : 0;
  OG_RETURN_IF_ERROR(resolve_heads(node, contrib, x.shape, cache_width, p));
  p.interleaved = node.attrs.get_int("interleaved", 0) != 0;

  const TensorInfo* positions = input(p.position_input);
  if (positions != nullptr) {
    if (positions->dtype != DType::kI64) return fail("position_ids must be int64, got ", dtype_name(positions->dtype));
    const Shape& ps = positions->shape;
    if (contrib && ps.numel() == 1 && ps.rank() <= 1) {
      p.positions = Positions::kBase;
    } else if (ps.rank() == 2 && ps[0] == p.batch && ps[1] == p.seq) {
      p.positions = Positions::kPerToken;
    } else {
      return fail("position_ids ", ps.to_string(), " must be [", p.batch, ", ", p.seq, "]", contrib ? " or one value" : "");
    }
  }
  const int64_t half = p.rotary_dim / 2;
  if (positions == nullptr) {
    if (cos.shape.rank() != 3 || cos.shape[0] != p.batch || cos.shape[1] != p.seq || cache_width != half) {
      return fail("without position_ids cos_cache ", cos.shape.to_string(), " must be [", p.batch, ", ", p.seq, ", ", half, "]");
    }
    p.cache_rows = p.batch * p.seq;
  } else {
    if (cos.shape.rank() != 2 || cache_width != half) {
      return fail("cos_cache ", cos.shape.to_string(), " must be [max_positions, ", half, "] (rotary_dim / 2)");
    }
    p.cache_rows = cos.shape[0];
  }
  return p;
}

namespace {

Status infer_rotary(InferContext& ctx) {
  OG_ASSIGN_OR_RETURN(RotaryParams p, RotaryParams::make(ctx.node, ctx.inputs));
  const TensorInfo& x = ctx.input(p.x_input);
  ctx.set_output(0, x.dtype, x.shape);
  return Status::ok();
}

}  // namespace

void register_rotary_schemas(OpRegistry& registry) {
  for (const char* domain : {"", "com.microsoft"}) {
    registry.add_schema(OpSchema{.domain = domain, .op_type = "RotaryEmbedding", .infer_shapes = infer_rotary});
  }
}

}  // namespace onnx_genai
