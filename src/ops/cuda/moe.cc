// com.microsoft MoE and QMoE on the GPU: the schema's MoEParams (ops/schema/moe.h) read the node
// as for the CPU kernel (ops/cpu/moe.cc, the reference), computed by the kernels of
// moe_kernels.h. What those lack (2-bit codes, more than kMaxMoEExperts experts or kMaxMoETopK
// per token, a projection input size that is not whole 16-byte chunks of weights) fails prepare,
// so the node runs on the CPU.
#include "ops/cuda/moe_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/moe.h"

namespace onnx_genai {

namespace {

using Params = MoEParams;

cuda::MoEWeights device_weights(const Params& p) {
  switch (p.quant) {
    case Params::Quant::kMxfp4: return cuda::MoEWeights::kMxfp4;
    case Params::Quant::kInt: return p.bits == 8 ? cuda::MoEWeights::kInt8 : cuda::MoEWeights::kInt4;
    case Params::Quant::kFloat: break;
  }
  return cuda::MoEWeights::kFloat;
}

cuda::MoERouting device_routing(Params::Routing routing) {
  switch (routing) {
    case Params::Routing::kTopKSoftmax: return cuda::MoERouting::kTopKSoftmax;
    case Params::Routing::kSparseMixer: return cuda::MoERouting::kSparseMixer;
    case Params::Routing::kSoftmaxTopK: break;
  }
  return cuda::MoERouting::kSoftmaxTopK;
}

cuda::MoEActivation device_activation(Params::Activation act) {
  switch (act) {
    case Params::Activation::kRelu: return cuda::MoEActivation::kRelu;
    case Params::Activation::kGelu: return cuda::MoEActivation::kGelu;
    case Params::Activation::kSilu: return cuda::MoEActivation::kSilu;
    case Params::Activation::kIdentity: return cuda::MoEActivation::kIdentity;
    case Params::Activation::kSwiGLU: break;
  }
  return cuda::MoEActivation::kSwiGLU;
}

class MoEKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(p_, Params::make(ctx.node, ctx.inputs));
    if (p_.quant == Params::Quant::kInt && p_.bits == 2) return ctx.fail("2-bit experts have no CUDA kernel");
    cuda::MoEArgs& a = args_;
    a.dtype = p_.dtype;
    a.scale_dtype = p_.quant == Params::Quant::kInt ? p_.scale_dtype : DType::kF32;
    a.weights = device_weights(p_);
    a.per_row = p_.per_row;
    a.routing = device_routing(p_.routing);
    a.normalize = p_.normalize;
    a.activation = device_activation(p_.activation);
    a.swiglu_fusion = static_cast<int>(p_.swiglu_fusion);
    a.alpha = p_.alpha, a.beta = p_.beta, a.limit = p_.limit;
    a.tokens = p_.tokens, a.hidden = p_.hidden, a.inter = p_.inter, a.experts = p_.experts, a.k = p_.k;
    a.has_fc3 = p_.fc[2].present;
    cuda::MoEProjection* fc[Params::kProjections] = {&a.fc1, &a.fc2, &a.fc3};
    for (int i = 0; i < Params::kProjections; ++i) {
      const Params::Projection& from = p_.fc[i];
      fc[i]->n = from.n, fc[i]->k = from.k, fc[i]->block_size = from.block_size, fc[i]->blocks = from.blocks;
    }
    OG_RETURN_IF_ERROR(cuda::check_moe(a).with_context(ctx.node.describe()));
    ctx.workspace_bytes = cuda::moe_workspace(a).total;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::MoEArgs a = args_;
    cuda::MoEProjection* fc[Params::kProjections] = {&a.fc1, &a.fc2, &a.fc3};
    for (int i = 0; i < Params::kProjections; ++i) {
      const Params::Slots& s = p_.fc[i].slots;
      if (!p_.fc[i].present) continue;
      fc[i]->weights = ctx.input(s.weights).data;
      if (s.scales >= 0 && ctx.has_input(s.scales)) fc[i]->scales = ctx.input(s.scales).data;
      if (p_.fc[i].has_zero_points) fc[i]->zero_points = ctx.input(s.zero_points).ptr<const uint8_t>();
      if (s.global_scale >= 0 && ctx.has_input(s.global_scale)) fc[i]->global_scales = ctx.input(s.global_scale).ptr<const float>();
      if (p_.fc[i].has_bias) fc[i]->bias = ctx.input(s.bias).data;
    }
    a.x = ctx.input(Params::kInput).data;
    a.router = ctx.input(Params::kRouter).data;
    if (p_.router_weights >= 0) a.router_weights = ctx.input(p_.router_weights).data;
    a.y = ctx.output(0).data;
    a.workspace = ctx.workspace;
    return cuda::launch_moe(a, ctx.stream);
  }

 private:
  Params p_;
  cuda::MoEArgs args_;
};

}  // namespace

void register_moe_cuda_kernels(OpRegistry& registry) {
  for (const char* op : {"MoE", "QMoE"}) {
    registry.add_kernel(KernelDef{.domain = "com.microsoft", .op_type = op, .device = DeviceType::kCuda,
                                  .dtypes = {DType::kF32, DType::kF16, DType::kBF16}, .type_input = Params::kInput,
                                  .since_version = 1,
                                  .create = [](const Node&) { return std::make_unique<MoEKernel>(); }});
  }
}

}  // namespace onnx_genai
