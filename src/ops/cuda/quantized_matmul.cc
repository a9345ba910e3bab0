// com.microsoft MatMulNBits and onnx_genai MatMulNBitsSwiGLU (ops/schema/fused_matmul.h) on CUDA,
// 4- and 8-bit weights: the same parameters, validation and semantics as the CPU kernels (the
// schema headers), computed with f32 accumulation whatever accuracy_level says (the CPU's int8
// path at accuracy_level 4 is an approximation of this). The kernel and its split of the work are
// planned here, from the shapes; run() only launches.
//
// Up to kMaxGemvRows rows (decode, a speculative verify) the GEMV kernels (4-bit:
// quantized_matmul_kernels.h, 8-bit: quantized_matmul8_kernels.h) read each weight once for all
// rows; MatMulNBitsSwiGLU's gate / up pairs meet in their epilogue, so a decoder MLP's
// gate, up and activation are one launch. Past that (a prompt) the product is dense
// (dequantized_matmul.h: weights dequantised into the workspace, cuBLASLt's tensor cores), and
// MatMulNBitsSwiGLU's epilogue runs on its own over the product's interleaved columns.
#include <optional>

#include "ops/cuda/dequantized_matmul.h"
#include "ops/cuda/quantized_matmul8_kernels.h"
#include "ops/cuda/quantized_matmul_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/fused_matmul.h"
#include "ops/schema/quantized_matmul.h"

namespace onnx_genai {

namespace {

using P = MatMulNBitsParams;
using cuda::MatMulNBits4Epilogue;

template <MatMulNBits4Epilogue kEpilogue>
class MatMulNBitsCudaKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const MatMulNBitsParams p, params(ctx));
    args_.dtype = ctx.input(P::kA).dtype;
    args_.m = ctx.input(P::kA).shape.numel() / p.k;
    args_.n = p.n;  // MatMulNBitsSwiGLU: the interleaved columns, twice the output width
    args_.k = p.k;
    args_.block_size = p.block_size;
    args_.blocks = p.blocks;
    args_.packed_zero_points = p.has_zp && p.zp_packed;
    args_.float_zero_points = p.has_zp && !p.zp_packed;
    has_bias_ = p.has_bias;
    bits_ = static_cast<int>(p.bits);
    const auto constant = [&](int input) { return ctx.value(input) != nullptr; };
    args_.constant_weights = constant(P::kB) && constant(P::kScales) && (!p.has_zp || constant(P::kZeroPoints)) &&
                             (!p.has_bias || constant(P::kBias));
    if (args_.m > cuda::kMaxGemvRows) return plan_dense(ctx);
    args_.epilogue = kEpilogue;
    Status planned = bits_ == 8 ? cuda::plan_matmul_nbits8(args_) : cuda::plan_matmul_nbits4(args_);
    if (!planned.is_ok()) return ctx.fail(planned.message());
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::MatMulNBits4Args a = args_;
    a.a = ctx.input(P::kA).data;
    a.b = ctx.input(P::kB).ptr<const uint8_t>();
    a.scales = ctx.input(P::kScales).data;
    if (a.packed_zero_points) a.zp_packed = ctx.input(P::kZeroPoints).ptr<const uint8_t>();
    if (a.float_zero_points) a.zp_float = ctx.input(P::kZeroPoints).data;
    if (has_bias_) a.bias = ctx.input(P::kBias).data;
    a.y = ctx.output(0).data;
    if (!dense_) {
      return bits_ == 8 ? cuda::launch_matmul_nbits8(a, ctx.stream) : cuda::launch_matmul_nbits4(a, ctx.stream);
    }
    if constexpr (kEpilogue == MatMulNBits4Epilogue::kNone) {
      return dense_->run(a, ctx.workspace, ctx.stream);
    } else {
      cuda::MatMulNBits4Args product = a;
      product.y = static_cast<char*>(ctx.workspace) + columns_at_;
      OG_RETURN_IF_ERROR(dense_->run(product, ctx.workspace, ctx.stream));
      return cuda::launch_swiglu_pairs(a.dtype, a.m, a.n / 2, product.y, a.y, ctx.stream);
    }
  }

 private:
  static Result<MatMulNBitsParams> params(const PrepareContext& ctx) {
    if constexpr (kEpilogue == MatMulNBits4Epilogue::kNone) {
      return MatMulNBitsParams::make(ctx.node, ctx.inputs);
    } else {
      OG_ASSIGN_OR_RETURN(MatMulNBitsSwiGLUParams fused, MatMulNBitsSwiGLUParams::make(ctx.node, ctx.inputs));
      return fused.matmul;
    }
  }

  // The dense product's workspace; with an epilogue, the product's columns [m, n] after it.
  Status plan_dense(PrepareContext& ctx) {
    Result<cuda::DequantizedMatMul> planned = cuda::DequantizedMatMul::plan(args_, bits_, has_bias_);
    if (!planned.is_ok()) return ctx.fail(planned.status().message());
    dense_.emplace(std::move(planned).value());
    ctx.workspace_bytes = dense_->workspace_bytes();
    if constexpr (kEpilogue != MatMulNBits4Epilogue::kNone) {
      columns_at_ = (ctx.workspace_bytes + kColumnsAlignment - 1) / kColumnsAlignment * kColumnsAlignment;
      ctx.workspace_bytes = columns_at_ + static_cast<size_t>(dtype_storage_bytes(args_.dtype, args_.m * args_.n));
    }
    return Status::ok();
  }

  static constexpr size_t kColumnsAlignment = 256;
  cuda::MatMulNBits4Args args_;
  std::optional<cuda::DequantizedMatMul> dense_;  // past kMaxGemvRows rows
  size_t columns_at_ = 0;
  bool has_bias_ = false;
  int bits_ = 4;  // of the codes: 4 or 8 (the schema checked)
};

template <MatMulNBits4Epilogue kEpilogue>
KernelDef kernel_def(const char* domain, const char* op_type) {
  return KernelDef{.domain = domain, .op_type = op_type, .device = DeviceType::kCuda,
                   .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                   .create = [](const Node&) -> std::unique_ptr<OpKernel> {
                     return std::make_unique<MatMulNBitsCudaKernel<kEpilogue>>();
                   }};
}

}  // namespace

void register_quantized_matmul_cuda_kernels(OpRegistry& registry) {
  registry.add_kernel(kernel_def<MatMulNBits4Epilogue::kNone>("com.microsoft", "MatMulNBits"));
  registry.add_kernel(kernel_def<MatMulNBits4Epilogue::kSwiGLU>(MatMulNBitsSwiGLUParams::kDomain,
                                                                MatMulNBitsSwiGLUParams::kOpType));
}

}  // namespace onnx_genai
