#include "ops/cuda/dequantized_matmul.h"

#include "ops/cuda/dequantize_kernels.h"

namespace onnx_genai::cuda {

namespace {

constexpr size_t kOperandAlignment = 256;  // cuBLASLt's preferred operand alignment

}  // namespace

Result<DequantizedMatMul> DequantizedMatMul::plan(const MatMulNBits4Args& args, int bits, bool bias) {
  if (bits != 4 && bits != 8) return OG_ERROR("MatMulNBits (CUDA): bits must be 4 or 8, got ", bits);
  const GemmProblem problem{.dtype = args.dtype, .m = args.m, .n = args.n, .k = args.k, .trans_b = true,
                            .beta = bias ? 1.0f : 0.0f};
  DequantizedMatMul planned;
  OG_ASSIGN_OR_RETURN(planned.gemm_, CublasLtGemm::plan(problem));
  const auto weights = static_cast<size_t>(dtype_storage_bytes(args.dtype, args.n * args.k));
  planned.weights_bytes_ = (weights + kOperandAlignment - 1) / kOperandAlignment * kOperandAlignment;
  planned.bits_ = bits;
  planned.bias_ = bias;
  return planned;
}

Status DequantizedMatMul::run(const MatMulNBits4Args& args, void* workspace, void* stream) const {
  OG_RETURN_IF_ERROR(launch_dequantize_nbits(args, bits_, workspace, stream));
  if (bias_) OG_RETURN_IF_ERROR(launch_broadcast_addend(args.dtype, args.m, args.n, args.bias, 0, 1, 1.0f, args.y, stream));
  return gemm_->run(args.a, workspace, args.y, static_cast<char*>(workspace) + weights_bytes_, stream);
}

}  // namespace onnx_genai::cuda
