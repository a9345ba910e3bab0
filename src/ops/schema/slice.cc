// Slice: starts/ends/axes attributes before opset 10, inputs 1..4 (plan-time values) from 10.
#include <algorithm>

#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {
namespace {

std::vector<int64_t> values_or(const Tensor* t, std::vector<int64_t> fallback) {
  return t != nullptr ? t->to_i64_vector() : std::move(fallback);
}

// Clamped start and element count along one dim, numpy rules: negative positions count from the
// end, ends past either side clamp, a negative step walks backwards from start (inclusive).
void clamp_range(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t& first, int64_t& count) {
  if (dim == 0) {
    first = count = 0;
    return;
  }
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    count = end > start ? (end - start + step - 1) / step : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    count = start > end ? (start - end - step - 1) / -step : 0;
  }
  first = start;
}

Status infer_slice(InferContext& ctx) {
  auto params = resolve_slice(ctx.shape(0), ctx.attrs(), ctx.opset(), ctx.value(1), ctx.value(2), ctx.value(3), ctx.value(4));
  if (!params) return params.status().with_context(ctx.node.describe());
  if (ctx.opset() >= 10 && (!ctx.has_input(1) || !ctx.has_input(2))) return ctx.fail("starts and ends are required");
  ctx.set_output(0, ctx.input(0).dtype, Shape(params->count));
  return Status::ok();
}

}  // namespace

Result<SliceParams> resolve_slice(const Shape& input, const Attributes& attrs, int opset, const Tensor* starts_in,
                                  const Tensor* ends_in, const Tensor* axes_in, const Tensor* steps_in) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (opset < 10) {
    starts = attrs.get_ints("starts");
    ends = attrs.get_ints("ends");
    axes = attrs.get_ints("axes");
  } else {
    if (starts_in == nullptr || ends_in == nullptr) return OG_ERROR("starts and ends must be known at plan time");
    starts = starts_in->to_i64_vector();
    ends = ends_in->to_i64_vector();
    axes = values_or(axes_in, {});
    steps = values_or(steps_in, {});
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return OG_ERROR("starts, ends, axes and steps differ in length (", starts.size(), ", ", ends.size(), ", ",
                    axes.size(), ", ", steps.size(), ")");
  }
  SliceParams p;
  p.start.assign(static_cast<size_t>(input.rank()), 0);
  p.step.assign(static_cast<size_t>(input.rank()), 1);
  p.count = input.dims();
  std::vector<bool> seen(static_cast<size_t>(input.rank()), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    const int d = normalize_axis(axes[i], input.rank());
    if (d < 0) return OG_ERROR("axis ", axes[i], " out of range for rank ", input.rank());
    const size_t ud = static_cast<size_t>(d);
    if (seen[ud]) return OG_ERROR("axis ", axes[i], " repeated");
    seen[ud] = true;
    if (steps[i] == 0) return OG_ERROR("step of axis ", axes[i], " is 0");
    p.step[ud] = steps[i];
    clamp_range(input[d], starts[i], ends[i], steps[i], p.start[ud], p.count[ud]);
  }
  return p;
}

void register_slice_schemas(OpRegistry& registry) {
  registry.add_schema(data_schema("Slice", infer_slice, {1, 2, 3, 4}));
}

}  // namespace onnx_genai
