// Launch interface of the CUDA 8-bit MatMulNBits GEMV (quantized_matmul8_kernels.cu: up to
// kMaxGemvRows activation rows; more rows run dequantised, dequantized_matmul.h). Layout and
// semantics in ops/schema/quantized_matmul.h: one code byte per weight, zero points one byte per
// (row, block) or floats, 128 when absent. No CUDA headers needed.
//
// It takes the 4-bit kernels' arguments and choices (quantized_matmul_kernels.h), read for 8-bit
// codes: b is [n, blocks * block_size] bytes, zp_packed [n, blocks] bytes. A choice means the
// same as there: kCudaCore forces the CUDA-core kernel; kTensorCore / kTensorCoreDeep the
// tensor-core one with its standard / deep register ring, where it can run (f16 / bf16
// activations, K a multiple of 64, aligned pointers; else the CUDA-core kernel runs); the
// tensor_core, deep_ring, block_k_splits and dependent_launch fields of the arguments say what
// the plan took; the norm prologue is the 4-bit kernel's too.
#pragma once

#include "ops/cuda/quantized_matmul_kernels.h"

namespace onnx_genai::cuda {

// Validates the shapes (m <= 16) and picks the kernel and its work split for the current device.
// Call once per shape (in prepare), before the pointers are known. A default `choice` takes the
// process-wide one below.
Status plan_matmul_nbits8(MatMulNBits4Args& args, MatMulNBits4Choice choice = {});

// What plans given the default choice take instead (initially the planner's). For the tests,
// which run the op's own planning on every variant; not thread-safe.
void set_matmul_nbits8_choice(MatMulNBits4Choice choice);

// Whether launch_matmul_nbits8 runs the planned tensor-core kernel on args' pointers (else the
// CUDA-core kernel, which has no norm prologue).
bool matmul_nbits8_runs_tensor_core(const MatMulNBits4Args& args);

// Queues the planned kernel on `stream` (a cudaStream_t); no allocation, no synchronisation.
Status launch_matmul_nbits8(const MatMulNBits4Args& args, void* stream);

}  // namespace onnx_genai::cuda
