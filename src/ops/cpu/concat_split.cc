// Concat and Split: viewed as [outer, axis * inner] blocks, every input (Concat) or output
// (Split) is one strided copy of `outer` rows of contiguous bytes, so a KV-cache append along the
// sequence axis is one memcpy per (batch, head) row.
#include "ops/cpu/copy_util.h"
#include "ops/op.h"

namespace onnx_genai {
namespace {

class AxisCopyKernel final : public OpKernel {
 public:
  explicit AxisCopyKernel(bool concat) : concat_(concat) {}

  Status prepare(PrepareContext& ctx) override {
    // The joined tensor: Concat's output, Split's input.
    const Shape& whole = concat_ ? ctx.output(0).shape : ctx.input(0).shape;
    const int axis = normalize_axis(ctx.attrs().get_int("axis", 0), whole.rank());
    OG_ASSIGN_OR_RETURN(const int64_t elem, element_bytes(ctx.input(0).dtype));
    const int64_t outer = whole.numel(0, axis);
    const int64_t inner = whole.numel(axis + 1, whole.rank());
    const int64_t whole_row = whole[axis] * inner;
    const size_t parts = concat_ ? ctx.inputs.size() : ctx.outputs.size();
    pieces_.clear();
    int64_t offset = 0;
    for (size_t i = 0; i < parts; ++i) {
      const Shape& part = concat_ ? ctx.input(static_cast<int>(i)).shape : ctx.output(static_cast<int>(i)).shape;
      const int64_t part_row = part[axis] * inner;
      const int64_t dims[] = {outer, part_row};
      const int64_t part_strides[] = {part_row, 1};
      const int64_t whole_strides[] = {whole_row, 1};
      OG_ASSIGN_OR_RETURN(StridedCopy copy, StridedCopy::make(dims, concat_ ? part_strides : whole_strides,
                                                              concat_ ? whole_strides : part_strides, elem));
      pieces_.push_back({std::move(copy), offset * elem});
      offset += part_row;
    }
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    for (size_t i = 0; i < pieces_.size(); ++i) {
      const Piece& p = pieces_[i];
      if (concat_) {
        p.copy.run(ctx.inputs[i].data, static_cast<char*>(ctx.output(0).data) + p.whole_offset, ctx.pool);
      } else {
        p.copy.run(static_cast<const char*>(ctx.input(0).data) + p.whole_offset, ctx.outputs[i].data, ctx.pool);
      }
    }
    return Status::ok();
  }

 private:
  struct Piece {
    StridedCopy copy;
    int64_t whole_offset;  // bytes into the joined tensor's first row
  };
  bool concat_;
  std::vector<Piece> pieces_;
};

}  // namespace

void register_concat_split_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(any_dtype_kernel("Concat", [](const Node&) { return std::make_unique<AxisCopyKernel>(true); }, 4));
  registry.add_kernel(any_dtype_kernel("Split", [](const Node&) { return std::make_unique<AxisCopyKernel>(false); }, 2));
}

}  // namespace onnx_genai
