// The MatMulNBits kernel tests' way to run the op's own planning on every kernel variant.
#pragma once

#include "ops/cuda/quantized_matmul_kernels.h"

namespace onnx_genai::testing {

// Plans made while it lives take `choice` (the op plans with the default choice).
class ScopedPlanChoice {
 public:
  explicit ScopedPlanChoice(cuda::MatMulNBits4Choice choice) { cuda::set_matmul_nbits4_choice(choice); }
  ~ScopedPlanChoice() { cuda::set_matmul_nbits4_choice({}); }
  ScopedPlanChoice(const ScopedPlanChoice&) = delete;
  ScopedPlanChoice& operator=(const ScopedPlanChoice&) = delete;
};

}  // namespace onnx_genai::testing
