// 4- and 8-bit MatMulNBits on CUDA cores: any M and any layout (the tensor-core GEMVs in
// quantized_matmul_kernels.cu and quantized_matmul8_kernels.cu take M <= 16 where the layout
// allows it).
#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/quantized_matmul_device.cuh"

namespace onnx_genai::cuda::nbits4 {

// Memory-access plan:
//   - A block is 4 warps; a warp owns kRowsPerWarp = 2 consecutive rows of B (2 outputs per
//     activation row), so the grid has ceil(N / 8) blocks.
//   - A row of B is blocks * block_size codes, contiguous. Lane l reads 16-byte chunks l, l + 32,
//     ... (32 4-bit or 16 8-bit codes each), so a warp's load is 512 contiguous bytes: fully
//     coalesced, each byte read once. Two chunks of each of the warp's rows are loaded before any
//     is used: four independent loads in flight per lane. Rows whose length is not a multiple of
//     16 bytes, or a B not 16-byte aligned, use narrower chunks (Codes::kNarrowWords). Chunks
//     wholly past K (the last block's padding) are not read.
//   - A 32-bit word holds codes of one quantisation block (blocks are >= 16 codes), and so does
//     a chunk of at most 16 codes: its scale and zero point are loaded once per word, or once per
//     such chunk (tiny, L1/L2 resident). A code becomes a float by putting it into the mantissa
//     of 2^23 and subtracting 2^23 (exact; no int-to-float unit).
//   - Activations are read through L1/L2 by every warp, a word's worth at a time when K is whole
//     words and A is aligned, else element by element with a bound check. Codes past K (padding
//     of the last block) meet zero activations.
//   - A tile of MR (1, 2, 4 or 8) activation rows is held in registers, so each decoded weight
//     feeds MR FMAs and B is streamed once per tile, ceil(M / 8) times in all (blockIdx.y is the
//     tile).
//   - Accumulation is f32 (per block, then scaled into the running sum); each output is reduced
//     across the warp with shuffles and written once, in A's dtype, with the bias added. With the
//     SwiGLU epilogue a warp's two rows are a gate / up pair, so no exchange is needed.
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 2;
constexpr int kSteps = 2;  // chunks of each row loaded ahead per lane (4 measured slower on an H200)
constexpr int kMaxTileRows = 8;
constexpr int kMinBlockCodes = 16;  // the smallest quantisation block

template <int WORDS>
struct alignas(4 * WORDS) Chunk {
  uint32_t w[WORDS];
};

// What differs between 4- and 8-bit codes: codes per 32-bit word and their values, the packed
// zero points' layout ([n, ceil(blocks / 2)] nibbles or [n, blocks] bytes) and default, and the
// chunk width (in words) where 16-byte chunks do not fit.
template <int BITS>
struct Codes;

template <>
struct Codes<4> {
  static constexpr int kPerWord = 8;
  static constexpr int kNarrowWords = 2;
  static constexpr float kDefaultZero = 8.0f;
  __device__ static float value(uint32_t word, int j) {
    return __uint_as_float(0x4B000000u | ((word >> (4 * j)) & 0xFu)) - 8388608.0f;
  }
  __device__ static float packed_zero(const MatMulNBits4Args& p, int64_t n, int64_t block) {
    return static_cast<float>((p.zp_packed[n * ((p.blocks + 1) / 2) + block / 2] >> (4 * (block & 1))) & 0xF);
  }
};

template <>
struct Codes<8> {
  static constexpr int kPerWord = 4;
  static constexpr int kNarrowWords = 1;
  static constexpr float kDefaultZero = 128.0f;
  __device__ static float value(uint32_t word, int j) {
    return __uint_as_float(__byte_perm(word, 0x4Bu, 0x4550u | static_cast<uint32_t>(j))) - 8388608.0f;
  }
  __device__ static float packed_zero(const MatMulNBits4Args& p, int64_t n, int64_t block) {
    return static_cast<float>(p.zp_packed[n * p.blocks + block]);
  }
};

template <typename C, typename T>
__device__ __forceinline__ float zero_point(const MatMulNBits4Args& p, int64_t n, int64_t block) {
  if (p.zp_packed != nullptr) return C::packed_zero(p, n, block);
  if (p.zp_float != nullptr) return to_float(static_cast<const T*>(p.zp_float)[n * p.blocks + block]);
  return C::kDefaultZero;
}

// a[r][j] = A[m0 + r][k + j] (j < N) as floats; zero past K and for rows past the tile's `rows`.
template <typename T, int MR, int N, bool ALIGNED>
__device__ __forceinline__ void load_activations(const MatMulNBits4Args& p, int64_t m0, int rows, int64_t k,
                                                 float (&a)[MR][N]) {
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    if (r >= rows) {
#pragma unroll
      for (int j = 0; j < N; ++j) a[r][j] = 0.0f;
      continue;
    }
    const T* row = static_cast<const T*>(p.a) + (m0 + r) * p.k + k;
    if constexpr (ALIGNED) {
      constexpr int kVec = N < 16 / static_cast<int>(sizeof(T)) ? N : 16 / static_cast<int>(sizeof(T));
#pragma unroll
      for (int h = 0; h < N / kVec; ++h) {
        float part[kVec];
        load_floats<T, kVec>(row + h * kVec, part);
#pragma unroll
        for (int i = 0; i < kVec; ++i) a[r][h * kVec + i] = part[i];
      }
    } else {
#pragma unroll
      for (int j = 0; j < N; ++j) a[r][j] = k + j < p.k ? to_float(row[j]) : 0.0f;
    }
  }
}

// acc[i][r] += A tile row r . dequantised chunk c of B row n0 + i (w[i]). FULL: the chunk lies
// wholly below K, so no word needs a bound check and all its loads can be issued up front.
template <typename C, typename T, int MR, int WORDS, bool ALIGNED, bool FULL>
__device__ __forceinline__ void accumulate_chunk(const MatMulNBits4Args& p, int block_shift, int64_t m0, int rows,
                                                 int64_t n0, int64_t c, const Chunk<WORDS> (&w)[kRowsPerWarp],
                                                 float (&acc)[kRowsPerWarp][MR]) {
  constexpr int kPerWord = C::kPerWord;
  constexpr bool kOneBlock = WORDS * kPerWord <= kMinBlockCodes;  // parameters once per chunk
  const int64_t k0 = c * WORDS * kPerWord;
  float zp[kRowsPerWarp], scale[kRowsPerWarp], dot[kRowsPerWarp][MR] = {};
  const auto load_parameters = [&](int64_t block) {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      // A row past N (the grid's last warp) reads row N - 1's parameters: no branch between the
      // loads, and its sums are never written.
      const int64_t n = n0 + i < p.n ? n0 + i : p.n - 1;
      zp[i] = zero_point<C, T>(p, n, block);
      scale[i] = to_float(static_cast<const T*>(p.scales)[n * p.blocks + block]);
    }
  };
  const auto scale_into_sums = [&]() {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
#pragma unroll
      for (int r = 0; r < MR; ++r) {
        acc[i][r] = fmaf(scale[i], dot[i][r], acc[i][r]);
        dot[i][r] = 0.0f;
      }
    }
  };
  if constexpr (kOneBlock) load_parameters(k0 >> block_shift);
#pragma unroll
  for (int word = 0; word < WORDS; ++word) {
    const int64_t k = k0 + word * kPerWord;
    if (!FULL && k >= p.k) break;
    if constexpr (!kOneBlock) load_parameters(k >> block_shift);
    float a[MR][kPerWord];
    load_activations<T, MR, kPerWord, ALIGNED>(p, m0, rows, k, a);
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
#pragma unroll
      for (int j = 0; j < kPerWord; ++j) {
        const float q = C::value(w[i].w[word], j) - zp[i];
#pragma unroll
        for (int r = 0; r < MR; ++r) dot[i][r] = fmaf(a[r][j], q, dot[i][r]);
      }
    }
    if constexpr (!kOneBlock) scale_into_sums();
  }
  if constexpr (kOneBlock) scale_into_sums();
}

template <int BITS, typename T, int MR, int WORDS, bool ALIGNED>
__global__ void __launch_bounds__(kWarps * 32) cuda_core_kernel(MatMulNBits4Args p, int block_shift) {
  using C = Codes<BITS>;
  const int lane = threadIdx.x & 31;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kRowsPerWarp;
  if (n0 >= p.n) return;  // the whole warp leaves together
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * MR;
  const int rows = static_cast<int>(p.m - m0 < MR ? p.m - m0 : MR);
  constexpr int64_t kChunkCodes = WORDS * C::kPerWord;
  const int64_t row_chunks = p.blocks * p.block_size / kChunkCodes;
  const int64_t chunks = ceil_div(p.k, kChunkCodes);  // those holding codes below K
  const auto* b = reinterpret_cast<const Chunk<WORDS>*>(p.b);

  float acc[kRowsPerWarp][MR] = {};
  for (int64_t c0 = lane; c0 < chunks; c0 += 32 * kSteps) {
    Chunk<WORDS> w[kSteps][kRowsPerWarp];
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int64_t c = c0 + 32 * s;
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        w[s][i] = c < chunks && n0 + i < p.n ? b[(n0 + i) * row_chunks + c] : Chunk<WORDS>{};
      }
    }
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int64_t c = c0 + 32 * s;
      if ((c + 1) * kChunkCodes <= p.k) {
        accumulate_chunk<C, T, MR, WORDS, ALIGNED, true>(p, block_shift, m0, rows, n0, c, w[s], acc);
      } else if (c < chunks) {
        accumulate_chunk<C, T, MR, WORDS, ALIGNED, false>(p, block_shift, m0, rows, n0, c, w[s], acc);
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

template <int BITS>
Status launch_for_bits(const MatMulNBits4Args& p, cudaStream_t s) {
  using C = Codes<BITS>;
  if (p.m == 0 || p.n == 0) return Status::ok();
  int block_shift = 0;
  while ((int64_t{1} << block_shift) < p.block_size) ++block_shift;
  const int64_t row_bytes = p.blocks * p.block_size * BITS / 8;
  const int64_t grid_x = ceil_div(p.n, kWarps * kRowsPerWarp);
  if (ceil_div(p.m, kMaxTileRows) > 65535 || grid_x > 0x7fffffff) {
    return OG_ERROR("MatMulNBits (CUDA): M=", p.m, " N=", p.n, " exceed the grid");
  }
  constexpr uintptr_t kNarrowBytes = 4 * C::kNarrowWords;
  if (!aligned(p.b, kNarrowBytes)) {
    return OG_ERROR("MatMulNBits (CUDA): ", BITS, "-bit B must be ", kNarrowBytes, "-byte aligned in device memory");
  }
  const bool wide = row_bytes % 16 == 0 && aligned(p.b, 16);
  const bool known = dispatch_float_type(p.dtype, [&]<typename T>() {
    const bool aligned_a = p.k % C::kPerWord == 0 && aligned(p.a, std::min<uintptr_t>(16, C::kPerWord * sizeof(T)));
    dispatch_tile_rows(p.m, [&]<int MR>(Int<MR>) {
      const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(ceil_div(p.m, MR)));
      const auto launch = [&]<int WORDS, bool ALIGNED>() {
        cuda_core_kernel<BITS, T, MR, WORDS, ALIGNED><<<grid, kWarps * 32, 0, s>>>(p, block_shift);
      };
      if (wide && aligned_a) launch.template operator()<4, true>();
      else if (wide) launch.template operator()<4, false>();
      else if (aligned_a) launch.template operator()<C::kNarrowWords, true>();
      else launch.template operator()<C::kNarrowWords, false>();
    });
  });
  if (!known) return OG_ERROR("MatMulNBits (CUDA): unsupported dtype ", dtype_name(p.dtype));
  return launch_status("MatMulNBits cuda_core_kernel");
}

}  // namespace

Status launch_cuda_core(const MatMulNBits4Args& p, int bits, cudaStream_t s) {
  return bits == 8 ? launch_for_bits<8>(p, s) : launch_for_bits<4>(p, s);
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
