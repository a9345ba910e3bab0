// The AVX2 build of the MatMulNBits kernels (compiled with the AVX2 flags, cmake/simd.cmake).
#include "ops/cpu/avx2/qgemm_impl.h"

namespace onnx_genai::avx2 {

const QGemmKernels& qgemm_kernels() { return simd::kQGemmKernels; }

}  // namespace onnx_genai::avx2
