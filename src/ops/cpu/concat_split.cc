// Concat and Split: viewed as [outer, axis * inner] blocks, every input (Concat) or output
// (Split) is one strided copy of `outer` rows of contiguous bytes, so a KV-cache append along the
// sequence axis is one memcpy per (batch, head) row.
#include "ops/cpu/copy_util.h"
#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {
namespace {

class AxisCopyKernel final : public OpKernel {
 public:
  explicit AxisCopyKernel(bool concat) : concat_(concat) {}

  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const int64_t elem, element_bytes(ctx.input(0).dtype));
    OG_ASSIGN_OR_RETURN(const std::vector<AxisPiece> pieces, axis_pieces(ctx, concat_));
    pieces_.clear();
    for (const AxisPiece& piece : pieces) {
      const int64_t dims[] = {piece.outer, piece.part_row};
      const int64_t part_strides[] = {piece.part_row, 1};
      const int64_t whole_strides[] = {piece.whole_row, 1};
      OG_ASSIGN_OR_RETURN(StridedCopy copy, StridedCopy::make(dims, concat_ ? part_strides : whole_strides,
                                                              concat_ ? whole_strides : part_strides, elem));
      pieces_.push_back({std::move(copy), piece.column * elem});
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
