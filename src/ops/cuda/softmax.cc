// CUDA kernels of Softmax and LogSoftmax (f32, f16, bf16) with the CPU kernel's semantics
// (ops/cpu/softmax.cc): from opset 13 along the single axis `axis` (default -1); before, over
// the input coerced to 2-D at `axis` (default 1), i.e. everything from `axis` on as one row.
// Computed by ops/cuda/softmax_kernels.cu.
#include "ops/cuda/register.h"
#include "ops/cuda/softmax_kernels.h"
#include "ops/op.h"

namespace onnx_genai {

namespace {

class SoftmaxKernel final : public OpKernel {
 public:
  explicit SoftmaxKernel(bool log) { args_.log = log; }

  Status prepare(PrepareContext& ctx) override {
    const Shape& s = ctx.input(0).shape;
    args_.dtype = ctx.input(0).dtype;
    if (!cuda::softmax_supported(args_.dtype)) return ctx.fail("no CUDA kernel for dtype ", dtype_name(args_.dtype));
    const bool coerce_2d = ctx.node.opset < 13;
    int64_t axis = ctx.attrs().get_int("axis", coerce_2d ? 1 : -1);
    if (axis < 0) axis += s.rank();
    if (axis < 0 || axis > s.rank() || (!coerce_2d && axis == s.rank())) return ctx.fail("axis out of range");
    const int a = static_cast<int>(axis);
    args_.outer = s.numel(0, a);
    args_.len = coerce_2d ? s.numel(a, s.rank()) : s[a];
    args_.inner = coerce_2d ? 1 : s.numel(a + 1, s.rank());
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::SoftmaxArgs a = args_;
    a.x = ctx.input(0).data;
    a.y = ctx.output(0).data;
    return cuda::launch_softmax(a, ctx.stream);
  }

 private:
  cuda::SoftmaxArgs args_;
};

void add_kernel(OpRegistry& registry, const char* op, bool log) {
  registry.add_kernel(KernelDef{.domain = "", .op_type = op, .device = DeviceType::kCuda,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [log](const Node&) { return std::make_unique<SoftmaxKernel>(log); }});
}

}  // namespace

void register_softmax_cuda_kernels(OpRegistry& registry) {
  add_kernel(registry, "Softmax", false);
  add_kernel(registry, "LogSoftmax", true);
}

}  // namespace onnx_genai
