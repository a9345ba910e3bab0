// Ops that create tensors: Constant, ConstantOfShape, Range, EyeLike, OneHot.
#include <cmath>
#include <vector>

#include "ops/cpu/dispatch.h"
#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {
namespace {

// A scalar input of any numeric type as a double (Range bounds, OneHot depth).
Result<double> scalar_value(const InferContext& ctx, int input, const char* what) {
  const Tensor* t = ctx.value(input);
  if (t == nullptr) return ctx.fail(what, " (input ", input, ") must be known at plan time");
  if (t->numel() != 1) return ctx.fail(what, " must hold one value, got shape ", t->shape().to_string());
  double v = 0;
  Status s = dispatch_dtype<float, Float16, BFloat16, double, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t,
                            int64_t, uint64_t>(t->dtype(), [&]<typename T>() {
    v = static_cast<double>(load(t->data<T>()[0]));
    return Status::ok();
  });
  if (!s) return s.with_context(ctx.node.describe());
  return v;
}

Status constant_types(TypeContext& ctx) {
  OG_ASSIGN_OR_RETURN(Tensor value, constant_value(ctx.node.attrs));
  ctx.outputs.assign(ctx.outputs.size(), value.dtype());
  return Status::ok();
}

Status infer_constant(InferContext& ctx) {
  auto value = constant_value(ctx.attrs());
  if (!value) return value.status().with_context(ctx.node.describe());
  ctx.set_output(0, value->dtype(), value->shape());
  return Status::ok();
}

// ConstantOfShape's dtype is its value attribute's, float32 when absent.
DType constant_of_shape_dtype(const Attributes& attrs) {
  const Attribute* value = attrs.find("value");
  return value != nullptr && value->kind == Attribute::Kind::kTensor ? value->t.dtype() : DType::kF32;
}

Status constant_of_shape_types(TypeContext& ctx) {
  ctx.outputs.assign(ctx.outputs.size(), constant_of_shape_dtype(ctx.node.attrs));
  return Status::ok();
}

Status infer_constant_of_shape(InferContext& ctx) {
  const Attribute* value = ctx.attrs().find("value");
  if (value != nullptr && (value->kind != Attribute::Kind::kTensor || value->t.numel() != 1)) {
    return ctx.fail("value must be a one-element tensor");
  }
  OG_ASSIGN_OR_RETURN(std::vector<int64_t> dims, value_of(ctx, 0, "shape"));
  for (int64_t d : dims) {
    if (d < 0) return ctx.fail("negative dim in shape ", Shape(dims).to_string());
  }
  ctx.set_output(0, constant_of_shape_dtype(ctx.attrs()), Shape(std::move(dims)));
  return Status::ok();
}

Status infer_range(InferContext& ctx) {
  const DType t = ctx.input(0).dtype;
  if (ctx.input(1).dtype != t || ctx.input(2).dtype != t) return ctx.fail("start, limit and delta differ in dtype");
  OG_ASSIGN_OR_RETURN(const double start, scalar_value(ctx, 0, "start"));
  OG_ASSIGN_OR_RETURN(const double limit, scalar_value(ctx, 1, "limit"));
  OG_ASSIGN_OR_RETURN(const double delta, scalar_value(ctx, 2, "delta"));
  if (delta == 0) return ctx.fail("delta is 0");
  const double n = std::ceil((limit - start) / delta);
  if (n > static_cast<double>(int64_t{1} << 48)) return ctx.fail("range of ", n, " elements is too large");
  ctx.set_output(0, t, Shape{n > 0 ? static_cast<int64_t>(n) : 0});  // NaN bounds give 0 too
  return Status::ok();
}

DType eye_like_dtype(const Attributes& attrs, DType input) {
  return attrs.has("dtype") ? static_cast<DType>(attrs.get_int("dtype", 0)) : input;
}

Status eye_like_types(TypeContext& ctx) {
  ctx.outputs.assign(ctx.outputs.size(), eye_like_dtype(ctx.node.attrs, ctx.input(0)));
  return Status::ok();
}

Status infer_eye_like(InferContext& ctx) {
  if (ctx.shape(0).rank() != 2) return ctx.fail("input must be 2-D, got ", ctx.shape(0).to_string());
  const DType t = eye_like_dtype(ctx.attrs(), ctx.input(0).dtype);
  if (!dtype_is_known(static_cast<int32_t>(t))) return ctx.fail("unsupported dtype ", static_cast<int>(t));
  ctx.set_output(0, t, ctx.shape(0));
  return Status::ok();
}

// OneHot's output takes the dtype of `values` (input 2).
Status one_hot_types(TypeContext& ctx) {
  ctx.outputs.assign(ctx.outputs.size(), ctx.input(2));
  return Status::ok();
}

Status infer_one_hot(InferContext& ctx) {
  const Shape& indices = ctx.shape(0);
  OG_ASSIGN_OR_RETURN(const double depth, scalar_value(ctx, 1, "depth"));
  if (depth < 1) return ctx.fail("depth ", depth, " must be positive");
  if (ctx.shape(2).numel() != 2) return ctx.fail("values must hold [off, on], got shape ", ctx.shape(2).to_string());
  const int64_t a = ctx.attrs().get_int("axis", -1);
  const int axis = normalize_axis(a, indices.rank() + 1);
  if (axis < 0) return ctx.fail("axis ", a, " out of range for output rank ", indices.rank() + 1);
  std::vector<int64_t> out = indices.dims();
  out.insert(out.begin() + axis, static_cast<int64_t>(depth));
  ctx.set_output(0, ctx.input(2).dtype, Shape(std::move(out)));
  return Status::ok();
}

}  // namespace

Result<Tensor> constant_value(const Attributes& attrs) {
  if (const Attribute* a = attrs.find("value"); a != nullptr && a->kind == Attribute::Kind::kTensor) return a->t;
  if (const Attribute* a = attrs.find("value_float"); a != nullptr) return Tensor::from_vector<float>(Shape{}, {a->f});
  if (const Attribute* a = attrs.find("value_floats"); a != nullptr) {
    return Tensor::from_vector<float>(Shape{static_cast<int64_t>(a->floats.size())}, a->floats);
  }
  if (const Attribute* a = attrs.find("value_int"); a != nullptr) return Tensor::from_vector<int64_t>(Shape{}, {a->i});
  if (const Attribute* a = attrs.find("value_ints"); a != nullptr) {
    return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(a->ints.size())}, a->ints);
  }
  return OG_ERROR("Constant needs a value, value_float(s) or value_int(s) attribute (strings and sparse tensors are not supported)");
}

void register_generator_schemas(OpRegistry& registry) {
  registry.add_schema(data_schema("Constant", infer_constant, {}, -1, constant_types));
  registry.add_schema(data_schema("ConstantOfShape", infer_constant_of_shape, {0}, -1, constant_of_shape_types));
  registry.add_schema(data_schema("Range", infer_range, {0, 1, 2}));
  registry.add_schema(data_schema("EyeLike", infer_eye_like, {}, -1, eye_like_types));
  registry.add_schema(data_schema("OneHot", infer_one_hot, {1}, -1, one_hot_types));
}

}  // namespace onnx_genai
