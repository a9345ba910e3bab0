// Layout ops: Transpose, Trilu, Pad, DepthToSpace, SpaceToDepth.
#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {
namespace {

Result<std::vector<int64_t>> transpose_perm(const InferContext& ctx, int rank) {
  std::vector<int64_t> perm = resolve_perm(ctx.attrs(), rank);
  if (static_cast<int>(perm.size()) != rank) return ctx.fail("perm has ", perm.size(), " entries for rank ", rank);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) return ctx.fail("perm is not a permutation of 0..", rank - 1);
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

Status infer_transpose(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  OG_ASSIGN_OR_RETURN(std::vector<int64_t> perm, transpose_perm(ctx, in.rank()));
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(in[static_cast<int>(p)]);
  ctx.set_output(0, ctx.input(0).dtype, Shape(std::move(out)));
  return Status::ok();
}

Status infer_trilu(InferContext& ctx) {
  if (ctx.shape(0).rank() < 2) return ctx.fail("input must have rank >= 2, got ", ctx.shape(0).to_string());
  if (ctx.has_input(1) && ctx.shape(1).numel() != 1) return ctx.fail("k must be a scalar");
  ctx.set_output(0, ctx.input(0).dtype, ctx.shape(0));
  return Status::ok();
}

Status infer_pad(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  auto pads = resolve_pads(in, ctx.attrs(), ctx.opset(), ctx.value(1), ctx.value(3));
  if (!pads) return pads.status().with_context(ctx.node.describe());
  const std::string mode = ctx.attrs().get_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") return ctx.fail("unknown mode '", mode, "'");
  std::vector<int64_t> out(in.dims());
  for (size_t d = 0; d < out.size(); ++d) {
    out[d] += pads->begin[d] + pads->end[d];
    if (out[d] < 0) return ctx.fail("pads crop dim ", d, " of ", in.to_string(), " below zero");
    const bool pads_dim = pads->begin[d] > 0 || pads->end[d] > 0;
    if (mode != "constant" && pads_dim && in[static_cast<int>(d)] == 0) {
      return ctx.fail("mode ", mode, " cannot pad the empty dim ", d);
    }
  }
  ctx.set_output(0, ctx.input(0).dtype, Shape(std::move(out)));
  return Status::ok();
}

// DepthToSpace [N, C, H, W] -> [N, C / b^2, H * b, W * b]; SpaceToDepth the reverse.
Status infer_depth_space(InferContext& ctx, bool to_space) {
  const Shape& in = ctx.shape(0);
  const int64_t b = ctx.attrs().get_int("blocksize", 0);
  if (in.rank() != 4) return ctx.fail("input must have rank 4, got ", in.to_string());
  if (b <= 0) return ctx.fail("blocksize must be positive");
  if (to_space) {
    if (in[1] % (b * b) != 0) return ctx.fail("channels ", in[1], " not divisible by blocksize^2 ", b * b);
    ctx.set_output(0, ctx.input(0).dtype, Shape{in[0], in[1] / (b * b), in[2] * b, in[3] * b});
  } else {
    if (in[2] % b != 0 || in[3] % b != 0) return ctx.fail("spatial dims of ", in.to_string(), " not divisible by ", b);
    ctx.set_output(0, ctx.input(0).dtype, Shape{in[0], in[1] * b * b, in[2] / b, in[3] / b});
  }
  return Status::ok();
}

}  // namespace

std::vector<int64_t> resolve_perm(const Attributes& attrs, int rank) {
  if (attrs.has("perm")) return attrs.get_ints("perm");
  std::vector<int64_t> perm;
  for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  return perm;
}

Result<PadParams> resolve_pads(const Shape& input, const Attributes& attrs, int opset, const Tensor* pads_in,
                               const Tensor* axes_in) {
  std::vector<int64_t> pads;
  if (opset < 11) {
    pads = attrs.get_ints(opset < 2 ? "paddings" : "pads");
  } else {
    if (pads_in == nullptr) return OG_ERROR("pads must be known at plan time");
    pads = pads_in->to_i64_vector();
  }
  std::vector<int64_t> axes;
  if (axes_in != nullptr) {
    axes = axes_in->to_i64_vector();
  } else {
    for (int d = 0; d < input.rank(); ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size()) return OG_ERROR(pads.size(), " pads for ", axes.size(), " axes");
  PadParams p;
  p.begin.assign(static_cast<size_t>(input.rank()), 0);
  p.end.assign(static_cast<size_t>(input.rank()), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int d = normalize_axis(axes[i], input.rank());
    if (d < 0) return OG_ERROR("axis ", axes[i], " out of range for rank ", input.rank());
    p.begin[static_cast<size_t>(d)] = pads[i];
    p.end[static_cast<size_t>(d)] = pads[i + axes.size()];
  }
  return p;
}

void register_layout_schemas(OpRegistry& registry) {
  registry.add_schema(data_schema("Transpose", infer_transpose));
  registry.add_schema(data_schema("Trilu", infer_trilu));
  registry.add_schema(data_schema("Pad", infer_pad, {1, 3}));
  registry.add_schema(data_schema("DepthToSpace", [](InferContext& ctx) { return infer_depth_space(ctx, true); }));
  registry.add_schema(data_schema("SpaceToDepth", [](InferContext& ctx) { return infer_depth_space(ctx, false); }));
}

}  // namespace onnx_genai
