// onnx_genai SampleTokens on the GPU: the op's checks and shapes (ops/schema/sampling.h), computed
// by ops/cuda/sampling_kernels.cu. The generator adds the op to a device session's decoder, so a
// sampled decode step brings token ids, not logits, to the host.
#include "ops/cuda/register.h"
#include "ops/cuda/sampling_kernels.h"
#include "ops/op.h"
#include "ops/schema/sampling.h"

namespace onnx_genai {

namespace {

class SampleTokensKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const SampleTokensParams p, SampleTokensParams::make(ctx.node, ctx.inputs));
    args_.dtype = p.logits_dtype;
    args_.batch = p.batch;
    args_.positions = p.positions;
    args_.vocab = p.vocab;
    args_.mask_rows = p.mask_rows;
    args_.mask_words = p.mask_words;
    return cuda::prepare_sample_tokens(p.logits_dtype).with_context(ctx.node.describe());
  }

  Status run(const KernelContext& ctx) const override {
    cuda::SampleTokensArgs a = args_;
    a.logits = ctx.input(SampleTokensParams::kLogits).data;
    a.params = ctx.input(SampleTokensParams::kParams).ptr<const float>();
    a.uniforms = ctx.input(SampleTokensParams::kUniforms).ptr<const double>();
    a.tokens = ctx.output(0).ptr<int64_t>();
    if (a.mask_rows > 0) a.allowed = ctx.input(SampleTokensParams::kAllowed).ptr<const uint64_t>();
    return cuda::launch_sample_tokens(a, ctx.stream);
  }

 private:
  cuda::SampleTokensArgs args_;
};

}  // namespace

void register_sampling_cuda_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = SampleTokensParams::kDomain, .op_type = SampleTokensParams::kOpType,
                                .device = DeviceType::kCuda, .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [](const Node&) { return std::make_unique<SampleTokensKernel>(); }});
}

}  // namespace onnx_genai
