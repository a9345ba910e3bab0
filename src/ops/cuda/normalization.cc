// CUDA kernels for SimplifiedLayerNormalization (default and com.microsoft domains), ONNX
// RMSNormalization (opset 23: the same RMS norm, with Y as its only output) and com.microsoft
// SkipSimplifiedLayerNormalization: the same semantics and outputs as the CPU kernels
// (ops/cpu/normalization.cc), computed by ops/cuda/normalization_kernels.cu.
#include "ops/cuda/normalization_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/normalization.h"

namespace onnx_genai {

namespace {

void* output_or_null(const KernelContext& ctx, int index) {
  return index < static_cast<int>(ctx.outputs.size()) ? ctx.output(index).data : nullptr;
}

// X [rows, len] with len = X.shape[axis:]; outputs Y and (optional) inv_std_var.
class SimplifiedNormKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& x = ctx.input(0).shape;
    const int axis = normalize_axis(ctx.attrs().get_int("axis", -1), x.rank());
    if (axis < 0) return ctx.fail("axis out of range");
    args_.dtype = ctx.input(0).dtype;
    args_.rows = x.numel(0, axis);
    args_.len = x.numel(axis, x.rank());
    // Scales varying across rows (ops/schema/normalization.h) are left to the CPU kernel.
    for (int input : {1, 2}) {
      if (ctx.has_input(input) && !norm_parameter_repeats_per_row(ctx.input(input).shape, x, axis)) {
        return ctx.fail("scale / bias ", ctx.input(input).shape.to_string(), " varies across rows of X ", x.to_string(),
                        ": not supported on CUDA");
      }
    }
    args_.scale_period = ctx.input(1).shape.numel();
    args_.bias_period = ctx.has_input(2) ? ctx.input(2).shape.numel() : args_.len;
    if (args_.len > 0 && (args_.scale_period == 0 || args_.bias_period == 0 || args_.len % args_.scale_period != 0 ||
                          args_.len % args_.bias_period != 0)) {
      return ctx.fail("scale/bias size does not divide the normalised size ", args_.len);
    }
    args_.epsilon = ctx.attrs().get_float("epsilon", 1e-5f);
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::RmsNormArgs a = args_;
    a.x = ctx.input(0).data;
    a.scale = ctx.input(1).data;
    a.bias = ctx.has_input(2) ? ctx.input(2).data : nullptr;
    a.y = ctx.output(0).data;
    a.inv_std = static_cast<float*>(output_or_null(ctx, 1));
    return cuda::launch_rms_norm(a, ctx.stream);
  }

 private:
  cuda::RmsNormArgs args_;
};

// input [B, S, H] or [N, H], skip repeating over rows, gamma and bias [H]; outputs output,
// mean (zeros), inv_std_var, input_skip_bias_sum.
class SkipSimplifiedNormKernel final : public OpKernel {
 public:
  static constexpr int kBias = 3, kMeanOut = 1, kInvStdOut = 2, kSumOut = 3;

  Status prepare(PrepareContext& ctx) override {
    const Shape& x = ctx.input(0).shape;
    const Shape& skip = ctx.input(1).shape;
    args_.dtype = ctx.input(0).dtype;
    args_.len = x[x.rank() - 1];
    args_.rows = x.numel(0, x.rank() - 1);
    args_.skip_rows = skip.numel(0, skip.rank() - 1);
    if (args_.skip_rows == 0 ? args_.rows != 0 : args_.rows % args_.skip_rows != 0) {
      return ctx.fail("skip rows ", args_.skip_rows, " do not repeat evenly over input rows ", args_.rows);
    }
    if (args_.skip_rows == 0) args_.skip_rows = 1;
    args_.scale_period = args_.len;
    args_.bias_period = args_.len;
    args_.epsilon = ctx.attrs().get_float("epsilon", 1e-12f);
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::RmsNormArgs a = args_;
    a.x = ctx.input(0).data;
    a.skip = ctx.input(1).data;
    a.scale = ctx.input(2).data;
    a.skip_bias = ctx.has_input(kBias) ? ctx.input(kBias).data : nullptr;
    a.y = ctx.output(0).data;
    a.mean = static_cast<float*>(output_or_null(ctx, kMeanOut));
    a.inv_std = static_cast<float*>(output_or_null(ctx, kInvStdOut));
    a.sum = output_or_null(ctx, kSumOut);
    return cuda::launch_rms_norm(a, ctx.stream);
  }

 private:
  cuda::RmsNormArgs args_;
};

template <typename K>
void add_cuda_kernel(OpRegistry& registry, const char* domain, const char* op) {
  registry.add_kernel(KernelDef{.domain = domain, .op_type = op, .device = DeviceType::kCuda,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [](const Node&) -> std::unique_ptr<OpKernel> { return std::make_unique<K>(); }});
}

}  // namespace

void register_normalization_cuda_kernels(OpRegistry& registry) {
  for (const char* domain : {"", "com.microsoft"}) {
    add_cuda_kernel<SimplifiedNormKernel>(registry, domain, "SimplifiedLayerNormalization");
  }
  add_cuda_kernel<SimplifiedNormKernel>(registry, "", "RMSNormalization");
  add_cuda_kernel<SkipSimplifiedNormKernel>(registry, "com.microsoft", "SkipSimplifiedLayerNormalization");
}

}  // namespace onnx_genai
