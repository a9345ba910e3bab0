// Dequantisation of MatMulNBits' 4- or 8-bit weights into a dense matrix (dequantize_kernels.cu),
// for products with many rows: there one dequantisation per run, amortised over every row, lets
// the product run on cuBLASLt's tensor-core GEMMs. No CUDA headers needed.
#pragma once

#include "ops/cuda/quantized_matmul_kernels.h"

namespace onnx_genai::cuda {

// w [n, k] (row-major, args.dtype) = dequantise(args.b) for `bits` (4 or 8) bit codes, with
// args' scales and zero points (packed `bits` wide, or floats); every value is (q - zp) * scale
// computed in f32 and rounded once to args.dtype. Only args' shape, weight and zero-point fields
// are read. Queued on `stream`; no allocation, no synchronisation.
Status launch_dequantize_nbits(const MatMulNBits4Args& args, int bits, void* w, void* stream);

}  // namespace onnx_genai::cuda
