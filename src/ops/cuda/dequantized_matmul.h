// MatMulNBits (4- or 8-bit) with many activation rows as a dense product: B dequantised into the
// workspace, rounding each weight once to A's dtype (dequantize_kernels.h), then a cuBLASLt
// tensor-core GEMM; a bias is laid into Y first and added by the GEMM (beta = 1). Past
// kMaxGemvRows rows this beats the CUDA-core GEMV (which streams B once per 8 rows): the
// dequantisation costs about one read of B in f16, amortised over every row. (4-bit weights with
// f16 / bf16 activations keep the tensor-core kernel up to kMaxTensorCoreRows.)
// Shared by the kernels built on MatMulNBits (the fused MatMulNBitsSwiGLU; MatMulNBits's own
// dense path in quantized_matmul.cc does the same and can use it).
#pragma once

#include <cstddef>
#include <memory>

#include "ops/cuda/matmul_kernels.h"
#include "ops/cuda/quantized_matmul_kernels.h"

namespace onnx_genai::cuda {

constexpr int64_t kMaxGemvRows = 16;

class DequantizedMatMul {
 public:
  // For args' shape and dtype (pointers not needed yet), codes `bits` (4 or 8) wide; `bias`:
  // whether one will be given.
  static Result<DequantizedMatMul> plan(const MatMulNBits4Args& args, int bits, bool bias);
  // Device scratch run() needs: the dense weights, then the GEMM's own.
  size_t workspace_bytes() const { return weights_bytes_ + gemm_->workspace_bytes(); }
  // args.y [m, n] = args.a x dequantise(args.b)^T (+ args.bias), queued on `stream`.
  Status run(const MatMulNBits4Args& args, void* workspace, void* stream) const;

 private:
  std::unique_ptr<CublasLtGemm> gemm_;
  size_t weights_bytes_ = 0;  // aligned for the GEMM's operand
  int bits_ = 4;
  bool bias_ = false;
};

}  // namespace onnx_genai::cuda
