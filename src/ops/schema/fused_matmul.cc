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

Node RmsNormMatMulNBitsParams::norm_node(const Node& fused) {
  Node norm;
  norm.name = fused.name;
  norm.opset = 1;
  const bool skip = fused.input(kSkip) != nullptr;
  norm.domain = skip ? "com.microsoft" : "";
  norm.op_type = skip ? "SkipSimplifiedLayerNormalization" : "SimplifiedLayerNormalization";
  // Always set: the two norm ops' own defaults differ.
  norm.attrs.set("epsilon", Attribute{.kind = Attribute::Kind::kFloat, .f = fused.attrs.get_float("epsilon", 1e-5f)});
  return norm;
}

Node RmsNormMatMulNBitsParams::product_node(const Node& fused) {
  Node product;
  product.name = fused.name;
  const bool swiglu = fused.attrs.get_int("swiglu", 0) != 0;
  product.domain = swiglu ? MatMulNBitsSwiGLUParams::kDomain : "com.microsoft";
  product.op_type = swiglu ? MatMulNBitsSwiGLUParams::kOpType : "MatMulNBits";
  product.opset = 1;
  for (const char* name : {"K", "N", "bits", "block_size", "accuracy_level"}) {
    if (const Attribute* a = fused.attrs.find(name)) product.attrs.set(name, *a);
  }
  return product;
}

Result<RmsNormMatMulNBitsParams> RmsNormMatMulNBitsParams::make(const Node& node,
                                                                const std::vector<const TensorInfo*>& inputs) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  for (const auto& [name, attr] : node.attrs.all()) {
    if (name != "epsilon" && name != "swiglu" && name != "K" && name != "N" && name != "bits" && name != "block_size" &&
        name != "accuracy_level") {
      return fail("unsupported attribute '", name, "'");
    }
  }
  const auto input = [&](int i) {
    return i < static_cast<int>(inputs.size()) ? inputs[static_cast<size_t>(i)] : nullptr;
  };
  if (input(kX) == nullptr || input(kGamma) == nullptr) return fail("inputs x and gamma are required");
  RmsNormMatMulNBitsParams p;
  p.swiglu = node.attrs.get_int("swiglu", 0) != 0;
  p.has_skip = input(kSkip) != nullptr;
  p.epsilon = node.attrs.get_float("epsilon", 1e-5f);
  // The product reads rows of x's dtype and shape.
  const std::vector<const TensorInfo*> product = product_inputs<const TensorInfo*>(inputs, input(kX));
  const Node product_view = product_node(node);
  if (p.swiglu) {
    OG_ASSIGN_OR_RETURN(const MatMulNBitsSwiGLUParams fused, MatMulNBitsSwiGLUParams::make(product_view, product));
    p.matmul = fused.matmul;
    p.n = fused.n;
  } else {
    OG_ASSIGN_OR_RETURN(p.matmul, MatMulNBitsParams::make(product_view, product));
    p.n = p.matmul.n;
  }
  const TensorInfo& x = *input(kX);
  const TensorInfo& gamma = *input(kGamma);
  if (gamma.dtype != x.dtype || gamma.shape != Shape{p.matmul.k}) {
    return fail("gamma ", dtype_name(gamma.dtype), gamma.shape.to_string(), " must be ", dtype_name(x.dtype), "[",
                p.matmul.k, "]");
  }
  p.rows = x.shape.numel() / p.matmul.k;
  p.skip_rows = p.rows;
  if (const TensorInfo* skip = input(kSkip)) {
    p.skip_rows = skip->shape.numel() / p.matmul.k;
    const bool repeats = p.skip_rows > 0 ? p.rows % p.skip_rows == 0 : p.rows == 0;
    const bool rows_of_k = skip->shape.rank() >= 1 && skip->shape[skip->shape.rank() - 1] == p.matmul.k;
    if (skip->dtype != x.dtype || !rows_of_k || !repeats) {
      return fail("skip ", dtype_name(skip->dtype), skip->shape.to_string(), " must be rows of x ",
                  dtype_name(x.dtype), x.shape.to_string());
    }
  }
  return p;
}

namespace {

Status infer_matmul_nbits_swiglu(InferContext& ctx) {
  OG_ASSIGN_OR_RETURN(MatMulNBitsSwiGLUParams p, MatMulNBitsSwiGLUParams::make(ctx.node, ctx.inputs));
  set_matmul_nbits_output(ctx, p.n);
  return Status::ok();
}

// The fused node's checks, then the norm schema's own (x's rank, skip's shape) on the norm alone.
Status infer_rms_norm_matmul_nbits(InferContext& ctx) {
  using P = RmsNormMatMulNBitsParams;
  OG_ASSIGN_OR_RETURN(const P p, P::make(ctx.node, ctx.inputs));
  if (ctx.outputs.size() > 2 || (ctx.outputs.size() == 2 && !p.has_skip)) {
    return ctx.fail(ctx.outputs.size(), " outputs: Y, and the sum only with skip");
  }
  const Node norm = P::norm_node(ctx.node);
  InferContext norm_ctx{norm, P::norm_inputs<const TensorInfo*>(ctx.inputs, p.has_skip),
                        P::norm_inputs<const Tensor*>(ctx.input_values, p.has_skip), {}};
  norm_ctx.outputs.resize(1);
  const OpSchema* schema = OpRegistry::instance().find_schema(norm.domain, norm.op_type);
  if (schema == nullptr) return ctx.fail("no schema for ", norm.op_type);
  OG_RETURN_IF_ERROR(schema->infer_shapes(norm_ctx));
  set_matmul_nbits_output(ctx, p.n);
  if (ctx.outputs.size() == 2) ctx.set_output(P::kSum, ctx.input(P::kX).dtype, ctx.shape(P::kX));
  return Status::ok();
}

}  // namespace

void register_fused_matmul_schemas(OpRegistry& registry) {
  registry.add_schema(OpSchema{.domain = MatMulNBitsSwiGLUParams::kDomain,
                               .op_type = MatMulNBitsSwiGLUParams::kOpType,
                               .infer_shapes = infer_matmul_nbits_swiglu});
  registry.add_schema(OpSchema{.domain = RmsNormMatMulNBitsParams::kDomain,
                               .op_type = RmsNormMatMulNBitsParams::kOpType,
                               .infer_shapes = infer_rms_norm_matmul_nbits});
}

}  // namespace onnx_genai
