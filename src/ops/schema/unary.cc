// Schemas of the one-tensor elementwise ops (activations, math functions, Clip, Cast). The
// output has input 0's shape; its dtype is input 0's except for IsNaN/IsInf (bool), Cast
// (attribute `to`) and CastLike (input 1's dtype).
#include "ops/op.h"

namespace onnx_genai {

namespace {

// Cast's target, or kUndefined when `to` is missing or names a type this runtime cannot hold.
DType cast_target(const Node& node) {
  const Attribute* to = node.attrs.find("to");
  if (to == nullptr || to->kind != Attribute::Kind::kInt) return DType::kUndefined;
  if (to->i > INT32_MAX || !dtype_is_known(static_cast<int32_t>(to->i))) return DType::kUndefined;
  const auto t = static_cast<DType>(to->i);
  return t == DType::kU4 || t == DType::kI4 ? DType::kUndefined : t;
}

Status check_inputs(const InferContext& ctx, int min_inputs, int max_inputs) {
  if (ctx.num_inputs() < min_inputs || ctx.num_inputs() > max_inputs || !ctx.has_input(0)) {
    return ctx.fail("expects ", min_inputs, max_inputs == min_inputs ? "" : " to " + std::to_string(max_inputs),
                    " inputs with input 0 present, got ", ctx.num_inputs());
  }
  return Status::ok();
}

void add(OpRegistry& registry, const char* op, std::function<Status(TypeContext&)> types,
         std::function<Status(InferContext&)> shapes) {
  OpSchema schema;
  schema.op_type = op;
  schema.infer_types = std::move(types);
  schema.infer_shapes = std::move(shapes);
  registry.add_schema(std::move(schema));
}

Status infer_same(InferContext& ctx) {
  OG_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  ctx.set_output(0, ctx.input(0).dtype, ctx.shape(0));
  return Status::ok();
}

Status infer_predicate(InferContext& ctx) {
  OG_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  if (!dtype_is_float(ctx.input(0).dtype)) return ctx.fail("input must be a float tensor, got ", dtype_name(ctx.input(0).dtype));
  ctx.set_output(0, DType::kBool, ctx.shape(0));
  return Status::ok();
}

// Clip: bounds are attributes before opset 11, optional scalar inputs of the input's dtype after.
Status infer_clip(InferContext& ctx) {
  OG_RETURN_IF_ERROR(check_inputs(ctx, 1, ctx.opset() < 11 ? 1 : 3));
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (ctx.shape(i).numel() != 1) return ctx.fail("bound input ", i, " must be a scalar, got shape ", ctx.shape(i).to_string());
    if (ctx.input(i).dtype != ctx.input(0).dtype) {
      return ctx.fail("bound input ", i, " is ", dtype_name(ctx.input(i).dtype), ", input is ", dtype_name(ctx.input(0).dtype));
    }
  }
  ctx.set_output(0, ctx.input(0).dtype, ctx.shape(0));
  return Status::ok();
}

Status infer_cast(InferContext& ctx) {
  OG_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  const DType to = cast_target(ctx.node);
  if (to == DType::kUndefined || to == DType::kString) {
    return ctx.fail("attribute 'to' is missing or names an unsupported type");
  }
  ctx.set_output(0, to, ctx.shape(0));
  return Status::ok();
}

Status infer_cast_like(InferContext& ctx) {
  OG_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  if (!ctx.has_input(1)) return ctx.fail("input 1 (target_type) is missing");
  ctx.set_output(0, ctx.input(1).dtype, ctx.shape(0));
  return Status::ok();
}

Status types_same(TypeContext& ctx) {
  ctx.outputs[0] = ctx.input(0);
  return Status::ok();
}

}  // namespace

void register_unary_schemas(OpRegistry& registry) {
  for (const char* op : {"Sqrt", "Reciprocal", "Neg", "Abs", "Exp", "Log", "Tanh", "Sigmoid", "Erf", "Relu", "Not",
                         "Sign", "Floor", "Ceil", "Round", "Sin", "Cos", "LeakyRelu", "Elu", "Selu", "Softplus",
                         "Softsign", "HardSigmoid", "HardSwish", "ThresholdedRelu", "Celu"}) {
    add(registry, op, types_same, infer_same);
  }
  const auto types_bool = [](TypeContext& ctx) {
    ctx.outputs[0] = DType::kBool;
    return Status::ok();
  };
  add(registry, "IsNaN", types_bool, infer_predicate);
  add(registry, "IsInf", types_bool, infer_predicate);
  add(registry, "Clip", types_same, infer_clip);
  add(
      registry, "Cast",
      [](TypeContext& ctx) {
        const DType to = cast_target(ctx.node);
        if (to == DType::kUndefined || to == DType::kString) {
          return OG_ERROR(ctx.node.describe(), ": attribute 'to' is missing or names an unsupported type");
        }
        ctx.outputs[0] = to;
        return Status::ok();
      },
      infer_cast);
  add(
      registry, "CastLike",
      [](TypeContext& ctx) {
        ctx.outputs[0] = ctx.input(1);
        return Status::ok();
      },
      infer_cast_like);
}

}  // namespace onnx_genai
