// Slice: one strided copy. Output dim d reads input stride * step from the first selected
// element, so negative steps are negative strides and an unsliced tail stays one memcpy run.
#include "ops/cpu/copy_util.h"
#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {

Result<CopyLayout> slice_layout(const PrepareContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const int opset = ctx.node.opset;
  OG_ASSIGN_OR_RETURN(SliceParams p, resolve_slice(in, ctx.attrs(), opset, ctx.value(1), ctx.value(2), ctx.value(3), ctx.value(4)));
  const std::vector<int64_t> in_strides = in.strides();
  CopyLayout layout;
  layout.dims = p.count;
  layout.dst_strides = contiguous_strides(p.count);
  for (int d = 0; d < in.rank(); ++d) {
    const size_t ud = static_cast<size_t>(d);
    layout.src_strides.push_back(in_strides[ud] * p.step[ud]);
    layout.src_offset += p.start[ud] * in_strides[ud];
  }
  return layout;
}

void register_slice_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(any_dtype_kernel("Slice", [](const Node&) { return make_strided_copy_kernel(slice_layout); }));
}

}  // namespace onnx_genai
