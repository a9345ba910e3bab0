// MatMulNBits weights (4- or 8-bit codes) to a dense [N, K] matrix. Each thread expands 8 codes
// (4 or 8 bytes: K is padded to whole blocks of >= 16 codes, so 8 codes never straddle a block)
// into 8 values; the store is one 16-byte access when K keeps rows 16-byte aligned.
// Bandwidth-bound: a weight byte read becomes two to eight bytes written.
#include <algorithm>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dequantize_kernels.h"
#include "ops/cuda/device_types.cuh"

namespace onnx_genai::cuda {

namespace {

constexpr int kCodesPerThread = 8;

// Codes k0 .. k0 + 7 of row n, as floats (k0 a multiple of 8).
template <int BITS>
__device__ __forceinline__ void read_codes(const MatMulNBits4Args& p, int64_t n, int64_t k0,
                                           float (&q)[kCodesPerThread]) {
  const int64_t row_bytes = p.blocks * p.block_size * BITS / 8;
  if constexpr (BITS == 4) {
    const uint32_t codes = *reinterpret_cast<const uint32_t*>(p.b + n * row_bytes + k0 / 2);
#pragma unroll
    for (int i = 0; i < kCodesPerThread; ++i) q[i] = static_cast<float>((codes >> (4 * i)) & 0x0F);
  } else {
    const uint2 codes = *reinterpret_cast<const uint2*>(p.b + n * row_bytes + k0);
#pragma unroll
    for (int i = 0; i < kCodesPerThread; ++i) {
      q[i] = static_cast<float>(((i < 4 ? codes.x : codes.y) >> (8 * (i % 4))) & 0xFF);
    }
  }
}

// The zero point of row n's block: packed BITS wide (low nibble first), a float, or 2^(BITS - 1).
template <typename T, int BITS>
__device__ __forceinline__ float zero_point(const MatMulNBits4Args& p, int64_t n, int64_t block) {
  if (p.zp_packed != nullptr) {
    if constexpr (BITS == 8) return static_cast<float>(p.zp_packed[n * p.blocks + block]);
    const uint8_t pair = p.zp_packed[n * ((p.blocks + 1) / 2) + block / 2];
    return static_cast<float>((block & 1) != 0 ? pair >> 4 : pair & 0x0F);
  }
  if (p.zp_float != nullptr) return to_float(static_cast<const T*>(p.zp_float)[n * p.blocks + block]);
  return static_cast<float>(1 << (BITS - 1));
}

template <typename T, int BITS>
__global__ void dequantize_nbits_kernel(MatMulNBits4Args p, T* w, bool aligned_rows) {
  const int64_t groups_per_row = (p.k + kCodesPerThread - 1) / kCodesPerThread;
  const int64_t total = p.n * groups_per_row;
  for (int64_t g = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; g < total; g += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = g / groups_per_row;
    const int64_t k0 = (g % groups_per_row) * kCodesPerThread;
    const int64_t block = k0 / p.block_size;
    const float scale = to_float(static_cast<const T*>(p.scales)[n * p.blocks + block]);
    const float zero_point_value = zero_point<T, BITS>(p, n, block);
    float values[kCodesPerThread];
    read_codes<BITS>(p, n, k0, values);
#pragma unroll
    for (int i = 0; i < kCodesPerThread; ++i) values[i] = (values[i] - zero_point_value) * scale;
    T* out = w + n * p.k + k0;
    if (aligned_rows) {
      constexpr int kVec = 16 / sizeof(T) < kCodesPerThread ? 16 / sizeof(T) : kCodesPerThread;
#pragma unroll
      for (int i = 0; i < kCodesPerThread; i += kVec) {
        Pack<T, kVec> pack;
#pragma unroll
        for (int j = 0; j < kVec; ++j) pack.v[j] = from_float<T>(values[i + j]);
        *reinterpret_cast<Pack<T, kVec>*>(out + i) = pack;
      }
    } else {
      for (int i = 0; i < kCodesPerThread && k0 + i < p.k; ++i) out[i] = from_float<T>(values[i]);
    }
  }
}

}  // namespace

Status launch_dequantize_nbits(const MatMulNBits4Args& args, int bits, void* w, void* stream) {
  if (args.block_size < 16 || args.block_size % kCodesPerThread != 0) {
    return OG_ERROR("MatMulNBits dequantisation: block_size ", args.block_size, " is not a multiple of 16");
  }
  if (bits != 4 && bits != 8) return OG_ERROR("MatMulNBits dequantisation: bits must be 4 or 8, got ", bits);
  const int64_t total = args.n * ((args.k + kCodesPerThread - 1) / kCodesPerThread);
  if (total == 0) return Status::ok();
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 132 * 16;  // grid-stride past this: every SM busy
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
  const auto s = static_cast<cudaStream_t>(stream);
  const bool known = dispatch_float_type(args.dtype, [&]<typename T>() {
    // Rows of K values start 16-byte aligned when K * sizeof(T) is a multiple of 16 (w itself is).
    const bool aligned_rows = args.k % kCodesPerThread == 0 && (args.k * sizeof(T)) % 16 == 0;
    if (bits == 8) dequantize_nbits_kernel<T, 8><<<blocks, kThreads, 0, s>>>(args, static_cast<T*>(w), aligned_rows);
    else dequantize_nbits_kernel<T, 4><<<blocks, kThreads, 0, s>>>(args, static_cast<T*>(w), aligned_rows);
  });
  if (!known) return OG_ERROR("MatMulNBits dequantisation: unsupported dtype ", dtype_name(args.dtype));
  return launch_status("dequantize_nbits_kernel");
}

}  // namespace onnx_genai::cuda
