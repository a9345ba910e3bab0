// LayerNormalization (opset 17), RMSNormalization (opset 23) and the com.microsoft
// SimplifiedLayerNormalization that LLM exports use (RMS norm with an optional inv_std_var).
// Y has X's shape and dtype; the statistics outputs (Mean, InvStdDev, inv_std_var) have
// X.shape[:axis] followed by ones, in the stash type (f32).
#include "ops/op.h"

namespace onnx_genai {

namespace {

// A parameter (scale, bias) must broadcast to the normalised shape X.shape[axis:] with its
// elements repeating along leading axes: its shape, leading ones dropped, must be a suffix of it.
Status check_parameter(const InferContext& ctx, int index, const char* name, const Shape& x, int axis) {
  const Shape& p = ctx.shape(index);
  if (ctx.input(index).dtype != ctx.input(0).dtype) {
    return ctx.fail(name, " dtype ", dtype_name(ctx.input(index).dtype), " differs from X dtype ", dtype_name(ctx.input(0).dtype));
  }
  int first = 0;
  while (first < p.rank() && p[first] == 1) ++first;
  const int kept = p.rank() - first;
  bool ok = kept <= x.rank() - axis;
  for (int i = 0; ok && i < kept; ++i) ok = p[first + i] == x[x.rank() - kept + i];
  if (!ok) return ctx.fail(name, " shape ", p.to_string(), " does not broadcast to the normalised shape of X ", x.to_string(), " from axis ", axis);
  return Status::ok();
}

Status infer_norm(InferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const int axis = normalize_axis(ctx.attrs().get_int("axis", -1), x.rank());
  if (axis < 0) return ctx.fail("axis out of range for X of rank ", x.rank());
  if (!ctx.has_input(1)) return ctx.fail("missing the scale input");
  OG_RETURN_IF_ERROR(check_parameter(ctx, 1, "scale", x, axis));
  if (ctx.has_input(2)) OG_RETURN_IF_ERROR(check_parameter(ctx, 2, "bias", x, axis));
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

}  // namespace

void register_normalization_schemas(OpRegistry& registry) {
  const std::pair<const char*, const char*> ops[] = {
      {"", "LayerNormalization"}, {"", "RMSNormalization"}, {"com.microsoft", "SimplifiedLayerNormalization"}};
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
