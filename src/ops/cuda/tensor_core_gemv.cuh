// Device pieces of the small-M tensor-core GEMVs of MatMulNBits (quantized_matmul_kernels.cu,
// 4-bit; quantized_matmul8_kernels.cu, 8-bit): the mma on packed operands, paired 16-bit
// arithmetic, streaming loads of codes, word trades between the lanes of a group, the split-K
// reduction that ends a kernel, and the RMS-norm prologue of onnx_genai RmsNormMatMulNBits
// (normalised activation rows in shared memory). .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/quantized_matmul_device.cuh"
#include "ops/cuda/tensor_core.cuh"

namespace onnx_genai::cuda::tensor_core_gemv {

// Both GEMVs' blocks: 8 warps, each over tiles of 16 rows of B (the mma's M), up to two tiles of
// 8 activation rows (M <= 16; the 4-bit many-row kernel: up to 8 tiles).
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

// Fetches the line holding `p` into L2 (no register waits for it).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// An activation load: through the read-only path (ld.global.nc) from global memory, or a generic
// load where the norm prologue left the rows in shared memory, which ld.global.nc cannot read (it
// still reads the global zeros of lanes without a row). `generic` is uniform over the grid.
template <typename V>
__device__ __forceinline__ V load_activations(const V* p, bool generic) {
  return generic ? *p : __ldg(p);
}

// The norm prologue's rows in shared memory are padded by 16 bytes: rows of k x 2 bytes, a
// multiple of 128, would otherwise start in the same bank and conflict where lanes of one phase
// read two rows at one k.
__host__ __device__ constexpr int64_t norm_row_stride(int64_t k, int64_t element_bytes) {
  return k + 16 / element_bytes;
}

// Dynamic shared memory the kernel takes for `p`: the norm prologue's rows, or none.
inline size_t norm_prologue_bytes(const MatMulNBits4Args& p) {
  const int64_t element = p.dtype == DType::kF32 ? 4 : 2;
  return p.norm_prologue ? static_cast<size_t>(p.m * norm_row_stride(p.k, element) * element) : 0;
}

// s = norm_x (+ norm_skip) at element `at` of the rows, VEC elements, in f32.
template <typename T, int VEC>
__device__ __forceinline__ void load_norm_sum(const MatMulNBits4Args& p, uint32_t at, float (&s)[VEC]) {
  load_floats<T, VEC>(static_cast<const T*>(p.norm_x) + at, s);
  if (p.norm_skip == nullptr) return;
  float t[VEC];
  load_floats<T, VEC>(static_cast<const T*>(p.norm_skip) + at, t);
#pragma unroll
  for (int i = 0; i < VEC; ++i) s[i] += t[i];
}

// The rows of the norm prologue (MatMulNBits4Args::norm_prologue), by every thread of the block
// (it synchronises it): rows [m, k] of y = s / sqrt(mean(s^2) + epsilon) * gamma, s = x (+ skip),
// in f32 as the RMS norm kernel computes them (normalization_kernels.cu), rounded to T into
// `rows` (stride norm_row_stride). Two passes over x and skip (the second hits L1/L2): sums of
// squares, reduced per warp into `scratch` (m x kWarps floats) and added in a fixed order; then
// the scaled rows, block 0 writing s to norm_sum. Offsets are 32-bit (m x k is a few thousand)
// and the loops stay rolled: the kernels around it are at their register limits.
template <typename T>
__device__ __forceinline__ void normalise_rows(const MatMulNBits4Args& p, T* rows, float* scratch) {
  constexpr int VEC = 16 / sizeof(T);
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const auto k = static_cast<uint32_t>(p.k), m_rows = static_cast<uint32_t>(p.m);
#pragma unroll 1
  for (uint32_t m = 0; m < m_rows; ++m) {
    float sum_sq = 0.0f;
#pragma unroll 1
    for (uint32_t j = threadIdx.x * VEC; j < k; j += kThreads * VEC) {
      float s[VEC];
      load_norm_sum<T, VEC>(p, m * k + j, s);
#pragma unroll
      for (int i = 0; i < VEC; ++i) sum_sq += s[i] * s[i];
    }
    sum_sq = warp_sum(sum_sq);
    if (lane == 0) scratch[m * kWarps + warp] = sum_sq;
  }
  __syncthreads();
  T* sum_out = blockIdx.x == 0 ? static_cast<T*>(p.norm_sum) : nullptr;
  const auto stride = static_cast<uint32_t>(norm_row_stride(k, sizeof(T)));
#pragma unroll 1
  for (uint32_t m = 0; m < m_rows; ++m) {
    float sum_sq = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum_sq += scratch[m * kWarps + w];
    const float inv_std = 1.0f / sqrtf(sum_sq / static_cast<float>(k) + p.norm_epsilon);
#pragma unroll 1
    for (uint32_t j = threadIdx.x * VEC; j < k; j += kThreads * VEC) {
      float s[VEC], gamma[VEC], y[VEC];
      load_norm_sum<T, VEC>(p, m * k + j, s);
      if (sum_out != nullptr) store_floats<T, VEC>(sum_out + m * k + j, s);
      load_floats<T, VEC>(static_cast<const T*>(p.norm_gamma) + j, gamma);
#pragma unroll
      for (int i = 0; i < VEC; ++i) y[i] = s[i] * inv_std * gamma[i];
      store_floats<T, VEC>(rows + m * stride + j, y);
    }
  }
  __syncthreads();
}

// The norm prologue, first thing in a kernel whose every thread calls it. Constant weights start
// moving before the previous kernel is waited for, as in stream_quads, but into L2 (the warp's
// first 4 quads of 64 bytes in each of its 16 rows of B from first_row, rows of row_bytes): held
// in registers, a ring in flight across the prologue would spill. Then the wait, then the rows;
// stream_quads's own wait afterwards returns at once.
template <typename T>
__device__ __forceinline__ void norm_prologue(const MatMulNBits4Args& p, T* rows, float* scratch, int64_t first_row,
                                              int q_begin, int64_t row_bytes) {
  if (p.constant_weights) {
    // 32-bit offsets (the plans bound B's bytes by 2^32), clamped into B.
    const uint32_t lane = threadIdx.x % 32, bytes = static_cast<uint32_t>(row_bytes);
    const auto n = static_cast<uint32_t>(min(first_row + lane / 2, p.n - 1));
    const uint32_t at = min(static_cast<uint32_t>(q_begin) * 64 + (lane % 2) * 128, bytes - 1);
    prefetch_l2(p.b + (n * bytes + at));
  }
  wait_for_prior_grid();
  normalise_rows<T>(p, rows, scratch);
}

// Blocks of `kernel` (kThreads threads, `dynamic_bytes` of dynamic shared memory) resident on
// the device at once.
template <typename Kernel>
Result<int64_t> resident_wave(Kernel kernel, size_t dynamic_bytes = 0) {
  int device = 0, sms = 0, resident = 0;
  OG_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  OG_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                                 "multiprocessor count"));
  OG_RETURN_IF_ERROR(cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                      kSharedCarveoutPercent),
                                 "shared-memory carve-out"));
  OG_RETURN_IF_ERROR(cuda_status(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads, dynamic_bytes), "occupancy"));
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

// Whether the norm prologue pays on a grid of `tiles` row tiles whose K is split `splits` ways,
// `wave` blocks resident at once: every block normalises the rows before it streams, so blocks
// past the first wave pay for it again (H200, Qwen2.5-7B-shape gate/up, 4 waves: decode 378 ->
// 347 tok/s with the prologue there; the 0.5B shape, one wave everywhere, 1214 -> 1233).
inline bool norm_prologue_pays(int64_t tiles, int splits, int64_t wave) {
  return nbits4::ceil_div(tiles * splits, kWarps) <= wave;
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
