// CUDA kernels of the data-movement ops a decoder's attention reshuffles per step: Transpose,
// Slice, Expand, Concat and Split (Phi-3's fused projections), every dtype of 1, 2, 4 or 8 bytes.
// Each is the CPU kernel's loop nest (ops/cpu/layout.cc, slice.cc, shape.cc, concat_split.cc)
// with the shared parameter parsing (ops/schema/data_params.h), run as one strided copy per
// output (Concat / Split: one per part) by ops/cuda/layout_kernels.cu.
#include <functional>
#include <vector>

#include "ops/cuda/layout_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {

namespace {

// The loop nest of a copy from input 0 to output 0, in elements.
struct CopyNest {
  std::vector<int64_t> dims, src_strides, dst_strides;
  int64_t src_offset = 0;
};
using NestPlanner = std::function<Result<CopyNest>(const PrepareContext&)>;

Result<int> element_bytes(const PrepareContext& ctx, DType dtype) {
  const int bits = dtype_bits(dtype);
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64) return ctx.fail("no CUDA kernel for dtype ", dtype_name(dtype));
  return bits / 8;
}

Result<CopyNest> plan_transpose(const PrepareContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const std::vector<int64_t> in_strides = in.strides();
  CopyNest nest;
  for (int64_t p : resolve_perm(ctx.attrs(), in.rank())) {
    nest.dims.push_back(in[static_cast<int>(p)]);
    nest.src_strides.push_back(in_strides[static_cast<size_t>(p)]);
  }
  nest.dst_strides = ctx.output(0).shape.strides();
  return nest;
}

// Output dim d reads the input from start[d] with stride * step[d] (negative steps walk back).
Result<CopyNest> plan_slice(const PrepareContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  auto params = resolve_slice(in, ctx.attrs(), ctx.node.opset, ctx.value(1), ctx.value(2), ctx.value(3), ctx.value(4));
  if (!params) return params.status().with_context(ctx.node.describe());
  const std::vector<int64_t> in_strides = in.strides();
  CopyNest nest;
  nest.dims = params->count;
  nest.dst_strides = ctx.output(0).shape.strides();
  for (size_t d = 0; d < in_strides.size(); ++d) {
    nest.src_strides.push_back(in_strides[d] * params->step[d]);
    nest.src_offset += params->start[d] * in_strides[d];
  }
  return nest;
}

// Output element reads the input at the same index, right-aligned, stride 0 where the input
// dim is 1 (or missing).
Result<CopyNest> plan_expand(const PrepareContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const Shape& out = ctx.output(0).shape;
  const std::vector<int64_t> in_strides = in.strides();
  CopyNest nest;
  nest.dims = out.dims();
  nest.dst_strides = out.strides();
  const int offset = out.rank() - in.rank();
  for (int d = 0; d < out.rank(); ++d) {
    const int id = d - offset;
    nest.src_strides.push_back(id < 0 || in[id] == 1 ? 0 : in_strides[static_cast<size_t>(id)]);
  }
  return nest;
}

class StridedCopyKernel final : public OpKernel {
 public:
  explicit StridedCopyKernel(NestPlanner planner) : planner_(std::move(planner)) {}

  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const int elem, element_bytes(ctx, ctx.input(0).dtype));
    OG_ASSIGN_OR_RETURN(CopyNest nest, planner_(ctx));
    auto plan = cuda::StridedCopyPlan::make(nest.dims, nest.src_strides, nest.dst_strides, nest.src_offset, elem);
    if (!plan) return plan.status().with_context(ctx.node.describe());
    plan_ = *plan;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return cuda::launch_strided_copy(plan_, ctx.input(0).data, ctx.output(0).data, ctx.stream);
  }

 private:
  NestPlanner planner_;
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

void add_copy(OpRegistry& registry, const char* op, int since_version, NestPlanner planner) {
  add_kernel(registry, op, since_version, [planner](const Node&) { return std::make_unique<StridedCopyKernel>(planner); });
}

}  // namespace

void register_layout_cuda_kernels(OpRegistry& registry) {
  add_copy(registry, "Transpose", 1, plan_transpose);
  add_copy(registry, "Slice", 1, plan_slice);
  add_copy(registry, "Expand", 8, plan_expand);
  add_kernel(registry, "Concat", 4, [](const Node&) { return std::make_unique<AxisCopyKernel>(true); });
  add_kernel(registry, "Split", 2, [](const Node&) { return std::make_unique<AxisCopyKernel>(false); });
}

}  // namespace onnx_genai
