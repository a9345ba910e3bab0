// The Gelu-family activations: ONNX Gelu (opset 20; approximate = "none" is the erf form,
// "tanh" FastGelu's) and the ONNX Runtime com.microsoft contrib ops:
//   FastGelu  (X, bias?)  y = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), v = X (+ bias)
//   BiasGelu  (A, B)      y = 0.5 v (1 + erf(v / sqrt(2))),                    v = A + B
//   QuickGelu (X)         y = X * sigmoid(alpha * X), alpha defaults to 1.702
// The bias (FastGelu's bias, BiasGelu's B) is 1-D and as long as the last dim of X, which then
// needs rank >= 1. Y has X's shape and dtype (f32, f16 or bf16).
#include "ops/op.h"

namespace onnx_genai {
namespace {

Status infer_gelu(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.fail("input 0 is required");
  const TensorInfo& x = ctx.input(0);
  if (x.dtype != DType::kF32 && x.dtype != DType::kF16 && x.dtype != DType::kBF16) {
    return ctx.fail("input must be float32, float16 or bfloat16, got ", dtype_name(x.dtype));
  }
  const bool bias_required = ctx.node.op_type == "BiasGelu";
  const bool takes_bias = bias_required || ctx.node.op_type == "FastGelu";
  if (ctx.num_inputs() > (takes_bias ? 2 : 1)) return ctx.fail("too many inputs: ", ctx.num_inputs());
  if (ctx.node.op_type == "Gelu") {
    const std::string approximate = ctx.attrs().get_string("approximate", "none");
    if (approximate != "none" && approximate != "tanh") return ctx.fail("approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
  }
  if (bias_required && !ctx.has_input(1)) return ctx.fail("input B (the bias) is required");
  if (takes_bias && x.shape.rank() < 1) return ctx.fail("input must have rank >= 1, got a scalar");
  if (ctx.has_input(1)) {
    const TensorInfo& bias = ctx.input(1);
    if (bias.dtype != x.dtype) return ctx.fail("bias dtype ", dtype_name(bias.dtype), " differs from input dtype ", dtype_name(x.dtype));
    const int64_t last = x.shape[x.shape.rank() - 1];
    if (bias.shape.rank() != 1 || bias.shape[0] != last) {
      return ctx.fail("bias shape ", bias.shape.to_string(), " must be [", last, "] (the last dim of input ", x.shape.to_string(), ")");
    }
  }
  ctx.set_output(0, x.dtype, x.shape);
  return Status::ok();
}

}  // namespace

void register_activation_schemas(OpRegistry& registry) {
  for (const char* op : {"FastGelu", "BiasGelu", "QuickGelu"}) {
    registry.add_schema(OpSchema{.domain = "com.microsoft", .op_type = op, .infer_shapes = infer_gelu});
  }
  registry.add_schema(OpSchema{.domain = "", .op_type = "Gelu", .infer_shapes = infer_gelu});
}

}  // namespace onnx_genai
