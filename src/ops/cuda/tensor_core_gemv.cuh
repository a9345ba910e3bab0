// Device pieces of the small-M tensor-core GEMVs of MatMulNBits (quantized_matmul_kernels.cu,
// 4-bit; quantized_matmul8_kernels.cu, 8-bit): the mma on packed operands, paired 16-bit
// arithmetic, streaming loads of codes, word trades between the lanes of a group, and the split-K
// reduction that ends a kernel. .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/quantized_matmul_device.cuh"
#include "ops/cuda/tensor_core.cuh"

namespace onnx_genai::cuda::tensor_core_gemv {

// Both GEMVs' blocks: 8 warps, each over tiles of 16 rows of B (the mma's M), up to two tiles of
// 8 activation rows (M <= 16).
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;
constexpr int kMaxMTiles = 2;
// Shared memory is 8 KiB a block: a small carve-out leaves the rest of the SM's 256 KiB to L1
// for the activations (the runtime rounds the percentage up to a supported size).
constexpr int kSharedCarveoutPercent = 25;

// d [16 x 8] += a [16 x 16] x b [16 x 8] in f16 or bf16 (tensor_core.cuh's mma_16816, fragments
// as documented there), the B operand as the pair of registers the GEMVs build it in.
template <bool BF16>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  mma_16816<std::conditional_t<BF16, __nv_bfloat16, __half>>(d, a, b[0], b[1]);
}

// a - b on two packed f16 or bf16 values.
template <bool BF16>
__device__ __forceinline__ uint32_t sub_pair(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (BF16) asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// a * b + c on two packed f16 or bf16 values, rounded once.
template <bool BF16>
__device__ __forceinline__ uint32_t fma_pair(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  if constexpr (BF16) asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  else asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// 16 bytes of codes, streamed past L1 (kept for the activations, which every warp rereads), with
// a 128-byte L2 fetch hint (the lanes of a group read neighbouring bytes of one row).
__device__ __forceinline__ uint4 load_codes(const uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Lanes t and t ^ LANE of a group trade words: afterwards the word-index bit WORD and the lane
// bit LANE of where each register's bytes were loaded have changed places. `upper`: t & LANE.
template <int WORD, int LANE>
__device__ __forceinline__ void trade_words(uint32_t (&x)[4], bool upper) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (j & WORD) continue;
    const uint32_t got = __shfl_xor_sync(0xffffffffu, upper ? x[j] : x[j | WORD], LANE);
    if (upper) x[j] = got;
    else x[j | WORD] = got;
  }
}

// The end of a kernel whose WARPS warps split K KSB ways: warps KSB * i .. KSB * i + KSB - 1
// computed the same TILE_ROWS rows of B (row tile i of the block, from block_first_row), each
// over its share of K, and left their sums in partial[warp][tile row][activation row] (a
// __syncthreads before this). One thread per (activation row, output) sums the splits in a fixed
// order (deterministic, no atomics) and stores the output; with the SwiGLU epilogue an output is
// a pair of neighbouring rows (the block's rows are a power of two and start even: pairs never
// straddle blocks).
template <typename T, int WARPS, int TILE_ROWS, int COLUMNS>
__device__ __forceinline__ void store_split_sums(const MatMulNBits4Args& p,
                                                 const float (&partial)[WARPS][TILE_ROWS][COLUMNS], int ksb,
                                                 int64_t block_first_row) {
  const auto row_sum = [&](int row, int m) {
    const int first_warp = row / TILE_ROWS * ksb;
    float sum = 0.0f;
#pragma unroll
    for (int s = 0; s < WARPS; ++s) {
      if (s < ksb) sum += partial[first_warp + s][row % TILE_ROWS][m];
    }
    return sum;
  };
  const bool swiglu = p.epilogue == MatMulNBits4Epilogue::kSwiGLU;
  const int outputs_log2 = __ffs(WARPS / ksb * TILE_ROWS) - 1 - (swiglu ? 1 : 0);
  for (int i = static_cast<int>(threadIdx.x); i < (static_cast<int>(p.m) << outputs_log2);
       i += static_cast<int>(blockDim.x)) {
    const int m = i >> outputs_log2, output = i & ((1 << outputs_log2) - 1);
    if (swiglu) {
      nbits4::store_swiglu<T>(p, block_first_row + 2 * output, m, row_sum(2 * output, m), row_sum(2 * output + 1, m));
    } else {
      nbits4::store_output<T>(p, block_first_row + output, m, row_sum(output, m));
    }
  }
}

// Blocks of `kernel` (kThreads threads, no dynamic shared memory) resident on the device at once.
template <typename Kernel>
Result<int64_t> resident_wave(Kernel kernel) {
  int device = 0, sms = 0, resident = 0;
  OG_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  OG_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                                 "multiprocessor count"));
  OG_RETURN_IF_ERROR(cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                      kSharedCarveoutPercent),
                                 "shared-memory carve-out"));
  OG_RETURN_IF_ERROR(cuda_status(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads, 0),
                                 "occupancy"));
  return int64_t{std::max(resident, 1)} * sms;
}

// How many warps split K (1, 2, 4, 8) over `quads` of a kernel with `tiles` row tiles, of which
// `wave` blocks are resident at once, each warp keeping `in_flight` quads in flight; or `forced`.
// A warp needs ceil(quads / splits / in_flight) memory round trips (plus about one to start and
// reduce), and blocks past a wave wait for a later one, as long as a whole one when all take the
// same time: the fewest waves x (round trips + 1); on a tie, the most blocks resident at once
// (loads in flight), then the fewest blocks (less to reduce). `op` names the kernel in errors.
inline Result<int> plan_splits(int64_t tiles, int64_t quads, int64_t wave, int64_t in_flight, int forced,
                               const char* op) {
  using nbits4::ceil_div;
  const auto cost = [&](int ksb) {
    const int64_t blocks = ceil_div(tiles * ksb, kWarps);
    return std::tuple(ceil_div(blocks, wave) * (ceil_div(ceil_div(quads, ksb), in_flight) + 1),
                      -std::min(blocks, wave), blocks);
  };
  int best = 1;
  for (int ksb = 2; ksb <= kWarps && ksb < 2 * quads; ksb *= 2) best = cost(ksb) < cost(best) ? ksb : best;
  if (forced != 0) {
    // Any power of two up to kWarps works: warps past the quads get empty ranges.
    if (forced < 0 || forced > kWarps || (forced & (forced - 1)) != 0) {
      return OG_ERROR(op, ": ", forced, " K splits (1, 2, 4 or 8)");
    }
    best = forced;
  }
  if (ceil_div(tiles * best, kWarps) > 0x7fffffff) return OG_ERROR(op, ": ", tiles * kTileRows, " rows exceed the grid");
  return best;
}

// Streams a warp's quads [q_begin, q_end) through a ring of STAGES (quad q + STAGES - 1 loaded
// before quad q is used), as a programmatic dependent: constant weights start loading before the
// previous kernel is waited for; the next kernel may launch once every load is issued.
// load(q, slot) issues quad q's loads into ring slot `slot` (nothing past q_end); use(q, slot)
// multiplies it.
template <int STAGES, typename Load, typename Use>
__device__ __forceinline__ void stream_quads(int q_begin, int q_end, bool constant_weights, Load&& load, Use&& use) {
  if (!constant_weights) wait_for_prior_grid();
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) load(q_begin + i, i);
  if (constant_weights) wait_for_prior_grid();
  for (int q0 = q_begin; q0 < q_end; q0 += STAGES) {
#pragma unroll
    for (int i = 0; i < STAGES; ++i) {
      load(q0 + i + STAGES - 1, (i + STAGES - 1) % STAGES);
      if (q0 + i < q_end) use(q0 + i, i);
    }
  }
  allow_next_grid();
}

}  // namespace onnx_genai::cuda::tensor_core_gemv
