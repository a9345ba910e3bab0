// CUDA kernel of ReduceMean (f32, f16, bf16) with the CPU kernel's semantics and parameter
// parsing (ops/cpu/reduce.cc, ops/schema/reduce.h): the Hugging Face RMS-norm decomposition's
// mean over the hidden dim. Reductions the shared plan splits into several passes (reduced axes
// that are not adjacent) and empty inputs stay on the CPU: prepare() turns them down. Computed
// by ops/cuda/mean_kernels.cu. A reduce-family op; it lives here because reduce.cc has another
// owner.
#include <vector>

#include "ops/cuda/mean_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/reduce.h"

namespace onnx_genai {

namespace {

class ReduceMeanKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& shape = ctx.input(0).shape;
    args_.dtype = ctx.input(0).dtype;
    if (!cuda::mean_supported(args_.dtype)) return ctx.fail("no CUDA kernel for dtype ", dtype_name(args_.dtype));
    OG_ASSIGN_OR_RETURN(std::vector<bool> reduced, reduce_axes_mask(ctx.node, ctx.value(1), shape.rank()));
    if (shape.numel() == 0) return ctx.fail("no CUDA kernel for an empty input");
    const std::vector<ReducePass> passes = plan_reduce_passes(shape, reduced);
    if (passes.size() != 1) return ctx.fail("no CUDA kernel for a reduction of ", passes.size(), " passes");
    args_.outer = passes[0].outer;
    args_.len = passes[0].len;
    args_.inner = passes[0].inner;
    args_.count = 1;
    for (int d = 0; d < shape.rank(); ++d) {
      if (reduced[static_cast<size_t>(d)]) args_.count *= shape[d];
    }
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::MeanArgs a = args_;
    a.x = ctx.input(0).data;
    a.y = ctx.output(0).data;
    return cuda::launch_mean(a, ctx.stream);
  }

 private:
  cuda::MeanArgs args_;
};

}  // namespace

void register_mean_cuda_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = "", .op_type = "ReduceMean", .device = DeviceType::kCuda,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [](const Node&) { return std::make_unique<ReduceMeanKernel>(); }});
}

}  // namespace onnx_genai
