// CUDA kernels of the data-movement ops a decoder's attention reshuffles per step: Transpose,
// Slice, Expand, Concat and Split (Phi-3's fused projections), every dtype of 1, 2, 4 or 8 bytes.
// Each takes the CPU kernel's loop nest (ops/cpu/copy_util.h's layouts; Concat / Split:
// axis_pieces in ops/schema/data_params.h), run as one strided copy per output (Concat / Split:
// one per part) by ops/cuda/layout_kernels.cu.
#include <functional>
#include <vector>

#include "ops/cpu/copy_util.h"
#include "ops/cuda/layout_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {

namespace {

Result<int> element_bytes(const PrepareContext& ctx, DType dtype) {
  const int bits = dtype_bits(dtype);
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64) return ctx.fail("no CUDA kernel for dtype ", dtype_name(dtype));
  return bits / 8;
}

class StridedCopyKernel final : public OpKernel {
 public:
  explicit StridedCopyKernel(CopyPlanner planner) : planner_(std::move(planner)) {}

  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const int elem, element_bytes(ctx, ctx.input(0).dtype));
    Result<CopyLayout> layout = planner_(ctx);
    if (!layout) return layout.status().with_context(ctx.node.describe());
    auto plan = cuda::StridedCopyPlan::make(layout->dims, layout->src_strides, layout->dst_strides, layout->src_offset, elem);
    if (!plan) return plan.status().with_context(ctx.node.describe());
    plan_ = *plan;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return cuda::launch_strided_copy(plan_, ctx.input(0).data, ctx.output(0).data, ctx.stream);
  }

 private:
  CopyPlanner planner_;
  cuda::StridedCopyPlan plan_;
};

// Concat and Split viewed as [outer, axis * inner]: each part (a Concat input, a Split output)
// is `outer` contiguous rows at its column offset into the joined tensor's rows, one strided copy
// per part (a KV-cache append is one copy of the past, one of the new).
class AxisCopyKernel final : public OpKernel {
 public:
  explicit AxisCopyKernel(bool concat) : concat_(concat) {}

  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const int elem, element_bytes(ctx, ctx.input(0).dtype));
    OG_ASSIGN_OR_RETURN(const std::vector<AxisPiece> pieces, axis_pieces(ctx, concat_));
    pieces_.clear();
    for (const AxisPiece& piece : pieces) {
      const int64_t dims[] = {piece.outer, piece.part_row};
      const int64_t part_strides[] = {piece.part_row, 1};
      const int64_t whole_strides[] = {piece.whole_row, 1};
      auto plan = cuda::StridedCopyPlan::make(dims, concat_ ? part_strides : whole_strides,
                                              concat_ ? whole_strides : part_strides, 0, elem);
      if (!plan) return plan.status().with_context(ctx.node.describe());
      pieces_.push_back({*plan, piece.column * elem});
    }
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    for (size_t i = 0; i < pieces_.size(); ++i) {
      const Piece& p = pieces_[i];
      if (concat_) {
        auto* dst = static_cast<char*>(ctx.output(0).data) + p.whole_offset_bytes;
        OG_RETURN_IF_ERROR(cuda::launch_strided_copy(p.plan, ctx.inputs[i].data, dst, ctx.stream));
      } else {
        const auto* src = static_cast<const char*>(ctx.input(0).data) + p.whole_offset_bytes;
        OG_RETURN_IF_ERROR(cuda::launch_strided_copy(p.plan, src, ctx.outputs[i].data, ctx.stream));
      }
    }
    return Status::ok();
  }

 private:
  struct Piece {
    cuda::StridedCopyPlan plan;
    int64_t whole_offset_bytes;  // into the joined tensor's first row
  };
  bool concat_;
  std::vector<Piece> pieces_;
};

// Any dtype, as on the CPU; prepare() turns down element sizes the copy has no kernel for.
void add_kernel(OpRegistry& registry, const char* op, int since_version,
                std::function<std::unique_ptr<OpKernel>(const Node&)> create) {
  registry.add_kernel(KernelDef{.domain = "", .op_type = op, .device = DeviceType::kCuda, .dtypes = {},
                                .since_version = since_version, .create = std::move(create)});
}

void add_copy(OpRegistry& registry, const char* op, int since_version, CopyPlanner planner) {
  add_kernel(registry, op, since_version, [planner](const Node&) { return std::make_unique<StridedCopyKernel>(planner); });
}

}  // namespace

void register_layout_cuda_kernels(OpRegistry& registry) {
  add_copy(registry, "Transpose", 1, transpose_layout);
  add_copy(registry, "Slice", 1, slice_layout);
  add_copy(registry, "Expand", 8, expand_layout);
  add_kernel(registry, "Concat", 4, [](const Node&) { return std::make_unique<AxisCopyKernel>(true); });
  add_kernel(registry, "Split", 2, [](const Node&) { return std::make_unique<AxisCopyKernel>(false); });
}

}  // namespace onnx_genai
