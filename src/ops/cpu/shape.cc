// CPU kernels of the shape family. Views (Reshape, Squeeze, Unsqueeze, Flatten, Identity) share
// their input's storage (OpSchema::alias_input), so their run() has nothing to do.
#include <cstring>

#include "ops/cpu/copy_util.h"
#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {
namespace {

class ViewKernel final : public OpKernel {
 public:
  Status run(const KernelContext&) const override { return Status::ok(); }
};

// Writes int64 values fixed at plan time (Shape, Size): the output depends only on shapes.
class ShapeValueKernel final : public OpKernel {
 public:
  explicit ShapeValueKernel(const Node& node) : op_(node.op_type), opset_(node.opset) {}

  Status prepare(PrepareContext& ctx) override {
    const Shape& in = ctx.input(0).shape;
    if (op_ == "Size") {
      values_ = {in.numel()};
    } else {
      const ShapeRange range = resolve_shape_range(ctx.attrs(), opset_, in.rank());
      values_.assign(in.dims().begin() + range.begin, in.dims().begin() + range.end);
    }
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    if (!values_.empty()) std::memcpy(ctx.output(0).data, values_.data(), values_.size() * sizeof(int64_t));
    return Status::ok();
  }

 private:
  std::string op_;
  int opset_;
  std::vector<int64_t> values_;
};

// Tile: output dim d (size r*n) is walked as two dims [r, n]; the repeat dim reads the input
// with stride 0, so the whole op is one strided copy of rank 2 * rank.
Result<CopyLayout> plan_tile(const PrepareContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const Shape& out = ctx.output(0).shape;
  const std::vector<int64_t> in_strides = contiguous_strides(in.dims());
  const std::vector<int64_t> out_strides = contiguous_strides(out.dims());
  CopyLayout layout;
  for (int d = 0; d < in.rank(); ++d) {
    const size_t ud = static_cast<size_t>(d);
    const int64_t repeats = in[d] == 0 ? 0 : out[d] / in[d];
    layout.dims.insert(layout.dims.end(), {repeats, in[d]});
    layout.src_strides.insert(layout.src_strides.end(), {0, in_strides[ud]});
    layout.dst_strides.insert(layout.dst_strides.end(), {in[d] * out_strides[ud], out_strides[ud]});
  }
  return layout;
}

}  // namespace

// Expand: output element reads the input at the same index, right-aligned, 0-stride where the
// input dim is 1 (broadcast).
Result<CopyLayout> expand_layout(const PrepareContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const Shape& out = ctx.output(0).shape;
  CopyLayout layout;
  layout.dims = out.dims();
  layout.dst_strides = contiguous_strides(out.dims());
  const std::vector<int64_t> in_strides = contiguous_strides(in.dims());
  const int offset = out.rank() - in.rank();
  for (int d = 0; d < out.rank(); ++d) {
    const int id = d - offset;
    layout.src_strides.push_back(id < 0 || in[id] == 1 ? 0 : in_strides[static_cast<size_t>(id)]);
  }
  return layout;
}

void register_shape_cpu_kernels(OpRegistry& registry) {
  auto view = [](const Node&) -> std::unique_ptr<OpKernel> { return std::make_unique<ViewKernel>(); };
  // Reshape-1 took its shape as an attribute; every exporter in use emits opset >= 5.
  registry.add_kernel(any_dtype_kernel("Reshape", view, 5));
  for (const char* op : {"Squeeze", "Unsqueeze", "Flatten", "Identity"}) registry.add_kernel(any_dtype_kernel(op, view));
  auto shape_value = [](const Node& n) -> std::unique_ptr<OpKernel> { return std::make_unique<ShapeValueKernel>(n); };
  registry.add_kernel(any_dtype_kernel("Shape", shape_value));
  registry.add_kernel(any_dtype_kernel("Size", shape_value));
  registry.add_kernel(any_dtype_kernel("Expand", [](const Node&) { return make_strided_copy_kernel(expand_layout); }, 8));
  registry.add_kernel(any_dtype_kernel("Tile", [](const Node&) { return make_strided_copy_kernel(plan_tile); }, 6));
}

}  // namespace onnx_genai
