// The AVX-512 build of the MatMulNBits kernels (compiled with the AVX-512 flags, cmake/simd.cmake).
#include "ops/cpu/avx2/qgemm_impl.h"

namespace onnx_genai::avx512 {

const QGemmKernels& qgemm_kernels() { return qgemm_detail::kQGemmKernels; }

}  // namespace onnx_genai::avx512
