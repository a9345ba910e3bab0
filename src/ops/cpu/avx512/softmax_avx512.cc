// The AVX-512 build of the softmax row kernels (compiled with the AVX-512 flags, cmake/simd.cmake).
#include "ops/cpu/avx2/softmax_rows_impl.h"

namespace onnx_genai::avx512 {

const SoftmaxRowKernels& softmax_row_kernels() { return simd::kSoftmaxRowKernels; }

}  // namespace onnx_genai::avx512
