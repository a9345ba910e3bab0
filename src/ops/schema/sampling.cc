// Shape inference and validation for onnx_genai SampleTokens (contract in sampling.h).
#include "ops/schema/sampling.h"

#include "sampling/softmax_constants.h"

namespace onnx_genai {

namespace {

bool is_float_logits(DType dtype) { return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16; }

Status check_dtypes(const Node& node, DType logits, DType params, DType uniforms) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  if (!is_float_logits(logits)) return fail("logits must be float32, float16 or bfloat16, got ", dtype_name(logits));
  if (params != DType::kF32) return fail("params must be float32, got ", dtype_name(params));
  if (uniforms != DType::kF64) return fail("uniforms must be float64 (a draw's exact uniform), got ", dtype_name(uniforms));
  return Status::ok();
}

Status infer_types(TypeContext& ctx) {
  if (ctx.inputs.size() < 3 || ctx.inputs.size() > 4 || ctx.outputs.size() != 1) {
    return OG_ERROR(ctx.node.describe(), ": takes logits, params, uniforms and optionally allowed and gives tokens, got ",
                    ctx.inputs.size(), " inputs and ", ctx.outputs.size(), " outputs");
  }
  OG_RETURN_IF_ERROR(check_dtypes(ctx.node, ctx.input(0), ctx.input(1), ctx.input(2)));
  if (ctx.inputs.size() == 4 && ctx.input(3) != DType::kI64) {
    return OG_ERROR(ctx.node.describe(), ": allowed must be int64 bit sets, got ", dtype_name(ctx.input(3)));
  }
  ctx.outputs[0] = DType::kI64;
  return Status::ok();
}

Status infer_shapes(InferContext& ctx) {
  OG_ASSIGN_OR_RETURN(const SampleTokensParams p, SampleTokensParams::make(ctx.node, ctx.inputs));
  ctx.set_output(0, DType::kI64, Shape{p.batch});
  return Status::ok();
}

}  // namespace

Result<SampleTokensParams> SampleTokensParams::make(const Node& node, const std::vector<const TensorInfo*>& inputs) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  if (inputs.size() < 3 || inputs.size() > 4 || inputs[kLogits] == nullptr || inputs[kParams] == nullptr ||
      inputs[kUniforms] == nullptr) {
    return fail("needs logits, params and uniforms (and optionally allowed)");
  }
  const TensorInfo& logits = *inputs[kLogits];
  const TensorInfo& params = *inputs[kParams];
  const TensorInfo& uniforms = *inputs[kUniforms];
  OG_RETURN_IF_ERROR(check_dtypes(node, logits.dtype, params.dtype, uniforms.dtype));
  if (logits.shape.rank() != 3 || logits.shape[1] < 1) {
    return fail("logits must be [batch, positions >= 1, vocab], got ", logits.shape.to_string());
  }
  SampleTokensParams p;
  const bool every_position = node.attrs.get_int("every_position", 0) != 0;
  p.batch = every_position ? logits.shape[0] * logits.shape[1] : logits.shape[0];
  p.positions = every_position ? 1 : logits.shape[1];
  p.vocab = logits.shape[2];
  p.logits_dtype = logits.dtype;
  if (p.vocab < 1 || p.vocab > sampling::kMaxVocabulary) {
    return fail("the vocabulary (logits dim 2) must be in [1, ", sampling::kMaxVocabulary, "], got ", p.vocab);
  }
  if (params.shape != Shape{p.batch, kSampleParamCount}) {
    return fail("params must be [batch, ", static_cast<int>(kSampleParamCount),
                "] (temperature, top_k, top_p, min_p, mask slot) = [",
                p.batch, ", ", static_cast<int>(kSampleParamCount), "], got ", params.shape.to_string());
  }
  if (uniforms.shape != Shape{p.batch}) {
    return fail("uniforms must be [batch] = [", p.batch, "], got ", uniforms.shape.to_string());
  }
  if (inputs.size() == 4 && inputs[kAllowed] != nullptr) {
    const TensorInfo& allowed = *inputs[kAllowed];
    if (allowed.dtype != DType::kI64) return fail("allowed must be int64 bit sets, got ", dtype_name(allowed.dtype));
    if (allowed.shape.rank() != 2) return fail("allowed must be [masks, words], got ", allowed.shape.to_string());
    p.mask_rows = allowed.shape[0];
    p.mask_words = allowed.shape[1];
  }
  return p;
}

void register_sampling_schemas(OpRegistry& registry) {
  registry.add_schema(OpSchema{.domain = SampleTokensParams::kDomain,
                               .op_type = SampleTokensParams::kOpType,
                               .infer_types = infer_types,
                               .infer_shapes = infer_shapes});
}

}  // namespace onnx_genai
