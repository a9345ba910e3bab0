// com.microsoft MatMulNBits on CUDA, 4-bit weights (ops/cuda/quantized_matmul_kernels.cu):
// the same parameters, validation and semantics as the CPU kernel (ops/schema/quantized_matmul.h),
// computed with f32 accumulation whatever accuracy_level says (the CPU's int8 path at
// accuracy_level 4 is an approximation of this). The kernel and its split of the work are planned
// here, from the shapes; run() only launches.
#include "ops/cuda/quantized_matmul_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/quantized_matmul.h"

namespace onnx_genai {

namespace {

class MatMulNBitsCudaKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(MatMulNBitsParams p, MatMulNBitsParams::make(ctx.node, ctx.inputs));
    if (p.bits != 4) return ctx.fail("the CUDA kernel supports 4-bit weights only, got bits=", p.bits);
    args_.dtype = ctx.input(MatMulNBitsParams::kA).dtype;
    args_.m = ctx.input(MatMulNBitsParams::kA).shape.numel() / p.k;
    args_.n = p.n;
    args_.k = p.k;
    args_.block_size = p.block_size;
    args_.blocks = p.blocks;
    args_.packed_zero_points = p.has_zp && p.zp_packed;
    args_.float_zero_points = p.has_zp && !p.zp_packed;
    has_zp_ = p.has_zp;
    zp_packed_ = p.zp_packed;
    has_bias_ = p.has_bias;
    if (Status planned = cuda::plan_matmul_nbits4(args_); !planned.is_ok()) return ctx.fail(planned.message());
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::MatMulNBits4Args a = args_;
    a.a = ctx.input(MatMulNBitsParams::kA).data;
    a.b = ctx.input(MatMulNBitsParams::kB).ptr<const uint8_t>();
    a.scales = ctx.input(MatMulNBitsParams::kScales).data;
    if (has_zp_ && zp_packed_) a.zp_packed = ctx.input(MatMulNBitsParams::kZeroPoints).ptr<const uint8_t>();
    if (has_zp_ && !zp_packed_) a.zp_float = ctx.input(MatMulNBitsParams::kZeroPoints).data;
    if (has_bias_) a.bias = ctx.input(MatMulNBitsParams::kBias).data;
    a.y = ctx.output(0).data;
    return cuda::launch_matmul_nbits4(a, ctx.stream);
  }

 private:
  cuda::MatMulNBits4Args args_;
  bool has_zp_ = false, zp_packed_ = false, has_bias_ = false;
};

}  // namespace

void register_quantized_matmul_cuda_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = "com.microsoft", .op_type = "MatMulNBits", .device = DeviceType::kCuda,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [](const Node&) -> std::unique_ptr<OpKernel> {
                                  return std::make_unique<MatMulNBitsCudaKernel>();
                                }});
}

}  // namespace onnx_genai
