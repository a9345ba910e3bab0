// Inner loops of MatMulNBits (ops/schema/quantized_matmul.h), one table per instruction set:
// qgemm_impl.h compiled for AVX-512 (avx512/qgemm_avx512.cc), AVX2 (avx2/qgemm_avx2.cc) and
// plain C++ (cpu/quantized_matmul.cc).
#pragma once

#include <cstdint>

namespace onnx_genai {

// One quantised weight matrix as the kernels read it. Scales and float zero points are f32
// here (16-bit inputs are widened into the workspace first).
struct QWeights {
  const uint8_t* codes = nullptr;  // [N, blocks, block_bytes]
  const float* scales = nullptr;   // [N * blocks]
  const uint8_t* zp_packed = nullptr;  // [N, zp_row_bytes] or null
  const float* zp_float = nullptr;     // [N * blocks] or null; both null: 2^(bits-1)
  int64_t k = 0, bits = 4, block_size = 0, blocks = 0, block_bytes = 0, zp_row_bytes = 0;

  float zero_point(int64_t n, int64_t b) const {
    if (zp_float != nullptr) return zp_float[n * blocks + b];
    if (zp_packed == nullptr) return static_cast<float>(1 << (bits - 1));
    const uint8_t* row = zp_packed + n * zp_row_bytes;
    if (bits == 8) return static_cast<float>(row[b]);
    return static_cast<float>((row[b / 2] >> (4 * (b & 1))) & 0x0F);
  }
};

struct QGemmKernels {
  // y[n - n0] = sum_k a[k] * B[n][k] for n in [n0, n1); `block_sums[b]` = sum of a over block b.
  void (*gemv)(const QWeights& w, const float* a, const float* block_sums, int64_t n0, int64_t n1, float* y) = nullptr;
  // dst[(n - n0) * K + k] = B[n][k] for n in [n0, n1): dequantised rows of B (columns of the product).
  void (*dequantize)(const QWeights& w, int64_t n0, int64_t n1, float* dst) = nullptr;
};

namespace scalar { const QGemmKernels& qgemm_kernels(); }
namespace avx2 { const QGemmKernels& qgemm_kernels(); }
namespace avx512 { const QGemmKernels& qgemm_kernels(); }

}  // namespace onnx_genai
