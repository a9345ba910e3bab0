// Shape inference and validation for com.microsoft GatherBlockQuantized (layout in
// ops/schema/gather_block_quantized.h).
#include "ops/schema/gather_block_quantized.h"

namespace onnx_genai {

namespace {

using Params = GatherBlockQuantizedParams;

Status read_attributes(const Node& node, int rank, Params& p) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  const int64_t gather_axis = node.attrs.get_int("gather_axis", 0);
  const int64_t quantize_axis = node.attrs.get_int("quantize_axis", 1);
  p.gather_axis = normalize_axis(gather_axis, rank);
  p.quantize_axis = normalize_axis(quantize_axis, rank);
  if (p.gather_axis < 0) return fail("gather_axis ", gather_axis, " out of range for data of rank ", rank);
  if (p.quantize_axis < 0) return fail("quantize_axis ", quantize_axis, " out of range for data of rank ", rank);
  p.block_size = node.attrs.get_int("block_size", 128);
  if (p.block_size < 16 || (p.block_size & (p.block_size - 1)) != 0) {
    return fail("block_size must be a power of two >= 16, got ", p.block_size);
  }
  p.bits = node.attrs.get_int("bits", 4);
  if (p.data_dtype == DType::kU8) {
    if (p.bits != 2 && p.bits != 4 && p.bits != 8) return fail("bits must be 2, 4 or 8 for uint8 data, got ", p.bits);
    if (p.gather_axis != 0 || p.quantize_axis != rank - 1 || rank < 2) {
      return fail("uint8 data needs gather_axis 0 and quantize_axis last (", rank - 1, ") on rank >= 2, got ",
                  p.gather_axis, " and ", p.quantize_axis);
    }
  } else if (p.bits != 4) {
    return fail("bits must be 4 for ", dtype_name(p.data_dtype), " data, got ", p.bits);
  }
  return Status::ok();
}

Status check_zero_points(const Node& node, const TensorInfo& zp, const TensorInfo& scales, const Params& p) {
  if (zp.dtype != p.data_dtype) {
    return OG_ERROR(node.describe(), ": zero_points dtype ", dtype_name(zp.dtype), " differs from data dtype ", dtype_name(p.data_dtype));
  }
  // uint8 narrower than a byte packs 8 / bits zero points per byte along quantize_axis.
  Shape want = scales.shape;
  if (p.data_dtype == DType::kU8) want[p.quantize_axis] = (p.blocks * p.bits + 7) / 8;
  if (zp.shape != want) {
    return OG_ERROR(node.describe(), ": zero_points shape ", zp.shape.to_string(), " should be ", want.to_string());
  }
  return Status::ok();
}

}  // namespace

Result<Params> Params::make(const Node& node, const std::vector<const TensorInfo*>& inputs) {
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  const auto input = [&](int i) { return i < static_cast<int>(inputs.size()) ? inputs[static_cast<size_t>(i)] : nullptr; };
  if (inputs.size() > kZeroPoints + 1) return fail("expects at most ", kZeroPoints + 1, " inputs, got ", inputs.size());
  if (input(kData) == nullptr || input(kIndices) == nullptr || input(kScales) == nullptr) {
    return fail("inputs data, indices and scales are required");
  }
  const TensorInfo& data = *input(kData);
  const TensorInfo& indices = *input(kIndices);
  const TensorInfo& scales = *input(kScales);
  Params p;
  p.data_dtype = data.dtype;
  if (data.dtype != DType::kU8 && data.dtype != DType::kU4 && data.dtype != DType::kI4) {
    return fail("data must be uint8, uint4 or int4, got ", dtype_name(data.dtype));
  }
  if (indices.dtype != DType::kI32 && indices.dtype != DType::kI64) {
    return fail("indices must be int32 or int64, got ", dtype_name(indices.dtype));
  }
  if (scales.dtype != DType::kF32 && scales.dtype != DType::kF16 && scales.dtype != DType::kBF16) {
    return fail("scales must be float32, float16 or bfloat16, got ", dtype_name(scales.dtype));
  }
  const int rank = data.shape.rank();
  if (rank < 1) return fail("data must have rank >= 1");
  OG_RETURN_IF_ERROR(read_attributes(node, rank, p));
  p.codes = data.shape;
  if (data.dtype == DType::kU8) p.codes[rank - 1] *= 8 / p.bits;

  p.blocks = (p.codes[p.quantize_axis] + p.block_size - 1) / p.block_size;
  Shape want = p.codes;
  want[p.quantize_axis] = p.blocks;
  if (scales.shape != want) {
    return fail("scales shape ", scales.shape.to_string(), " should be ", want.to_string(), " (data codes ",
                p.codes.to_string(), " in blocks of ", p.block_size, " along axis ", p.quantize_axis, ")");
  }
  if (const TensorInfo* zp = input(kZeroPoints)) {
    p.has_zero_points = true;
    OG_RETURN_IF_ERROR(check_zero_points(node, *zp, scales, p));
  }
  std::vector<int64_t> out(p.codes.dims().begin(), p.codes.dims().begin() + p.gather_axis);
  out.insert(out.end(), indices.shape.dims().begin(), indices.shape.dims().end());
  out.insert(out.end(), p.codes.dims().begin() + p.gather_axis + 1, p.codes.dims().end());
  p.output = Shape(std::move(out));
  return p;
}

namespace {

Status infer_gather_block_quantized(InferContext& ctx) {
  OG_ASSIGN_OR_RETURN(Params p, Params::make(ctx.node, ctx.inputs));
  ctx.set_output(0, ctx.input(Params::kScales).dtype, p.output);
  return Status::ok();
}

// The output takes the scales' dtype.
Status gather_block_quantized_types(TypeContext& ctx) {
  ctx.outputs[0] = ctx.input(Params::kScales);
  return Status::ok();
}

}  // namespace

OpSchema gather_block_quantized_schema() {
  return OpSchema{.domain = "com.microsoft", .op_type = "GatherBlockQuantized",
                  .infer_types = gather_block_quantized_types, .infer_shapes = infer_gather_block_quantized};
}

}  // namespace onnx_genai
