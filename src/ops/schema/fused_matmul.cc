// Shape inference and validation for the load-time fused ops (contracts in fused_matmul.h).
#include "ops/schema/fused_matmul.h"

namespace onnx_genai {

Node MatMulNBitsSwiGLUParams::interleaved_matmul(const Node& fused) {
  Node matmul = fused;
  if (fused.attrs.has("N")) {
    matmul.attrs.set("N", Attribute{.kind = Attribute::Kind::kInt, .i = 2 * fused.attrs.get_int("N", 0)});
  }
  return matmul;
}

Result<MatMulNBitsSwiGLUParams> MatMulNBitsSwiGLUParams::make(const Node& node,
                                                              const std::vector<const TensorInfo*>& inputs) {
  MatMulNBitsSwiGLUParams p;
  OG_ASSIGN_OR_RETURN(p.matmul, MatMulNBitsParams::make(interleaved_matmul(node), inputs));
  p.n = p.matmul.n / 2;
  return p;
}

namespace {

Status infer_matmul_nbits_swiglu(InferContext& ctx) {
  OG_ASSIGN_OR_RETURN(MatMulNBitsSwiGLUParams p, MatMulNBitsSwiGLUParams::make(ctx.node, ctx.inputs));
  set_matmul_nbits_output(ctx, p.n);
  return Status::ok();
}

}  // namespace

void register_fused_matmul_schemas(OpRegistry& registry) {
  registry.add_schema(OpSchema{.domain = MatMulNBitsSwiGLUParams::kDomain,
                               .op_type = MatMulNBitsSwiGLUParams::kOpType,
                               .infer_shapes = infer_matmul_nbits_swiglu});
}

}  // namespace onnx_genai
