// The avx2 build of the SIMD elementwise kernels (ops/cpu/avx2/elementwise_simd_impl.h; compiled with the
// avx2 flags from cmake/simd.cmake; callers reach it through vec_math(), arith_f32() and
// convert_f16_to_f32() / convert_f32_to_f16()).
#include "ops/cpu/avx2/elementwise_simd_impl.h"

namespace onnx_genai::avx2 {

VecMathFn vec_math(VecMathOp op) { return simd::vec_math_table(op); }
BinarySpanFn arith_f32(ArithOp op) { return simd::arith_table(op); }
GeluFn gelu_f32(GeluOp op) { return simd::gelu_table(op); }
HalfConverters half_converters() { return {&simd::half_to_float, &simd::float_to_half}; }

}  // namespace onnx_genai::avx2
