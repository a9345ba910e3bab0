// Reductions and scans along axes: Reduce*, ArgMax/ArgMin, TopK, CumSum.

#include "ops/op.h"
#include "ops/schema/reduce.h"

namespace onnx_genai {

namespace {

const char* const kReduceOps[] = {"ReduceMean", "ReduceSum",       "ReduceMax",      "ReduceMin",
                                  "ReduceProd", "ReduceL1",        "ReduceL2",       "ReduceLogSum",
                                  "ReduceLogSumExp", "ReduceSumSquare"};

// ReduceSum took its axes as an input from opset 13, the other Reduce* ops from opset 18.
bool axes_are_input(const Node& node) { return node.opset >= (node.op_type == "ReduceSum" ? 13 : 18); }

Status infer_reduce(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  OG_ASSIGN_OR_RETURN(std::vector<bool> reduced, reduce_axes_mask(ctx.node, ctx.value(1), in.rank()));
  const bool keepdims = ctx.attrs().get_int("keepdims", 1) != 0;
  std::vector<int64_t> out;
  for (int d = 0; d < in.rank(); ++d) {
    if (!reduced[static_cast<size_t>(d)]) out.push_back(in[d]);
    else if (keepdims) out.push_back(1);
  }
  ctx.set_output(0, ctx.input(0).dtype, Shape(std::move(out)));
  return Status::ok();
}

// ArgMax / ArgMin: one axis, int64 indices.
Status infer_arg_reduce(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const int axis = normalize_axis(ctx.attrs().get_int("axis", 0), in.rank());
  if (axis < 0) return ctx.fail("axis out of range for input of rank ", in.rank());
  if (in[axis] == 0) return ctx.fail("cannot take an arg-reduction over an empty axis");
  std::vector<int64_t> out = in.dims();
  if (ctx.attrs().get_int("keepdims", 1) != 0) out[static_cast<size_t>(axis)] = 1;
  else out.erase(out.begin() + axis);
  ctx.set_output(0, DType::kI64, Shape(std::move(out)));
  return Status::ok();
}

Status infer_topk(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const int axis = normalize_axis(ctx.attrs().get_int("axis", -1), in.rank());
  if (axis < 0) return ctx.fail("axis out of range for input of rank ", in.rank());
  OG_ASSIGN_OR_RETURN(int64_t k, topk_k(ctx.node, ctx.value(1)));
  if (k < 0 || k > in[axis]) return ctx.fail("K=", k, " outside [0, ", in[axis], "] for axis ", axis);
  Shape out = in;
  out[axis] = k;
  ctx.set_output(0, ctx.input(0).dtype, out);
  if (ctx.outputs.size() > 1) ctx.set_output(1, DType::kI64, out);
  return Status::ok();
}

Status infer_cumsum(InferContext& ctx) {
  if (!ctx.has_input(1)) return ctx.fail("missing the axis input");
  OG_RETURN_IF_ERROR(cumsum_axis(ctx.node, ctx.value(1), ctx.shape(0).rank()).status());
  ctx.set_output(0, ctx.input(0).dtype, ctx.shape(0));
  return Status::ok();
}

}  // namespace

std::vector<ReducePass> plan_reduce_passes(const Shape& shape, const std::vector<bool>& reduced) {
  struct Run {
    int64_t size;
    bool reduced;
  };
  std::vector<Run> runs;
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue;
    const bool r = reduced[static_cast<size_t>(d)];
    if (!runs.empty() && runs.back().reduced == r) runs.back().size *= shape[d];
    else runs.push_back({shape[d], r});
  }
  std::vector<ReducePass> passes;
  int64_t inner = 1;
  for (size_t j = runs.size(); j-- > 0;) {
    if (!runs[j].reduced) {
      inner *= runs[j].size;
      continue;
    }
    int64_t outer = 1;
    for (size_t k = 0; k < j; ++k) outer *= runs[k].size;
    passes.push_back({outer, runs[j].size, inner});
  }
  if (passes.empty()) passes.push_back({1, 1, shape.numel()});
  return passes;
}

Result<std::vector<bool>> reduce_axes_mask(const Node& node, const Tensor* axes_input, int rank) {
  std::vector<int64_t> axes;
  if (axes_are_input(node)) {
    if (node.input(1) != nullptr) {
      if (axes_input == nullptr) return OG_ERROR(node.describe(), ": axes input value unknown at plan time");
      if (!dtype_is_integer(axes_input->dtype()) || axes_input->rank() > 1)
        return OG_ERROR(node.describe(), ": axes input must be a 1-D integer tensor");
      axes = axes_input->to_i64_vector();
    }
  } else {
    axes = node.attrs.get_ints("axes");
  }
  const bool noop = node.attrs.get_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty() && !noop);
  for (int64_t a : axes) {
    const int axis = normalize_axis(a, rank);
    if (axis < 0) return OG_ERROR(node.describe(), ": axis ", a, " out of range for input of rank ", rank);
    if (reduced[static_cast<size_t>(axis)]) return OG_ERROR(node.describe(), ": axis ", a, " repeated");
    reduced[static_cast<size_t>(axis)] = true;
  }
  return reduced;
}

Result<int64_t> topk_k(const Node& node, const Tensor* k_input) {
  if (node.opset < 10) {
    if (!node.attrs.has("k")) return OG_ERROR(node.describe(), ": missing attribute k");
    return node.attrs.get_int("k", 0);
  }
  if (k_input == nullptr) return OG_ERROR(node.describe(), ": K input missing or unknown at plan time");
  if (k_input->numel() != 1 || !dtype_is_integer(k_input->dtype()))
    return OG_ERROR(node.describe(), ": K must be a single integer");
  return k_input->to_i64_vector()[0];
}

Result<int> cumsum_axis(const Node& node, const Tensor* axis_input, int rank) {
  if (axis_input == nullptr) return OG_ERROR(node.describe(), ": axis input unknown at plan time");
  if (axis_input->numel() != 1 || !dtype_is_integer(axis_input->dtype()))
    return OG_ERROR(node.describe(), ": axis must be a single integer");
  const int64_t a = axis_input->to_i64_vector()[0];
  const int axis = normalize_axis(a, rank);
  if (axis < 0) return OG_ERROR(node.describe(), ": axis ", a, " out of range for input of rank ", rank);
  return axis;
}

void register_reduce_schemas(OpRegistry& registry) {
  const auto add = [&](const char* op, auto infer_shapes, std::vector<int> value_inputs,
                       std::function<Status(TypeContext&)> infer_types = nullptr) {
    OpSchema schema;
    schema.op_type = op;
    schema.infer_shapes = infer_shapes;
    schema.value_inputs = std::move(value_inputs);
    schema.infer_types = std::move(infer_types);
    registry.add_schema(std::move(schema));
  };
  for (const char* op : kReduceOps) add(op, infer_reduce, {1});
  const auto int64_output = [](TypeContext& ctx) {
    ctx.outputs.assign(ctx.outputs.size(), DType::kI64);
    return Status::ok();
  };
  add("ArgMax", infer_arg_reduce, {}, int64_output);
  add("ArgMin", infer_arg_reduce, {}, int64_output);
  add("TopK", infer_topk, {1}, [](TypeContext& ctx) {
    ctx.outputs[0] = ctx.input(0);
    if (ctx.outputs.size() > 1) ctx.outputs[1] = DType::kI64;
    return Status::ok();
  });
  add("CumSum", infer_cumsum, {1});
}

}  // namespace onnx_genai
