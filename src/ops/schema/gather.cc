// Index-driven ops: Gather, GatherElements, GatherND, ScatterElements (and its opset 9-10 name
// Scatter), ScatterND, and com.microsoft GatherBlockQuantized (ops/schema/gather_block_quantized.cc).
#include "ops/op.h"
#include "ops/schema/data_params.h"
#include "ops/schema/gather_block_quantized.h"

namespace onnx_genai {
namespace {

Status check_indices_dtype(const InferContext& ctx, int input) {
  const DType t = ctx.input(input).dtype;
  if (t != DType::kI32 && t != DType::kI64) return ctx.fail("indices must be int32 or int64, got ", dtype_name(t));
  return Status::ok();
}

Status infer_gather(InferContext& ctx) {
  OG_RETURN_IF_ERROR(check_indices_dtype(ctx, 1));
  const Shape& data = ctx.shape(0);
  const int64_t a = ctx.attrs().get_int("axis", 0);
  const int axis = normalize_axis(a, data.rank());
  if (axis < 0) return ctx.fail("axis ", a, " out of range for rank ", data.rank());
  std::vector<int64_t> out(data.dims().begin(), data.dims().begin() + axis);
  const auto& idx = ctx.shape(1).dims();
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), data.dims().begin() + axis + 1, data.dims().end());
  ctx.set_output(0, ctx.input(0).dtype, Shape(std::move(out)));
  return Status::ok();
}

// GatherElements / ScatterElements: indices (input 1) of data's rank, no larger than data off the
// axis.
Status check_elements_indices(const InferContext& ctx) {
  OG_RETURN_IF_ERROR(check_indices_dtype(ctx, 1));
  const Shape& data = ctx.shape(0);
  const Shape& indices = ctx.shape(1);
  if (indices.rank() != data.rank()) {
    return ctx.fail("indices rank ", indices.rank(), " differs from data rank ", data.rank());
  }
  const int64_t a = ctx.attrs().get_int("axis", 0);
  const int axis = normalize_axis(a, data.rank());
  if (axis < 0) return ctx.fail("axis ", a, " out of range for rank ", data.rank());
  for (int d = 0; d < data.rank(); ++d) {
    if (d != axis && indices[d] > data[d]) {
      return ctx.fail("indices ", indices.to_string(), " exceed data ", data.to_string(), " in dim ", d);
    }
  }
  return Status::ok();
}

Status infer_gather_elements(InferContext& ctx) {
  OG_RETURN_IF_ERROR(check_elements_indices(ctx));
  ctx.set_output(0, ctx.input(0).dtype, ctx.shape(1));
  return Status::ok();
}

Status infer_gather_nd(InferContext& ctx) {
  if (ctx.input(1).dtype != DType::kI64) return ctx.fail("indices must be int64");
  const Shape& data = ctx.shape(0);
  const Shape& indices = ctx.shape(1);
  const int64_t batch = ctx.attrs().get_int("batch_dims", 0);
  if (indices.rank() < 1 || batch < 0 || batch >= std::min(data.rank(), indices.rank())) {
    return ctx.fail("batch_dims ", batch, " invalid for data ", data.to_string(), " and indices ", indices.to_string());
  }
  const int b = static_cast<int>(batch);
  const int64_t k = indices[indices.rank() - 1];
  if (k < 1 || k > data.rank() - b) return ctx.fail("index tuples of length ", k, " do not fit data ", data.to_string());
  for (int d = 0; d < b; ++d) {
    if (data[d] != indices[d]) return ctx.fail("batch dim ", d, " differs: ", data[d], " vs ", indices[d]);
  }
  std::vector<int64_t> out(indices.dims().begin(), indices.dims().end() - 1);
  out.insert(out.end(), data.dims().begin() + b + k, data.dims().end());
  ctx.set_output(0, ctx.input(0).dtype, Shape(std::move(out)));
  return Status::ok();
}

Status infer_scatter_elements(InferContext& ctx) {
  OG_RETURN_IF_ERROR(check_elements_indices(ctx));
  const Shape& indices = ctx.shape(1);
  if (ctx.shape(2) != indices) return ctx.fail("updates ", ctx.shape(2).to_string(), " differ from indices ", indices.to_string());
  ctx.set_output(0, ctx.input(0).dtype, ctx.shape(0));
  return Status::ok();
}

Status infer_scatter_nd(InferContext& ctx) {
  if (ctx.input(1).dtype != DType::kI64) return ctx.fail("indices must be int64");
  const Shape& data = ctx.shape(0);
  const Shape& indices = ctx.shape(1);
  const Shape& updates = ctx.shape(2);
  if (indices.rank() < 1) return ctx.fail("indices must have rank >= 1");
  const int q = indices.rank();
  const int64_t k = indices[q - 1];
  if (k < 1 || k > data.rank()) return ctx.fail("index tuples of length ", k, " do not fit data ", data.to_string());
  // updates = indices.shape[:-1] + data.shape[k:]
  std::vector<int64_t> want(indices.dims().begin(), indices.dims().end() - 1);
  want.insert(want.end(), data.dims().begin() + k, data.dims().end());
  if (updates.dims() != want) {
    return ctx.fail("updates ", updates.to_string(), " should be ", Shape(want).to_string());
  }
  ctx.set_output(0, ctx.input(0).dtype, data);
  return Status::ok();
}

}  // namespace

void register_gather_schemas(OpRegistry& registry) {
  registry.add_schema(data_schema("Gather", infer_gather));
  registry.add_schema(data_schema("GatherElements", infer_gather_elements));
  registry.add_schema(data_schema("GatherND", infer_gather_nd));
  registry.add_schema(data_schema("ScatterElements", infer_scatter_elements));
  registry.add_schema(data_schema("Scatter", infer_scatter_elements));
  registry.add_schema(data_schema("ScatterND", infer_scatter_nd));
  registry.add_schema(gather_block_quantized_schema());
}

}  // namespace onnx_genai
