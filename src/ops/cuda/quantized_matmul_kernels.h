// Launch interface of the CUDA 4-bit MatMulNBits kernel (quantized_matmul_kernels.cu); layout
// and semantics in ops/schema/quantized_matmul.h. No CUDA headers needed.
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// y [m, n] = a [m, k] x dequantise(b)^T (+ bias), all device pointers; a, scales, zp_float,
// bias and y have `dtype`. Zero points: zp_packed (4-bit, [n, ceil(blocks / 2)] bytes), or
// zp_float ([n * blocks]), or neither (8).
struct MatMulNBits4Args {
  DType dtype = DType::kF32;
  int64_t m = 0, n = 0, k = 0;
  int64_t block_size = 0, blocks = 0;
  const void* a = nullptr;
  const uint8_t* b = nullptr;
  const void* scales = nullptr;
  const uint8_t* zp_packed = nullptr;
  const void* zp_float = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;
};

// Queues the kernel on `stream` (a cudaStream_t); no allocation, no synchronisation.
Status launch_matmul_nbits4(const MatMulNBits4Args& args, void* stream);

}  // namespace onnx_genai::cuda
