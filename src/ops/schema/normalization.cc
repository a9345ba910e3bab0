// LayerNormalization (opset 17), RMSNormalization (opset 23) and the SimplifiedLayerNormalization
// (com.microsoft or default domain) that LLM exports use (RMS norm with an optional inv_std_var).
// Y has X's shape and dtype; the statistics outputs (Mean, InvStdDev, inv_std_var) have
// X.shape[:axis] followed by ones, in the stash type (f32). Scale and bias broadcast to X
// (ops/schema/normalization.h).
//
// The com.microsoft Skip norms normalise s = input + skip (+ bias) over the last axis:
//   SkipLayerNormalization           (input, skip, gamma, beta?, bias?)  LayerNorm of s
//   SkipSimplifiedLayerNormalization (input, skip, gamma, bias?)         RMS norm of s
// with outputs (output, mean?, inv_std_var?, input_skip_bias_sum?). input is [B, S, H] or
// [N, H]; skip matches it, or for a 3-D input is [S, H] or [1, S, H] (one skip for every batch
// row); gamma, beta and bias are [H]. mean and inv_std_var are f32 [..., 1] (the simplified
// op's mean is all zeros, as in ONNX Runtime); output and the sum have input's shape and dtype.
#include "ops/schema/normalization.h"

#include <algorithm>

#include "ops/op.h"

namespace onnx_genai {

bool norm_parameter_broadcasts(const Shape& param, const Shape& x) {
  if (param.rank() > x.rank()) return false;
  for (int i = 0; i < param.rank(); ++i) {
    const int64_t d = param[i], want = x[x.rank() - param.rank() + i];
    if (d != 1 && d != want) return false;
  }
  return true;
}

bool norm_parameter_repeats_per_row(const Shape& param, const Shape& x, int axis) {
  int first = 0;
  while (first < param.rank() && param[first] == 1) ++first;
  const int kept = param.rank() - first;
  bool ok = kept <= x.rank() - axis;
  for (int i = 0; ok && i < kept; ++i) ok = param[first + i] == x[x.rank() - kept + i];
  return ok;
}

namespace {

// A parameter (scale, bias) must broadcast to X (ops/schema/normalization.h).
Status check_parameter(const InferContext& ctx, int index, const char* name, const Shape& x) {
  const Shape& p = ctx.shape(index);
  if (ctx.input(index).dtype != ctx.input(0).dtype) {
    return ctx.fail(name, " dtype ", dtype_name(ctx.input(index).dtype), " differs from X dtype ", dtype_name(ctx.input(0).dtype));
  }
  if (!norm_parameter_broadcasts(p, x)) return ctx.fail(name, " shape ", p.to_string(), " does not broadcast to X ", x.to_string());
  return Status::ok();
}

Status infer_norm(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const int axis = normalize_axis(ctx.attrs().get_int("axis", -1), x.rank());
  if (axis < 0) return ctx.fail("axis out of range for X of rank ", x.rank());
  if (!ctx.has_input(1)) return ctx.fail("missing the scale input");
  OG_RETURN_IF_ERROR(check_parameter(ctx, 1, "scale", x));
  if (ctx.has_input(2)) OG_RETURN_IF_ERROR(check_parameter(ctx, 2, "bias", x));
  if (ctx.attrs().get_int("stash_type", 1) != 1) return ctx.fail("only stash_type 1 (float) is supported");
  ctx.set_output(0, ctx.input(0).dtype, x);
  std::vector<int64_t> stats(x.dims().begin(), x.dims().begin() + axis);
  stats.resize(static_cast<size_t>(x.rank()), 1);
  for (size_t i = 1; i < ctx.outputs.size(); ++i) ctx.set_output(static_cast<int>(i), DType::kF32, Shape(stats));
  return Status::ok();
}

Status stats_in_f32(TypeContext& ctx) {
  ctx.outputs[0] = ctx.input(0);
  for (size_t i = 1; i < ctx.outputs.size(); ++i) ctx.outputs[i] = DType::kF32;
  return Status::ok();
}

// Input slots of the Skip norms: SkipSimplifiedLayerNormalization has no beta, so its bias is 3.
struct SkipNormInputs {
  int beta, bias;
};
SkipNormInputs skip_norm_inputs(const Node& node) {
  return node.op_type == "SkipLayerNormalization" ? SkipNormInputs{3, 4} : SkipNormInputs{-1, 3};
}

Status check_hidden_vector(const InferContext& ctx, int index, const char* name, int64_t hidden) {
  const TensorInfo& p = ctx.input(index);
  if (p.dtype != ctx.input(0).dtype) {
    return ctx.fail(name, " dtype ", dtype_name(p.dtype), " differs from input dtype ", dtype_name(ctx.input(0).dtype));
  }
  if (p.shape.rank() != 1 || p.shape[0] != hidden) {
    return ctx.fail(name, " shape ", p.shape.to_string(), " must be [", hidden, "] (the hidden size)");
  }
  return Status::ok();
}

Status infer_skip_norm(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2)) return ctx.fail("inputs input, skip and gamma are required");
  const SkipNormInputs slots = skip_norm_inputs(ctx.node);
  if (ctx.num_inputs() > std::max(slots.beta, slots.bias) + 1) return ctx.fail("too many inputs: ", ctx.num_inputs());
  const Shape& x = ctx.shape(0);
  const Shape& skip = ctx.shape(1);
  if (x.rank() != 2 && x.rank() != 3) return ctx.fail("input must be 2-D or 3-D, got ", x.to_string());
  if (ctx.input(1).dtype != ctx.input(0).dtype) {
    return ctx.fail("skip dtype ", dtype_name(ctx.input(1).dtype), " differs from input dtype ", dtype_name(ctx.input(0).dtype));
  }
  // skip repeats over input's batch: the same shape, [S, H] or [1, S, H].
  const bool same_rows = skip.rank() >= 2 && skip[skip.rank() - 1] == x[x.rank() - 1] && skip[skip.rank() - 2] == x[x.rank() - 2];
  const bool fits = skip == x || (x.rank() == 3 && same_rows && (skip.rank() == 2 || (skip.rank() == 3 && skip[0] == 1)));
  if (!fits) {
    return ctx.fail("skip shape ", skip.to_string(), " must equal input shape ", x.to_string(),
                    x.rank() == 3 ? " or be [S, H] / [1, S, H]" : "");
  }
  const int64_t hidden = x[x.rank() - 1];
  OG_RETURN_IF_ERROR(check_hidden_vector(ctx, 2, "gamma", hidden));
  if (slots.beta >= 0 && ctx.has_input(slots.beta)) OG_RETURN_IF_ERROR(check_hidden_vector(ctx, slots.beta, "beta", hidden));
  if (ctx.has_input(slots.bias)) OG_RETURN_IF_ERROR(check_hidden_vector(ctx, slots.bias, "bias", hidden));
  if (ctx.outputs.size() > 4) return ctx.fail("too many outputs: ", ctx.outputs.size());
  std::vector<int64_t> stats = x.dims();
  stats.back() = 1;
  ctx.set_output(0, ctx.input(0).dtype, x);
  for (int i = 1; i < static_cast<int>(ctx.outputs.size()); ++i) {
    if (i == 3) ctx.set_output(i, ctx.input(0).dtype, x);
    else ctx.set_output(i, DType::kF32, Shape(stats));
  }
  return Status::ok();
}

// output and input_skip_bias_sum in the input dtype, mean and inv_std_var in f32.
Status skip_norm_types(TypeContext& ctx) {
  for (size_t i = 0; i < ctx.outputs.size(); ++i) ctx.outputs[i] = i == 0 || i == 3 ? ctx.input(0) : DType::kF32;
  return Status::ok();
}

}  // namespace

void register_normalization_schemas(OpRegistry& registry) {
  for (const char* op : {"SkipLayerNormalization", "SkipSimplifiedLayerNormalization"}) {
    registry.add_schema(OpSchema{.domain = "com.microsoft", .op_type = op, .infer_types = skip_norm_types,
                                 .infer_shapes = infer_skip_norm});
  }
  // ONNX Runtime registers SimplifiedLayerNormalization in the default domain too, where the
  // onnxruntime-genai model builder puts it.
  const std::pair<const char*, const char*> ops[] = {{"", "LayerNormalization"},
                                                     {"", "RMSNormalization"},
                                                     {"", "SimplifiedLayerNormalization"},
                                                     {"com.microsoft", "SimplifiedLayerNormalization"}};
  for (const auto& [domain, op] : ops) {
    OpSchema schema;
    schema.domain = domain;
    schema.op_type = op;
    schema.infer_types = stats_in_f32;
    schema.infer_shapes = infer_norm;
    registry.add_schema(std::move(schema));
  }
}

}  // namespace onnx_genai
