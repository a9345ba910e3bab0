// The avx512 build of the SIMD elementwise kernels (ops/cpu/avx2/elementwise_simd_impl.h; compiled with the
// avx512 flags from cmake/simd.cmake; callers reach it through vec_math() / arith_f32()).
#include "ops/cpu/avx2/elementwise_simd_impl.h"

namespace onnx_genai::avx512 {

VecMathFn vec_math(VecMathOp op) { return simd::vec_math_table(op); }
BinarySpanFn arith_f32(ArithOp op) { return simd::arith_table(op); }
GeluFn gelu_f32(GeluOp op) { return simd::gelu_table(op); }

}  // namespace onnx_genai::avx512
