// The AVX-512 build of the MatMulNBits kernels (compiled with the AVX-512 flags, cmake/simd.cmake).
// gemm_int8 uses AVX-512 VNNI: callers take it only where cpu_features().avx512_vnni.
#include "ops/cpu/avx2/qgemm_impl.h"

namespace onnx_genai::avx512 {

const QGemmKernels& qgemm_kernels() { return simd::kQGemmKernels; }

}  // namespace onnx_genai::avx512
