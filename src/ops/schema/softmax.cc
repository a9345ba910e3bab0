// Softmax, LogSoftmax, Hardmax: output shaped like the input; the axis is checked here.
#include "ops/op.h"

namespace onnx_genai {

namespace {

// Before opset 13 the input is coerced to 2-D at `axis` (default 1); from 13 the op works
// along the single axis `axis` (default -1).
Status infer_softmax(InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const int64_t axis = ctx.attrs().get_int("axis", ctx.opset() < 13 ? 1 : -1);
  // Opset < 13 allows axis == rank (everything in the outer dimension).
  const bool ok = ctx.opset() < 13 ? (axis >= -in.rank() && axis <= in.rank()) : normalize_axis(axis, in.rank()) >= 0;
  if (!ok) return ctx.fail("axis ", axis, " out of range for input of rank ", in.rank());
  ctx.set_output(0, ctx.input(0).dtype, in);
  return Status::ok();
}

}  // namespace

void register_softmax_schemas(OpRegistry& registry) {
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    OpSchema schema;
    schema.op_type = op;
    schema.infer_shapes = infer_softmax;
    registry.add_schema(std::move(schema));
  }
}

}  // namespace onnx_genai
