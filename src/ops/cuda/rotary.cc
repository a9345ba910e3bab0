// CUDA kernels of RotaryEmbedding in both forms (com.microsoft, and ONNX from opset 23): the
// schema's RotaryParams (ops/schema/rotary.h) read the node as for the CPU kernel
// (ops/cpu/rotary.cc), whose semantics these share except for positions outside the cos/sin
// cache (clamped, not an error: see ops/cuda/rotary_kernels.h). Computed by rotary_kernels.cu.
#include "ops/cuda/register.h"
#include "ops/cuda/rotary_kernels.h"
#include "ops/op.h"
#include "ops/schema/rotary.h"

namespace onnx_genai {

namespace {

cuda::RotaryPositions device_positions(RotaryParams::Positions positions) {
  switch (positions) {
    case RotaryParams::Positions::kBase: return cuda::RotaryPositions::kBase;
    case RotaryParams::Positions::kPerToken: return cuda::RotaryPositions::kPerToken;
    case RotaryParams::Positions::kGathered: break;
  }
  return cuda::RotaryPositions::kGathered;
}

class RotaryKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(params_, RotaryParams::make(ctx.node, ctx.inputs));
    const RotaryParams& p = params_;
    // Every position is outside an empty cache: the CPU kernel reports it, so the node runs there.
    if (p.cache_rows == 0 && p.batch * p.seq * p.heads * p.head_size > 0) return ctx.fail("the cos/sin cache is empty");
    args_.dtype = ctx.input(p.x_input).dtype;
    args_.batch = p.batch;
    args_.seq = p.seq;
    args_.heads = p.heads;
    args_.head_size = p.head_size;
    args_.rotary_dim = p.rotary_dim;
    args_.cache_rows = p.cache_rows;
    args_.heads_first = p.heads_first;
    args_.interleaved = p.interleaved;
    args_.positions = device_positions(p.positions);
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const RotaryParams& p = params_;
    cuda::RotaryArgs a = args_;
    a.x = ctx.input(p.x_input).data;
    if (p.positions != RotaryParams::Positions::kGathered) {
      a.position_ids = ctx.input(p.position_input).ptr<const int64_t>();
    }
    a.cos = ctx.input(p.cos_input).data;
    a.sin = ctx.input(p.sin_input).data;
    a.y = ctx.output(0).data;
    return cuda::launch_rotary(a, ctx.stream);
  }

 private:
  RotaryParams params_;
  cuda::RotaryArgs args_;
};

}  // namespace

void register_rotary_cuda_kernels(OpRegistry& registry) {
  for (const auto& [domain, since] : {std::pair<const char*, int>{"", 23}, {"com.microsoft", 1}}) {
    registry.add_kernel(KernelDef{.domain = domain, .op_type = "RotaryEmbedding", .device = DeviceType::kCuda,
                                  .dtypes = {DType::kF32, DType::kF16, DType::kBF16}, .type_input = 0,
                                  .since_version = since,
                                  .create = [](const Node&) { return std::make_unique<RotaryKernel>(); }});
  }
}

}  // namespace onnx_genai
