// 4-bit MatMulNBits weights to a dense [N, K] matrix. Each thread expands 8 codes (4 bytes: K is
// padded to whole blocks of >= 16 codes, so 8 codes never straddle a block) into 8 values;
// the store is one 16-byte access when K keeps rows 16-byte aligned. Bandwidth-bound: a weight
// byte read becomes four (f16/bf16) or eight (f32) bytes written.
#include <algorithm>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dequantize_kernels.h"
#include "ops/cuda/device_types.cuh"

namespace onnx_genai::cuda {

namespace {

constexpr int kCodesPerThread = 8;

template <typename T>
__global__ void dequantize_nbits4_kernel(MatMulNBits4Args p, T* w, bool aligned_rows) {
  const int64_t groups_per_row = (p.k + kCodesPerThread - 1) / kCodesPerThread;
  const int64_t total = p.n * groups_per_row;
  for (int64_t g = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; g < total; g += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = g / groups_per_row;
    const int64_t k0 = (g % groups_per_row) * kCodesPerThread;
    const int64_t block = k0 / p.block_size;
    const int64_t row_bytes = p.blocks * p.block_size / 2;
    const uint32_t codes = *reinterpret_cast<const uint32_t*>(p.b + n * row_bytes + k0 / 2);
    const float scale = to_float(static_cast<const T*>(p.scales)[n * p.blocks + block]);
    float zero_point = 8.0f;
    if (p.zp_packed != nullptr) {
      const uint8_t pair = p.zp_packed[n * ((p.blocks + 1) / 2) + block / 2];
      zero_point = static_cast<float>((block & 1) != 0 ? pair >> 4 : pair & 0x0F);
    } else if (p.zp_float != nullptr) {
      zero_point = to_float(static_cast<const T*>(p.zp_float)[n * p.blocks + block]);
    }
    float values[kCodesPerThread];
#pragma unroll
    for (int i = 0; i < kCodesPerThread; ++i) {
      values[i] = (static_cast<float>((codes >> (4 * i)) & 0x0F) - zero_point) * scale;
    }
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

Status launch_dequantize_nbits4(const MatMulNBits4Args& args, void* w, void* stream) {
  if (args.block_size < 16 || args.block_size % kCodesPerThread != 0) {
    return OG_ERROR("MatMulNBits dequantisation: block_size ", args.block_size, " is not a multiple of 16");
  }
  const int64_t total = args.n * ((args.k + kCodesPerThread - 1) / kCodesPerThread);
  if (total == 0) return Status::ok();
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 132 * 16;  // grid-stride past this: every SM busy
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
  const bool known = dispatch_float_type(args.dtype, [&]<typename T>() {
    // Rows of K values start 16-byte aligned when K * sizeof(T) is a multiple of 16 (w itself is).
    const bool aligned_rows = args.k % kCodesPerThread == 0 && (args.k * sizeof(T)) % 16 == 0;
    dequantize_nbits4_kernel<T><<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args, static_cast<T*>(w),
                                                                                           aligned_rows);
  });
  if (!known) return OG_ERROR("MatMulNBits dequantisation: unsupported dtype ", dtype_name(args.dtype));
  return launch_status("dequantize_nbits4_kernel");
}

}  // namespace onnx_genai::cuda
