// onnx_genai AllReduce / AllGather on the CPU (contract in ops/schema/collective.h): each calls
// the session's communicator, which waits for the other ranks.
#include <cstring>

#include "ops/cpu/elementwise.h"
#include "ops/op.h"
#include "ops/schema/collective.h"
#include "parallel/communicator.h"

namespace onnx_genai {

namespace {

Result<Communicator*> bound_communicator(const PrepareContext& ctx) {
  if (ctx.communicator == nullptr) {
    return ctx.fail("needs a session bound to a tensor-parallel communicator (SessionOptions::communicator)");
  }
  return ctx.communicator;
}

class AllReduceKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(comm_, bound_communicator(ctx));
    dtype_ = ctx.input(0).dtype;
    // 16-bit floats are summed in float32 (in the workspace) and rounded once at the end.
    if (dtype_ != DType::kF32) ctx.workspace_bytes = sizeof(float) * static_cast<size_t>(ctx.input(0).shape.numel());
    return Status::ok();
  }

  // Y starts as a copy of X and is summed in place: X stays what its producer wrote.
  Status run(const KernelContext& ctx) const override {
    const KernelTensor& x = ctx.input(0);
    const KernelTensor& y = ctx.output(0);
    if (dtype_ == DType::kF32) {
      if (x.data != y.data) std::memcpy(y.data, x.data, sizeof(float) * static_cast<size_t>(x.numel()));
      return comm_->all_reduce_sum(y.ptr<float>(), y.numel());
    }
    return dtype_ == DType::kF16 ? reduce_wide<Float16>(x, y, static_cast<float*>(ctx.workspace))
                                 : reduce_wide<BFloat16>(x, y, static_cast<float*>(ctx.workspace));
  }

 private:
  template <typename T>
  Status reduce_wide(const KernelTensor& x, const KernelTensor& y, float* sum) const {
    widen_to_f32(x.ptr<T>(), sum, x.numel());
    OG_RETURN_IF_ERROR(comm_->all_reduce_sum(sum, x.numel()));
    narrow_from_f32(sum, y.ptr<T>(), y.numel());
    return Status::ok();
  }

  Communicator* comm_ = nullptr;
  DType dtype_ = DType::kF32;
};

class AllGatherKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(comm_, bound_communicator(ctx));
    const int64_t world = ctx.attrs().get_int("world_size", 0);
    if (world != comm_->world_size()) {
      return ctx.fail("world_size ", world, " differs from the communicator's ", comm_->world_size(), " ranks");
    }
    const Shape& in = ctx.input(0).shape;
    const int axis = normalize_axis(ctx.attrs().get_int("axis", -1), in.rank());
    outer_ = in.numel(0, axis);
    inner_bytes_ = dtype_storage_bytes(ctx.input(0).dtype, in.numel(axis, in.rank()));
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return comm_->all_gather(ctx.input(0).data, ctx.output(0).data, outer_, inner_bytes_);
  }

 private:
  Communicator* comm_ = nullptr;
  int64_t outer_ = 0, inner_bytes_ = 0;
};

}  // namespace

void register_collective_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = CollectiveOps::kDomain, .op_type = CollectiveOps::kAllReduce,
                                .device = DeviceType::kCpu, .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [](const Node&) { return std::make_unique<AllReduceKernel>(); }});
  registry.add_kernel(KernelDef{.domain = CollectiveOps::kDomain, .op_type = CollectiveOps::kAllGather,
                                .device = DeviceType::kCpu,
                                .create = [](const Node&) { return std::make_unique<AllGatherKernel>(); }});
}

}  // namespace onnx_genai
