// The CPU MatMulNBits kernel (quantized_matmul.cc) for ops built on it: the fused
// MatMulNBitsSwiGLU computes its interleaved gate and up columns with it.
#pragma once

#include <memory>

#include "ops/op.h"

namespace onnx_genai {

std::unique_ptr<OpKernel> make_matmul_nbits_cpu_kernel();

}  // namespace onnx_genai
