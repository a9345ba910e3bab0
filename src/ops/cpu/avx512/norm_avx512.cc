// The AVX-512 build of the normalization row kernels (compiled with the AVX-512 flags, cmake/simd.cmake).
#include "ops/cpu/avx2/norm_rows_impl.h"

namespace onnx_genai::avx512 {

const NormRowKernels& norm_row_kernels() { return simd::kNormRowKernels; }

}  // namespace onnx_genai::avx512
