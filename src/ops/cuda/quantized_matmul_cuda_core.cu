// 4-bit MatMulNBits on CUDA cores: any M (the tensor-core kernel in quantized_matmul_kernels.cu
// takes M <= 16 where the layout allows it).
#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/quantized_matmul_device.cuh"

namespace onnx_genai::cuda::nbits4 {

// Memory-access plan:
//   - A block is 4 warps; a warp owns kRowsPerWarp = 2 consecutive rows of B (2 outputs per
//     activation row), so the grid has ceil(N / 8) blocks.
//   - A row of B is blocks * block_size / 2 contiguous bytes. Lane l reads 16-byte chunks l,
//     l + 32, ... (32 codes each), so a warp's load is 512 contiguous bytes: fully coalesced, each
//     byte read once. Two chunks of each of the warp's rows are loaded before any is used, giving
//     four independent 16-byte loads in flight per lane. Rows whose length is not a multiple of
//     16 bytes (block 16 with an odd block count) or a B not 16-byte aligned use 8-byte chunks.
//   - A 32-bit word is 8 codes of one quantisation block (block_size >= 16), so its scale and
//     zero point are loaded once per word (tiny, L1/L2 resident). A code becomes a float by
//     OR-ing it into the mantissa of 2^23 and subtracting 2^23 (exact; no int-to-float unit).
//   - Activations are read through L1/L2 by every warp, 16 bytes at a time when K % 8 == 0 and
//     A is 16-byte aligned, else element by element with a bound check. Codes past K (padding of
//     the last block) meet zero activations.
//   - A tile of MR (1, 2, 4 or 8) activation rows is held in registers, so each decoded weight
//     feeds MR FMAs and B is streamed once per tile, ceil(M / 8) times in all (blockIdx.y is the
//     tile).
//   - Accumulation is f32 (per word, then scaled into the running sum); each output is reduced
//     across the warp with shuffles and written once, in A's dtype, with the bias added. With the
//     SwiGLU epilogue a warp's two rows are a gate / up pair, so no exchange is needed.
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 2;
constexpr int kSteps = 2;  // chunks of each row loaded ahead per lane (4 measured slower on an H200)
constexpr int kMaxTileRows = 8;

template <int WORDS>
struct alignas(4 * WORDS) Chunk {
  uint32_t w[WORDS];
};

// Code j (0..7) of a little-endian word of packed nibbles, as a float.
__device__ __forceinline__ float code_value(uint32_t word, int j) {
  return __uint_as_float(0x4B000000u | ((word >> (4 * j)) & 0xFu)) - 8388608.0f;
}

template <typename T>
__device__ __forceinline__ float zero_point(const MatMulNBits4Args& p, int64_t n, int64_t block) {
  if (p.zp_packed != nullptr) {
    return static_cast<float>((p.zp_packed[n * ((p.blocks + 1) / 2) + block / 2] >> (4 * (block & 1))) & 0xF);
  }
  if (p.zp_float != nullptr) return to_float(static_cast<const T*>(p.zp_float)[n * p.blocks + block]);
  return 8.0f;
}

// a[r][j] = A[m0 + r][k + j] as floats; zero past K and for rows past the tile's `rows`.
template <typename T, int MR, bool ALIGNED>
__device__ __forceinline__ void load_activations(const MatMulNBits4Args& p, int64_t m0, int rows, int64_t k,
                                                 float (&a)[MR][8]) {
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    if (r >= rows) {
#pragma unroll
      for (int j = 0; j < 8; ++j) a[r][j] = 0.0f;
      continue;
    }
    const T* row = static_cast<const T*>(p.a) + (m0 + r) * p.k + k;
    if constexpr (ALIGNED) {
      constexpr int kVec = 16 / sizeof(T);
#pragma unroll
      for (int h = 0; h < 8 / kVec; ++h) {
        float part[kVec];
        load_floats<T, kVec>(row + h * kVec, part);
#pragma unroll
        for (int i = 0; i < kVec; ++i) a[r][h * kVec + i] = part[i];
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) a[r][j] = k + j < p.k ? to_float(row[j]) : 0.0f;
    }
  }
}

// acc[i][r] += A tile row r . dequantised chunk c of B row n0 + i (w[i]). FULL: the chunk lies
// wholly below K, so no word needs a bound check and all its loads can be issued up front.
template <typename T, int MR, int WORDS, bool ALIGNED, bool FULL>
__device__ __forceinline__ void accumulate_chunk(const MatMulNBits4Args& p, int block_shift, int64_t m0, int rows,
                                                 int64_t n0, int64_t c, const Chunk<WORDS> (&w)[kRowsPerWarp],
                                                 float (&acc)[kRowsPerWarp][MR]) {
#pragma unroll
  for (int word = 0; word < WORDS; ++word) {
    const int64_t k = (c * WORDS + word) * 8;
    if (!FULL && k >= p.k) break;
    float a[MR][8];
    load_activations<T, MR, ALIGNED>(p, m0, rows, k, a);
    const int64_t block = k >> block_shift;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      // A row past N (the grid's last warp) reads row N - 1's parameters: no branch between the
      // loads, and its sums are never written.
      const int64_t n = n0 + i < p.n ? n0 + i : p.n - 1;
      const float zp = zero_point<T>(p, n, block);
      const float scale = to_float(static_cast<const T*>(p.scales)[n * p.blocks + block]);
      float dot[MR] = {};
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float q = code_value(w[i].w[word], j) - zp;
#pragma unroll
        for (int r = 0; r < MR; ++r) dot[r] = fmaf(a[r][j], q, dot[r]);
      }
#pragma unroll
      for (int r = 0; r < MR; ++r) acc[i][r] = fmaf(scale, dot[r], acc[i][r]);
    }
  }
}

template <typename T, int MR, int WORDS, bool ALIGNED>
__global__ void __launch_bounds__(kWarps * 32) matmul_nbits4_kernel(MatMulNBits4Args p, int block_shift) {
  const int lane = threadIdx.x & 31;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kRowsPerWarp;
  if (n0 >= p.n) return;  // the whole warp leaves together
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * MR;
  const int rows = static_cast<int>(p.m - m0 < MR ? p.m - m0 : MR);
  const int64_t row_bytes = p.blocks * p.block_size / 2;
  const int64_t chunks = row_bytes / static_cast<int64_t>(sizeof(Chunk<WORDS>));
  const Chunk<WORDS>* b = reinterpret_cast<const Chunk<WORDS>*>(p.b);

  float acc[kRowsPerWarp][MR] = {};
  for (int64_t c0 = lane; c0 < chunks; c0 += 32 * kSteps) {
    Chunk<WORDS> w[kSteps][kRowsPerWarp];
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int64_t c = c0 + 32 * s;
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        w[s][i] = c < chunks && n0 + i < p.n ? b[(n0 + i) * chunks + c] : Chunk<WORDS>{};
      }
    }
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int64_t c = c0 + 32 * s;
      if ((c + 1) * WORDS * 8 <= p.k) {
        accumulate_chunk<T, MR, WORDS, ALIGNED, true>(p, block_shift, m0, rows, n0, c, w[s], acc);
      } else if (c < chunks) {
        accumulate_chunk<T, MR, WORDS, ALIGNED, false>(p, block_shift, m0, rows, n0, c, w[s], acc);
      }
    }
  }

  // A warp's two rows are a SwiGLU's column pair (n0 is even): lane 0 ends with both sums.
  static_assert(kRowsPerWarp == 2, "the SwiGLU epilogue pairs a warp's two rows");
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    const float first = warp_sum(acc[0][r]), second = warp_sum(acc[1][r]);
    if (lane != 0 || r >= rows) continue;
    if (p.epilogue == MatMulNBits4Epilogue::kSwiGLU) {
      store_swiglu<T>(p, n0, m0 + r, first, second);
    } else {
      store_output<T>(p, n0, m0 + r, first);
      store_output<T>(p, n0 + 1, m0 + r, second);
    }
  }
}

// fn(Int<MR>{}) with the smallest tile of 1, 2, 4 or 8 rows that covers min(m, 8).
template <typename F>
void dispatch_tile_rows(int64_t m, F&& fn) {
  if (m <= 1) fn(Int<1>{});
  else if (m == 2) fn(Int<2>{});
  else if (m <= 4) fn(Int<4>{});
  else fn(Int<kMaxTileRows>{});
}

}  // namespace

Status launch_cuda_core(const MatMulNBits4Args& p, cudaStream_t s) {
  int block_shift = 0;
  while ((int64_t{1} << block_shift) < p.block_size) ++block_shift;
  const int64_t row_bytes = p.blocks * p.block_size / 2;
  const int64_t tiles = ceil_div(p.m, kMaxTileRows);
  const int64_t grid_x = ceil_div(p.n, kWarps * kRowsPerWarp);
  if (tiles > 65535 || grid_x > 0x7fffffff) return OG_ERROR("MatMulNBits (CUDA): M=", p.m, " N=", p.n, " exceed the grid");
  if (!aligned(p.b, 8)) return OG_ERROR("MatMulNBits (CUDA): B must be 8-byte aligned in device memory");
  const bool wide = row_bytes % 16 == 0 && aligned(p.b, 16);
  const bool aligned_a = p.k % 8 == 0 && aligned(p.a, 16);
  dispatch_float_type(p.dtype, [&]<typename T>() {
    dispatch_tile_rows(p.m, [&]<int MR>(Int<MR>) {
      const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(ceil_div(p.m, MR)));
      const auto launch = [&]<int WORDS, bool ALIGNED>() {
        matmul_nbits4_kernel<T, MR, WORDS, ALIGNED><<<grid, kWarps * 32, 0, s>>>(p, block_shift);
      };
      if (wide && aligned_a) launch.template operator()<4, true>();
      else if (wide) launch.template operator()<4, false>();
      else if (aligned_a) launch.template operator()<2, true>();
      else launch.template operator()<2, false>();
    });
  });
  return launch_status("matmul_nbits4_kernel");
}

namespace {

// One thread per output (grid-stride): y[i] of row i / n, column i % n reads columns 2i, 2i + 1.
template <typename T>
__global__ void swiglu_pairs_kernel(const T* columns, T* y, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    y[i] = from_float<T>(silu_product(to_float(columns[2 * i]), to_float(columns[2 * i + 1])));
  }
}

constexpr int kPairThreads = 256;
constexpr int64_t kMaxPairBlocks = 4096;  // enough to fill an H200; the rest strides

}  // namespace

}  // namespace onnx_genai::cuda::nbits4

namespace onnx_genai::cuda {

Status launch_swiglu_pairs(DType dtype, int64_t m, int64_t n, const void* columns, void* y, void* stream) {
  const int64_t count = m * n;
  if (count == 0) return Status::ok();
  const auto blocks = static_cast<unsigned>(std::min(nbits4::ceil_div(count, nbits4::kPairThreads), nbits4::kMaxPairBlocks));
  const bool launched = dispatch_float_type(dtype, [&]<typename T>() {
    nbits4::swiglu_pairs_kernel<T><<<blocks, nbits4::kPairThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(columns), static_cast<T*>(y), count);
  });
  if (!launched) return OG_ERROR("SwiGLU (CUDA): unsupported dtype ", dtype_name(dtype));
  return launch_status("swiglu_pairs_kernel");
}

}  // namespace onnx_genai::cuda
