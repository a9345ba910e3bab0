// The AVX2 build of the attention row kernels (compiled with the AVX2 flags, cmake/simd.cmake).
#include "ops/cpu/avx2/attention_rows_impl.h"

namespace onnx_genai::avx2 {

const AttentionRowKernels& attention_row_kernels() { return simd::kAttentionRowKernels; }

}  // namespace onnx_genai::avx2
