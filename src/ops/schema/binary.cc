// Schemas of the broadcasting elementwise ops: arithmetic, comparison, logical, variadic
// (Max/Min/Sum/Mean) and Where. Output shape = numpy broadcast of every input.
#include <string_view>

#include "ops/broadcast.h"
#include "ops/op.h"

namespace onnx_genai {

namespace {

enum class OutputType { kInput0, kBool, kInput1 };

struct BroadcastOp {
  const char* name;
  OutputType output;
  int min_inputs;
  int max_inputs;
  // Inputs [same_from, end) must share one dtype (-1: no constraint, Pow's exponent is free).
  int same_from;
};

DType output_dtype(OutputType rule, DType input0, DType input1) {
  switch (rule) {
    case OutputType::kInput0: return input0;
    case OutputType::kBool: return DType::kBool;
    case OutputType::kInput1: return input1;
  }
  return DType::kUndefined;
}

Status infer_broadcast(InferContext& ctx, const BroadcastOp& op) {
  const int n = ctx.num_inputs();
  if (n < op.min_inputs || n > op.max_inputs) {
    return ctx.fail("expects ", op.min_inputs, op.min_inputs == op.max_inputs ? "" : " or more", " inputs, got ", n);
  }
  std::vector<Shape> shapes;
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) return ctx.fail("input ", i, " is missing");
    shapes.push_back(ctx.shape(i));
    if (op.same_from >= 0 && i > op.same_from && ctx.input(i).dtype != ctx.input(op.same_from).dtype) {
      return ctx.fail("input ", i, " is ", dtype_name(ctx.input(i).dtype), " but input ", op.same_from, " is ",
                      dtype_name(ctx.input(op.same_from).dtype));
    }
  }
  // Opset < 7 had an explicit broadcast/axis form; only its numpy-compatible default is handled.
  if (ctx.opset() < 7 && ctx.attrs().has("axis")) return ctx.fail("legacy 'axis' broadcasting is not supported");
  const std::string_view name = op.name;
  if (name == "Mod" && ctx.attrs().get_int("fmod", 0) == 0 && dtype_is_float(ctx.input(0).dtype)) {
    return ctx.fail("fmod=0 is defined for integers only; float inputs need fmod=1");
  }
  if (name == "BitShift") {
    const std::string direction = ctx.attrs().get_string("direction", "");
    if (direction != "LEFT" && direction != "RIGHT") return ctx.fail("direction must be LEFT or RIGHT, got '", direction, "'");
  }
  auto shape = broadcast_shapes(shapes);
  if (!shape) return ctx.fail(shape.status().message());
  const DType in1 = n > 1 ? ctx.input(1).dtype : DType::kUndefined;
  ctx.set_output(0, output_dtype(op.output, ctx.input(0).dtype, in1), std::move(shape).value());
  return Status::ok();
}

Status infer_where(InferContext& ctx, const BroadcastOp& op) {
  if (ctx.num_inputs() == 3 && ctx.has_input(0) && ctx.input(0).dtype != DType::kBool) {
    return ctx.fail("condition must be bool, got ", dtype_name(ctx.input(0).dtype));
  }
  return infer_broadcast(ctx, op);
}

}  // namespace

void register_binary_schemas(OpRegistry& registry) {
  constexpr int kMany = 1 << 20;
  static const BroadcastOp kOps[] = {
      {"Add", OutputType::kInput0, 2, 2, 0},
      {"Sub", OutputType::kInput0, 2, 2, 0},
      {"Mul", OutputType::kInput0, 2, 2, 0},
      {"Div", OutputType::kInput0, 2, 2, 0},
      {"Pow", OutputType::kInput0, 2, 2, -1},
      {"Mod", OutputType::kInput0, 2, 2, 0},
      {"BitShift", OutputType::kInput0, 2, 2, 0},
      {"And", OutputType::kBool, 2, 2, 0},
      {"Or", OutputType::kBool, 2, 2, 0},
      {"Xor", OutputType::kBool, 2, 2, 0},
      {"Equal", OutputType::kBool, 2, 2, 0},
      {"Less", OutputType::kBool, 2, 2, 0},
      {"Greater", OutputType::kBool, 2, 2, 0},
      {"LessOrEqual", OutputType::kBool, 2, 2, 0},
      {"GreaterOrEqual", OutputType::kBool, 2, 2, 0},
      {"Max", OutputType::kInput0, 1, kMany, 0},
      {"Min", OutputType::kInput0, 1, kMany, 0},
      {"Sum", OutputType::kInput0, 1, kMany, 0},
      {"Mean", OutputType::kInput0, 1, kMany, 0},
  };
  for (const BroadcastOp& op : kOps) {
    OpSchema schema;
    schema.op_type = op.name;
    schema.infer_types = [&op](TypeContext& ctx) {
      ctx.outputs[0] = output_dtype(op.output, ctx.input(0), ctx.input(1));
      return Status::ok();
    };
    schema.infer_shapes = [&op](InferContext& ctx) { return infer_broadcast(ctx, op); };
    registry.add_schema(std::move(schema));
  }
  static const BroadcastOp kWhere{"Where", OutputType::kInput1, 3, 3, 1};
  OpSchema where;
  where.op_type = kWhere.name;
  where.infer_types = [](TypeContext& ctx) {
    ctx.outputs[0] = ctx.input(1);
    return Status::ok();
  };
  where.infer_shapes = [](InferContext& ctx) { return infer_where(ctx, kWhere); };
  registry.add_schema(std::move(where));
}

}  // namespace onnx_genai
