// CUDA kernels of Gather and GatherElements (any axis, any byte-sized element type, int32 / int64
// indices) and com.microsoft GatherBlockQuantized (ops/schema/gather_block_quantized.h), with the CPU
// kernels' semantics (ops/cpu/gather.cc, gather_block_quantized.cc) except for out-of-range
// indices: the CPU kernels return an error, these write zeros for the rows such an index
// selects (the index is only known on the device; see ops/cuda/gather_kernels.h).
#include "ops/cpu/copy_util.h"
#include "ops/cuda/gather_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/gather_block_quantized.h"

namespace onnx_genai {

namespace {

// data [outer, axis_n, inner] and indices [n] give out [outer, n, inner].
class GatherKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& data = ctx.input(0).shape;
    const int axis = normalize_axis(ctx.attrs().get_int("axis", 0), data.rank());
    if (axis < 0) return ctx.fail("axis out of range for rank ", data.rank());
    const Result<int64_t> elem = element_bytes(ctx.input(0).dtype);
    if (!elem.is_ok()) return ctx.fail(elem.status().message());
    args_.outer = data.numel(0, axis);
    args_.axis_n = data[axis];
    args_.n = ctx.input(1).shape.numel();
    args_.row_bytes = data.numel(axis + 1, data.rank()) * *elem;
    args_.index_dtype = ctx.input(1).dtype;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::GatherArgs a = args_;
    a.data = ctx.input(0).data;
    a.indices = ctx.input(1).data;
    a.out = ctx.output(0).data;
    return cuda::launch_gather(a, ctx.stream);
  }

 private:
  cuda::GatherArgs args_;
};

// Indices of data's rank; the output takes the indices' shape (ops/schema/gather.cc checks both).
class GatherElementsKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& data = ctx.input(0).shape;
    const Shape& indices = ctx.input(1).shape;
    if (data.rank() > cuda::kGatherElementsMaxRank) return ctx.fail("rank ", data.rank(), " is not supported");
    const Result<int64_t> elem = element_bytes(ctx.input(0).dtype);
    if (!elem.is_ok()) return ctx.fail(elem.status().message());
    if (*elem > 8) return ctx.fail("no CUDA kernel for ", *elem, "-byte elements");
    cuda::GatherElementsArgs& a = args_;
    a.rank = data.rank();
    a.axis = normalize_axis(ctx.attrs().get_int("axis", 0), a.rank);
    if (a.axis < 0) return ctx.fail("axis out of range for rank ", a.rank);
    const std::vector<int64_t> strides = data.strides();
    for (int d = 0; d < a.rank; ++d) {
      a.dims[d] = indices[d];
      a.data_strides[d] = strides[static_cast<size_t>(d)];
    }
    a.axis_n = data[a.axis];
    a.total = indices.numel();
    a.elem_bytes = static_cast<int>(*elem);
    a.index_dtype = ctx.input(1).dtype;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::GatherElementsArgs a = args_;
    a.data = ctx.input(0).data;
    a.indices = ctx.input(1).data;
    a.out = ctx.output(0).data;
    return cuda::launch_gather_elements(a, ctx.stream);
  }

 private:
  cuda::GatherElementsArgs args_;
};

class GatherBlockQuantizedKernel final : public OpKernel {
 public:
  using Params = GatherBlockQuantizedParams;

  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const Params p, Params::make(ctx.node, ctx.inputs));
    const Shape& codes = p.codes;
    const int g = p.gather_axis, q = p.quantize_axis;
    cuda::GatherBlockQuantizedArgs& a = args_;
    a.dtype = ctx.input(Params::kScales).dtype;
    a.index_dtype = ctx.input(Params::kIndices).dtype;
    a.outer = codes.numel(0, g);
    a.axis_n = codes[g];
    a.n = ctx.input(Params::kIndices).shape.numel();
    a.slice = codes.numel(g + 1, codes.rank());
    a.q_len = codes[q];
    a.q_inner = codes.numel(q + 1, codes.rank());
    a.blocks = p.blocks;
    a.block_size = p.block_size;
    a.bits = static_cast<int>(p.bits);
    a.is_signed = p.data_dtype == DType::kI4;
    a.zp_row_bytes = 0;
    a.default_zero_point = 0;
    if (p.data_dtype == DType::kU8) {
      a.default_zero_point = 1 << (p.bits - 1);
      if (p.bits < 8) a.zp_row_bytes = (p.blocks * p.bits + 7) / 8;
    }
    a.by_rows = q == codes.rank() - 1 && g < q && a.q_len * p.bits % 8 == 0;
    has_zero_points_ = p.has_zero_points;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::GatherBlockQuantizedArgs a = args_;
    a.data = ctx.input(Params::kData).data;
    a.indices = ctx.input(Params::kIndices).data;
    a.scales = ctx.input(Params::kScales).data;
    a.zero_points = has_zero_points_ ? ctx.input(Params::kZeroPoints).data : nullptr;
    a.out = ctx.output(0).data;
    return cuda::launch_gather_block_quantized(a, ctx.stream);
  }

 private:
  cuda::GatherBlockQuantizedArgs args_;
  bool has_zero_points_ = false;
};

}  // namespace

void register_gather_cuda_kernels(OpRegistry& registry) {
  // Rows move as bytes: every dtype is accepted here and prepare() rejects sub-byte ones.
  registry.add_kernel(KernelDef{.domain = "", .op_type = "Gather", .device = DeviceType::kCuda, .dtypes = {},
                                .create = [](const Node&) { return std::make_unique<GatherKernel>(); }});
  registry.add_kernel(KernelDef{.domain = "", .op_type = "GatherElements", .device = DeviceType::kCuda, .dtypes = {},
                                .create = [](const Node&) { return std::make_unique<GatherElementsKernel>(); }});
  registry.add_kernel(KernelDef{.domain = "com.microsoft", .op_type = "GatherBlockQuantized", .device = DeviceType::kCuda,
                                .dtypes = {DType::kU8, DType::kU4, DType::kI4},
                                .type_input = GatherBlockQuantizedParams::kData,
                                .create = [](const Node&) { return std::make_unique<GatherBlockQuantizedKernel>(); }});
}

}  // namespace onnx_genai
