// CUDA kernels of the reduce family: ArgMax, ArgMin and ReduceSum, with the CPU kernels'
// semantics (ops/cpu/reduce.cc) and parameter parsing (ops/schema/reduce.h), computed by
// ops/cuda/reduce_kernels.cu. ArgMax over the LM head's logits gives greedy tokens without the
// logits leaving the device; ReduceSum(attention_mask) gives GroupQueryAttention's seqlens_k.
#include <vector>

#include "ops/cuda/reduce_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/reduce.h"

namespace onnx_genai {

namespace {

// `shape` as [outer, len, inner] around `axis`.
cuda::ReduceView view_around(const Shape& shape, int axis) {
  return {shape.numel(0, axis), shape[axis], shape.numel(axis + 1, shape.rank())};
}

template <bool Max>
class ArgReduceKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& shape = ctx.input(0).shape;
    const int axis = normalize_axis(ctx.attrs().get_int("axis", 0), shape.rank());
    if (axis < 0) return ctx.fail("axis out of range");
    args_.dtype = ctx.input(0).dtype;
    args_.view = view_around(shape, axis);
    args_.max = Max;
    args_.select_last = ctx.attrs().get_int("select_last_index", 0) != 0;
    ctx.workspace_bytes = static_cast<size_t>(cuda::arg_reduce_workspace_bytes(args_.view));
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::ArgReduceArgs a = args_;
    a.x = ctx.input(0).data;
    a.y = ctx.output(0).ptr<int64_t>();
    a.workspace = ctx.workspace;
    return cuda::launch_arg_reduce(a, ctx.stream);
  }

 private:
  cuda::ArgReduceArgs args_;
};

class ReduceSumKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& shape = ctx.input(0).shape;
    OG_ASSIGN_OR_RETURN(std::vector<bool> reduced, reduce_axes_mask(ctx.node, ctx.value(1), shape.rank()));
    args_.dtype = ctx.input(0).dtype;
    args_.empty_input = shape.numel() == 0;
    args_.out_elems = ctx.output(0).shape.numel();
    passes_.clear();
    if (!args_.empty_input) {
      for (const ReducePass& p : plan_reduce_passes(shape, reduced)) passes_.push_back({p.outer, p.len, p.inner});
    }
    // Intermediate passes ping-pong between two accumulator buffers sized by the first two
    // passes' outputs (each pass's output is smaller than the one before).
    const int64_t acc = cuda::reduce_sum_accumulator_bytes(args_.dtype);
    const auto elems = [](const cuda::ReduceView& v) { return v.outer * v.inner; };
    args_.second_buffer_offset = 0;
    ctx.workspace_bytes = 0;
    if (passes_.size() > 1) {
      args_.second_buffer_offset = align(elems(passes_[0]) * acc);
      const int64_t second = passes_.size() > 2 ? elems(passes_[1]) * acc : 0;
      ctx.workspace_bytes = static_cast<size_t>(args_.second_buffer_offset + second);
    }
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::ReduceSumArgs a = args_;
    a.passes = passes_;
    a.x = ctx.input(0).data;
    a.y = ctx.output(0).data;
    a.workspace = ctx.workspace;
    return cuda::launch_reduce_sum(a, ctx.stream);
  }

 private:
  static int64_t align(int64_t bytes) { return (bytes + 255) / 256 * 256; }

  cuda::ReduceSumArgs args_;
  std::vector<cuda::ReduceView> passes_;
};

template <typename K>
KernelDef cuda_kernel(const char* op, std::vector<DType> dtypes) {
  return KernelDef{.domain = "", .op_type = op, .device = DeviceType::kCuda, .dtypes = std::move(dtypes),
                   .create = [](const Node&) -> std::unique_ptr<OpKernel> { return std::make_unique<K>(); }};
}

// The CPU kernels' dtype sets, so a node runs on the GPU exactly when the CPU could run it.
std::vector<DType> supported(bool (*supports)(DType)) {
  std::vector<DType> dtypes;
  for (const DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI8, DType::kU8, DType::kI32,
                        DType::kI64}) {
    if (supports(d)) dtypes.push_back(d);
  }
  return dtypes;
}

}  // namespace

void register_reduce_cuda_kernels(OpRegistry& registry) {
  registry.add_kernel(cuda_kernel<ArgReduceKernel<true>>("ArgMax", supported(cuda::arg_reduce_supported)));
  registry.add_kernel(cuda_kernel<ArgReduceKernel<false>>("ArgMin", supported(cuda::arg_reduce_supported)));
  registry.add_kernel(cuda_kernel<ReduceSumKernel>("ReduceSum", supported(cuda::reduce_sum_supported)));
}

}  // namespace onnx_genai
