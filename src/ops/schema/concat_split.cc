// Concat and Split: joining and cutting tensors along one axis.
#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {

Result<std::vector<AxisPiece>> axis_pieces(const PrepareContext& ctx, bool concat) {
  const Shape& whole = concat ? ctx.output(0).shape : ctx.input(0).shape;
  const int axis = normalize_axis(ctx.attrs().get_int("axis", 0), whole.rank());
  if (axis < 0) return ctx.fail("axis out of range");
  const int64_t outer = whole.numel(0, axis);
  const int64_t inner = whole.numel(axis + 1, whole.rank());
  const int64_t whole_row = whole[axis] * inner;
  const int parts = static_cast<int>(concat ? ctx.inputs.size() : ctx.outputs.size());
  std::vector<AxisPiece> pieces;
  int64_t column = 0;
  for (int i = 0; i < parts; ++i) {
    const int64_t part_row = (concat ? ctx.input(i).shape : ctx.output(i).shape)[axis] * inner;
    pieces.push_back({outer, part_row, whole_row, column});
    column += part_row;
  }
  return pieces;
}

namespace {

Status infer_concat(InferContext& ctx) {
  if (ctx.num_inputs() == 0 || !ctx.has_input(0)) return ctx.fail("needs at least one input");
  const Shape& first = ctx.shape(0);
  if (!ctx.attrs().has("axis")) return ctx.fail("axis attribute is required");
  const int64_t a = ctx.attrs().get_int("axis", 0);
  const int axis = normalize_axis(a, first.rank());
  if (axis < 0) return ctx.fail("axis ", a, " out of range for rank ", first.rank());
  Shape out = first;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.fail("input ", i, " is missing");
    const Shape& s = ctx.shape(i);
    if (ctx.input(i).dtype != ctx.input(0).dtype) return ctx.fail("input ", i, " dtype differs from input 0");
    bool compatible = s.rank() == first.rank();
    for (int d = 0; compatible && d < s.rank(); ++d) compatible = d == axis || s[d] == first[d];
    if (!compatible) return ctx.fail("input ", i, " shape ", s.to_string(), " does not match ", first.to_string(), " off axis ", axis);
    out[axis] += s[axis];
  }
  ctx.set_output(0, ctx.input(0).dtype, std::move(out));
  return Status::ok();
}

// Split sizes: the `split` attribute before opset 13, input 1 from 13; else num_outputs (opset
// 18) pieces of ceil(dim / n), or the node's output count in equal parts.
Result<std::vector<int64_t>> split_sizes(const InferContext& ctx, int64_t dim) {
  const int64_t n = static_cast<int64_t>(ctx.outputs.size());
  std::vector<int64_t> sizes;
  if (ctx.opset() < 13 && ctx.attrs().has("split")) {
    sizes = ctx.attrs().get_ints("split");
  } else if (ctx.opset() >= 13 && ctx.has_input(1)) {
    OG_ASSIGN_OR_RETURN(sizes, value_of(ctx, 1, "split"));
  } else if (ctx.opset() >= 18 && ctx.attrs().has("num_outputs")) {
    const int64_t pieces = ctx.attrs().get_int("num_outputs", n);
    if (pieces != n) return ctx.fail("num_outputs ", pieces, " but the node has ", n, " outputs");
    const int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  } else {
    if (dim % n != 0) return ctx.fail("dim of size ", dim, " does not split into ", n, " equal parts");
    sizes.assign(static_cast<size_t>(n), dim / n);
  }
  if (static_cast<int64_t>(sizes.size()) != n) return ctx.fail(sizes.size(), " split sizes for ", n, " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return ctx.fail("negative split size ", s);
    total += s;
  }
  if (total != dim) return ctx.fail("split sizes sum to ", total, ", dim is ", dim);
  return sizes;
}

Status infer_split(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const int64_t a = ctx.attrs().get_int("axis", 0);
  const int axis = normalize_axis(a, in.rank());
  if (axis < 0) return ctx.fail("axis ", a, " out of range for rank ", in.rank());
  if (ctx.outputs.empty()) return ctx.fail("needs at least one output");
  OG_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, split_sizes(ctx, in[axis]));
  for (size_t i = 0; i < sizes.size(); ++i) {
    Shape out = in;
    out[axis] = sizes[i];
    ctx.set_output(static_cast<int>(i), ctx.input(0).dtype, std::move(out));
  }
  return Status::ok();
}

}  // namespace

void register_concat_split_schemas(OpRegistry& registry) {
  registry.add_schema(data_schema("Concat", infer_concat));
  registry.add_schema(data_schema("Split", infer_split, {1}));
}

}  // namespace onnx_genai
