// Shape inference for the collectives (contract in collective.h).
#include "ops/op.h"
#include "ops/schema/collective.h"

namespace onnx_genai {

namespace {

Status infer_all_reduce(InferContext& ctx) {
  if (ctx.num_inputs() != 1 || !ctx.has_input(0) || ctx.outputs.size() != 1) return ctx.fail("takes one input and gives one output");
  const DType t = ctx.input(0).dtype;
  if (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16) {
    return ctx.fail("sums float32, float16 or bfloat16, got ", dtype_name(t));
  }
  ctx.set_output(0, ctx.input(0).dtype, ctx.shape(0));
  return Status::ok();
}

Status infer_all_gather(InferContext& ctx) {
  if (ctx.num_inputs() != 1 || !ctx.has_input(0) || ctx.outputs.size() != 1) return ctx.fail("takes one input and gives one output");
  const Shape& in = ctx.shape(0);
  const int axis = normalize_axis(ctx.attrs().get_int("axis", -1), in.rank());
  const int64_t world = ctx.attrs().get_int("world_size", 0);
  if (axis < 0) return ctx.fail("axis ", ctx.attrs().get_int("axis", -1), " is outside an input of shape ", in.to_string());
  if (world < 1) return ctx.fail("needs a world_size attribute >= 1, got ", world);
  std::vector<int64_t> dims = in.dims();
  dims[static_cast<size_t>(axis)] *= world;
  ctx.set_output(0, ctx.input(0).dtype, Shape(std::move(dims)));
  return Status::ok();
}

}  // namespace

void register_collective_schemas(OpRegistry& registry) {
  registry.add_schema(
      OpSchema{.domain = CollectiveOps::kDomain, .op_type = CollectiveOps::kAllReduce, .infer_shapes = infer_all_reduce});
  registry.add_schema(
      OpSchema{.domain = CollectiveOps::kDomain, .op_type = CollectiveOps::kAllGather, .infer_shapes = infer_all_gather});
}

}  // namespace onnx_genai
