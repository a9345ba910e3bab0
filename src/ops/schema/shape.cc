// Shape-only ops: views (Reshape, Squeeze, Unsqueeze, Flatten, Identity), shape queries (Shape,
// Size) and broadcast copies (Expand, Tile).
#include <algorithm>

#include "ops/broadcast.h"
#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {
namespace {


Status infer_reshape(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  OG_ASSIGN_OR_RETURN(std::vector<int64_t> dims, value_of(ctx, 1, "shape"));
  const bool allow_zero = ctx.opset() >= 14 && ctx.attrs().get_int("allowzero", 0) != 0;
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t& d = dims[i];
    if (d == 0 && !allow_zero) {
      if (static_cast<int>(i) >= in.rank()) return ctx.fail("shape[", i, "] = 0 copies a dim the input ", in.to_string(), " lacks");
      d = in[static_cast<int>(i)];
    } else if (d == -1) {
      if (infer_at >= 0) return ctx.fail("shape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    } else if (d < 0) {
      return ctx.fail("shape[", i, "] = ", d, " is negative");
    }
    known *= d;
  }
  if (infer_at >= 0) {
    if (known == 0 || in.numel() % known != 0) {
      return ctx.fail("cannot reshape ", in.to_string(), " to ", Shape(dims).to_string());
    }
    dims[static_cast<size_t>(infer_at)] = in.numel() / known;
  }
  Shape out(std::move(dims));
  if (out.numel() != in.numel()) return ctx.fail("cannot reshape ", in.to_string(), " (", in.numel(), " elements) to ", out.to_string());
  ctx.set_output(0, ctx.input(0).dtype, std::move(out));
  return Status::ok();
}

// Squeeze/Unsqueeze axes: an attribute before opset 13, optional input 1 from 13.
Result<std::optional<std::vector<int64_t>>> axes_of(const InferContext& ctx) {
  if (ctx.opset() < 13) {
    if (!ctx.attrs().has("axes")) return std::optional<std::vector<int64_t>>{};
    return std::optional<std::vector<int64_t>>{ctx.attrs().get_ints("axes")};
  }
  if (!ctx.has_input(1)) return std::optional<std::vector<int64_t>>{};
  OG_ASSIGN_OR_RETURN(std::vector<int64_t> axes, value_of(ctx, 1, "axes"));
  return std::optional<std::vector<int64_t>>{std::move(axes)};
}

Status infer_squeeze(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  OG_ASSIGN_OR_RETURN(auto axes, axes_of(ctx));
  std::vector<bool> drop(static_cast<size_t>(in.rank()), false);
  if (!axes) {
    for (int d = 0; d < in.rank(); ++d) drop[static_cast<size_t>(d)] = in[d] == 1;
  } else {
    for (int64_t a : *axes) {
      const int d = normalize_axis(a, in.rank());
      if (d < 0) return ctx.fail("axis ", a, " out of range for rank ", in.rank());
      if (in[d] != 1) return ctx.fail("cannot squeeze dim ", d, " of size ", in[d], " in ", in.to_string());
      drop[static_cast<size_t>(d)] = true;
    }
  }
  std::vector<int64_t> out;
  for (int d = 0; d < in.rank(); ++d) {
    if (!drop[static_cast<size_t>(d)]) out.push_back(in[d]);
  }
  ctx.set_output(0, ctx.input(0).dtype, Shape(std::move(out)));
  return Status::ok();
}

Status infer_unsqueeze(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  OG_ASSIGN_OR_RETURN(auto axes, axes_of(ctx));
  if (!axes) return ctx.fail("axes are required");
  const int rank = in.rank() + static_cast<int>(axes->size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : *axes) {
    const int d = normalize_axis(a, rank);
    if (d < 0) return ctx.fail("axis ", a, " out of range for output rank ", rank);
    if (inserted[static_cast<size_t>(d)]) return ctx.fail("axis ", a, " repeated");
    inserted[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> out;
  int next = 0;
  for (int d = 0; d < rank; ++d) out.push_back(inserted[static_cast<size_t>(d)] ? 1 : in[next++]);
  ctx.set_output(0, ctx.input(0).dtype, Shape(std::move(out)));
  return Status::ok();
}

Status infer_flatten(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const int64_t a = ctx.attrs().get_int("axis", 1);
  // Flatten's axis may equal rank (everything in the outer dim).
  const int axis = a == in.rank() ? in.rank() : normalize_axis(a, in.rank());
  if (axis < 0) return ctx.fail("axis ", a, " out of range for rank ", in.rank());
  ctx.set_output(0, ctx.input(0).dtype, Shape{in.numel(0, axis), in.numel(axis, in.rank())});
  return Status::ok();
}

Status infer_identity(InferContext& ctx) {
  ctx.set_output(0, ctx.input(0).dtype, ctx.shape(0));
  return Status::ok();
}

Status infer_shape_op(InferContext& ctx) {
  const ShapeRange range = resolve_shape_range(ctx.attrs(), ctx.opset(), ctx.shape(0).rank());
  ctx.set_output(0, DType::kI64, Shape{range.end - range.begin});
  return Status::ok();
}

Status infer_size(InferContext& ctx) {
  ctx.set_output(0, DType::kI64, Shape{});
  return Status::ok();
}

Status infer_expand(InferContext& ctx) {
  OG_ASSIGN_OR_RETURN(std::vector<int64_t> dims, value_of(ctx, 1, "shape"));
  const Shape shapes[] = {ctx.shape(0), Shape(std::move(dims))};
  auto out = broadcast_shapes(shapes);
  if (!out) return out.status().with_context(ctx.node.describe());
  ctx.set_output(0, ctx.input(0).dtype, std::move(out).value());
  return Status::ok();
}

Status infer_tile(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  OG_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, value_of(ctx, 1, "repeats"));
  if (static_cast<int>(repeats.size()) != in.rank()) {
    return ctx.fail(repeats.size(), " repeats for input of rank ", in.rank());
  }
  std::vector<int64_t> out(repeats.size());
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0) return ctx.fail("repeats[", d, "] = ", repeats[d], " is negative");
    out[d] = in[static_cast<int>(d)] * repeats[d];
  }
  ctx.set_output(0, ctx.input(0).dtype, Shape(std::move(out)));
  return Status::ok();
}

}  // namespace

OpSchema data_schema(std::string op_type, std::function<Status(InferContext&)> infer_shapes,
                     std::vector<int> value_inputs, int alias_input, std::function<Status(TypeContext&)> infer_types) {
  OpSchema schema;
  schema.op_type = std::move(op_type);
  schema.infer_types = std::move(infer_types);
  schema.infer_shapes = std::move(infer_shapes);
  schema.value_inputs = std::move(value_inputs);
  schema.alias_input = alias_input;
  return schema;
}

Status int64_output_types(TypeContext& ctx) {
  ctx.outputs.assign(ctx.outputs.size(), DType::kI64);
  return Status::ok();
}

Result<std::vector<int64_t>> value_of(const InferContext& ctx, int input, const char* what) {
  const Tensor* v = ctx.value(input);
  if (v == nullptr) return ctx.fail(what, " (input ", input, ") must be known at plan time");
  return v->to_i64_vector();
}

ShapeRange resolve_shape_range(const Attributes& attrs, int opset, int rank) {
  int64_t begin = opset >= 15 ? attrs.get_int("start", 0) : 0;
  int64_t end = opset >= 15 ? attrs.get_int("end", rank) : rank;
  if (begin < 0) begin += rank;
  if (end < 0) end += rank;
  begin = std::clamp<int64_t>(begin, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {begin, std::max(begin, end)};
}

void register_shape_schemas(OpRegistry& registry) {
  registry.add_schema(data_schema("Reshape", infer_reshape, {1}, 0));
  registry.add_schema(data_schema("Squeeze", infer_squeeze, {1}, 0));
  registry.add_schema(data_schema("Unsqueeze", infer_unsqueeze, {1}, 0));
  registry.add_schema(data_schema("Flatten", infer_flatten, {}, 0));
  registry.add_schema(data_schema("Identity", infer_identity, {}, 0));
  for (OpSchema schema : {data_schema("Shape", infer_shape_op, {}, -1, int64_output_types),
                          data_schema("Size", infer_size, {}, -1, int64_output_types)}) {
    schema.reads_only_input_shapes = true;  // evaluated while planning, whatever the input's data
    registry.add_schema(std::move(schema));
  }
  registry.add_schema(data_schema("Expand", infer_expand, {1}));
  registry.add_schema(data_schema("Tile", infer_tile, {1}));
}

}  // namespace onnx_genai
