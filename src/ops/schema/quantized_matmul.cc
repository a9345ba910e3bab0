// Shape inference and validation for com.microsoft MatMulNBits (layout in quantized_matmul.h).
#include "ops/schema/quantized_matmul.h"

#include <string>

namespace onnx_genai {

namespace {

bool is_float_activation(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

}  // namespace

Result<MatMulNBitsParams> MatMulNBitsParams::make(const Node& node, const std::vector<const TensorInfo*>& inputs) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  for (const auto& [name, attr] : node.attrs.all()) {
    if (name != "K" && name != "N" && name != "bits" && name != "block_size" && name != "accuracy_level") {
      return fail("unsupported attribute '", name, "'");
    }
  }
  if (!node.attrs.has("K") || !node.attrs.has("N") || !node.attrs.has("block_size")) {
    return fail("attributes K, N and block_size are required");
  }
  MatMulNBitsParams p;
  p.k = node.attrs.get_int("K", 0);
  p.n = node.attrs.get_int("N", 0);
  p.bits = node.attrs.get_int("bits", 4);
  p.block_size = node.attrs.get_int("block_size", 0);
  p.accuracy_level = node.attrs.get_int("accuracy_level", 0);
  if (p.k <= 0 || p.n <= 0) return fail("K and N must be positive, got K=", p.k, " N=", p.n);
  if (p.bits != 2 && p.bits != 4 && p.bits != 8) return fail("bits must be 2, 4 or 8, got ", p.bits);
  if (p.accuracy_level < 0 || p.accuracy_level > 4) return fail("accuracy_level must be in [0, 4], got ", p.accuracy_level);
  if (p.block_size < 16 || p.block_size > 256 || (p.block_size & (p.block_size - 1)) != 0) {
    return fail("block_size must be a power of two in [16, 256], got ", p.block_size);
  }
  p.blocks = (p.k + p.block_size - 1) / p.block_size;
  p.block_bytes = p.block_size * p.bits / 8;

  const auto input = [&](int i) { return i < static_cast<int>(inputs.size()) ? inputs[static_cast<size_t>(i)] : nullptr; };
  if (inputs.size() > kBias + 1) return fail("expects at most ", kBias + 1, " inputs, got ", inputs.size());
  if (input(kA) == nullptr || input(kB) == nullptr || input(kScales) == nullptr) {
    return fail("inputs A, B and scales are required");
  }
  if (input(kGIdx) != nullptr) return fail("input g_idx (act-order GPTQ) is not supported");
  const TensorInfo& a = *input(kA);
  if (!is_float_activation(a.dtype)) return fail("A must be float32, float16 or bfloat16, got ", dtype_name(a.dtype));
  if (a.shape.rank() < 1 || a.shape[a.shape.rank() - 1] != p.k) {
    return fail("A ", a.shape.to_string(), " must end in K=", p.k);
  }
  const TensorInfo& b = *input(kB);
  if (b.dtype != DType::kU8) return fail("B must be uint8, got ", dtype_name(b.dtype));
  // Some exporters flatten B to [N, blocks * block_bytes]; only the byte count per row matters.
  if (b.shape.numel() != p.n * p.blocks * p.block_bytes || b.shape.rank() < 2 || b.shape[0] != p.n) {
    return fail("B ", b.shape.to_string(), " does not match [N=", p.n, ", blocks=", p.blocks, ", ", p.block_bytes, "]");
  }
  const TensorInfo& scales = *input(kScales);
  if (scales.dtype != a.dtype) return fail("scales must have A's dtype ", dtype_name(a.dtype));
  if (scales.shape.numel() != p.n * p.blocks) {
    return fail("scales ", scales.shape.to_string(), " must hold N*blocks=", p.n * p.blocks, " values");
  }
  if (const TensorInfo* zp = input(kZeroPoints)) {
    p.has_zp = true;
    p.zp_packed = zp->dtype == DType::kU8;
    if (!p.zp_packed && zp->dtype != a.dtype) return fail("zero_points must be uint8 or A's dtype");
    const int64_t want = p.zp_packed ? p.n * ((p.blocks * p.bits + 7) / 8) : p.n * p.blocks;
    if (zp->shape.numel() != want) {
      return fail("zero_points ", zp->shape.to_string(), " must hold ", want, " values");
    }
  }
  if (const TensorInfo* bias = input(kBias)) {
    p.has_bias = true;
    if (bias->dtype != a.dtype) return fail("bias must have A's dtype ", dtype_name(a.dtype));
    if (bias->shape.numel() != p.n) return fail("bias ", bias->shape.to_string(), " must hold N=", p.n, " values");
  }
  return p;
}

void set_matmul_nbits_output(InferContext& ctx, int64_t n) {
  std::vector<int64_t> out = ctx.shape(0).dims();
  out.back() = n;
  ctx.set_output(0, ctx.input(0).dtype, Shape(std::move(out)));
}

namespace {

Status infer_matmul_nbits(InferContext& ctx) {
  OG_ASSIGN_OR_RETURN(MatMulNBitsParams p, MatMulNBitsParams::make(ctx.node, ctx.inputs));
  set_matmul_nbits_output(ctx, p.n);
  return Status::ok();
}

}  // namespace

void register_quantized_matmul_schemas(OpRegistry& registry) {
  registry.add_schema(OpSchema{.domain = "com.microsoft", .op_type = "MatMulNBits", .infer_shapes = infer_matmul_nbits});
}

}  // namespace onnx_genai
