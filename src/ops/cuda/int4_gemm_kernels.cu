// Tiled int4 GEMM: y [M, N] = A [M, K] x dequantise(B [N, K])^T for the serving engine's batched
// steps (M = 16..512), on mma.sync.m16n8k16 (f16 / bf16 operands, f32 accumulators), from a copy
// of B reordered once at prepare time (pack_int4_gemm_weights) so that every lane's 16-byte load
// is exactly the B fragments of its mma instructions for 4 steps of k.
//
// Layout of the copy (the ONNX file is unchanged):
//   codes: chunks of 64 k x 16 columns (512 bytes), [K/64][N16/16][lane 0..31][4 words]. Word j
//     of lane (g = lane/4, t = lane%4) holds the 8 nibbles of k step j (16 k) that mma's B
//     fragments give that lane for the chunk's two 8-column tiles:
//       nibble h (h = 0..3) and h + 4 = the pair (low k, high k) of fragment register h:
//         h = 0: column g,     k 2t, 2t+1        h = 1: column g,     k 2t+8, 2t+9
//         h = 2: column g + 8, k 2t, 2t+1        h = 3: column g + 8, k 2t+8, 2t+9
//     so (q & 0x000f000f) | magic is register 0 as two halves, (q & 0x00f000f0) | magic
//     register 1 (f16: 16x the code), and q >> 8 gives registers 2 and 3 the same way.
//   scales (and zero points, as dtype values): [blocks][N16], so a stage reads one contiguous
//     row of BN values per quantisation block it meets.
//
// Work split. A block owns BM = 16 MT rows of A and BN = 32 NW columns of B (4 warps side by side,
// each NW 8-column tiles, all MT row tiles: B fragments are reused MT times, A fragments NW
// times), over a range of K: gridDim.z blocks split K when the row x column tiles alone would
// not fill the SMs, each writing f32 sums [split][M][N] into the workspace, and a second kernel
// adds them in split order (deterministic, no atomics). Grid x runs over row blocks, so the
// blocks that share a column block's weights run together and the later ones find them in L2.
//
//                 K ->  stage 0   stage 1   ...        (64 k a stage, kStages in flight)
//         +---------+---------+---------+
//   A     | BM rows | 64 k    | 64 k    |  cp.async -> shared (XOR-swizzled 16-byte pieces)
//         +---------+---------+---------+
//   B^T   | warp 0: NW x 8 columns | warp 1 | warp 2 | warp 3 |   (BN columns, 64 k a stage)
//           each lane: 16 bytes / 16-column chunk / stage  ->  4 words = 4 k steps
//
// Per stage and block: BN x 32 bytes of codes + BM x 128 bytes of A + one scale row per
// quantisation block; per output of the column block, K / 2 bytes of codes read once (from DRAM
// by the first row block, L2 for the rest). Each 16-k step a warp dequantises NW / 2 words
// in registers (lop3 into the mantissa of 1024 / 128, one subtract or fma, one multiply by the
// block's scale: each weight is rounded to the dtype once, as the dense path rounds it) and issues
// MT x NW mma.sync. kStages-deep cp.async ring, one barrier a stage. Tiles (kConfigs): 16, 32, 48
// or 64 rows x 256 columns up to 64 rows (the weights streamed once), 64 x 256 past 64 (128 x 128
// when forced). Split sums cost 8 bytes an output a split in DRAM; plan_int4_gemm weighs waves.
//
// Limits (where it stands against its targets: docs/STATUS.md, "Many rows"): mma.sync, not
// Hopper's wgmma, so past ~128 rows cuBLAS on dequantised weights wins; the copy of the weights is
// device memory beside the initializers, made at prepare time and not yet in the session's memory
// plan (a failed allocation leaves the node on the other paths).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/int4_gemm.h"
#include "ops/cuda/tensor_core.cuh"

namespace onnx_genai::cuda {

namespace {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kStageK = 64;       // k per pipeline stage
constexpr int kChunkBytes = 512;  // 64 k x 16 columns of codes
constexpr int kStages = 4;        // stages in flight: 3 loading while one is multiplied
constexpr int kMaxSplits = 8;

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A block's tile: MT row tiles of 16, NW column tiles of 8 per warp.
template <int MT, int NW>
struct Tile {
  static constexpr int kRows = 16 * MT, kColumns = 8 * NW * kWarps, kChunks = kColumns / 16;
  static constexpr int kABytes = kRows * kStageK * 2, kBBytes = kChunks * kChunkBytes;
  static constexpr int kSBytes = 4 * kColumns * 2;  // up to 4 scale rows (blocks of 16)
  static constexpr int kStageBytes = kABytes + kBBytes + 2 * kSBytes;  // scales, zero points
  static constexpr int kSharedBytes = kStages * kStageBytes;
};

// (a & b) | c in one instruction.
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

template <typename T>
using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

template <typename T>
__device__ __forceinline__ Pair<T> as_pair(uint32_t bits) {
  Pair<T> v;
  memcpy(&v, &bits, sizeof(v));
  return v;
}
template <typename T>
__device__ __forceinline__ uint32_t as_bits(Pair<T> v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof(bits));
  return bits;
}

// What dequantise subtracts: the zero points z0, z1 of columns g and g + 8 folded into the magic
// numbers. f16: lo = 1024 + z (subtracted from 1024 + q), hi = -(64 + z) (added to (1024 + 16 q)
// / 16); bf16: lo = 128 + z. All exact. Without zero points (z = 8) these are constants.
template <typename T>
struct Offsets {
  uint32_t lo0, lo1, hi0, hi1;
};

template <typename T>
__device__ __forceinline__ Offsets<T> offsets(T z0, T z1) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half k1024 = __ushort_as_half(0x6400), k64 = __ushort_as_half(0x5400);
    const __half lo0 = __hadd(z0, k1024), lo1 = __hadd(z1, k1024);
    const __half hi0 = __hneg(__hadd(z0, k64)), hi1 = __hneg(__hadd(z1, k64));
    return {as_bits<T>(__halves2half2(lo0, lo0)), as_bits<T>(__halves2half2(lo1, lo1)),
            as_bits<T>(__halves2half2(hi0, hi0)), as_bits<T>(__halves2half2(hi1, hi1))};
  } else {
    const __nv_bfloat16 k128 = __ushort_as_bfloat16(0x4300);
    const __nv_bfloat16 lo0 = __hadd(z0, k128), lo1 = __hadd(z1, k128);
    return {as_bits<T>(__halves2bfloat162(lo0, lo0)), as_bits<T>(__halves2bfloat162(lo1, lo1)), 0, 0};
  }
}

// Zero point 8 (no zero points given): f16 1032 and -72, bf16 136.
template <typename T>
__device__ __forceinline__ Offsets<T> symmetric_offsets() {
  if constexpr (std::is_same_v<T, __half>) return {0x64086408u, 0x64086408u, 0xd480d480u, 0xd480d480u};
  return {0x43084308u, 0x43084308u, 0, 0};
}

// One lane word -> its 4 B fragment registers (q - zero point) x scale, each weight rounded once
// to T. `s0` / `s1`: the scales of columns g and g + 8. f16: 1024 + q from the low nibble of each
// byte and 1024 + 16 q from the high one (one fma by 1/16); bf16: 128 + q for each nibble in turn
// (its 7-bit mantissa has no room for 16 q).
template <typename T>
__device__ __forceinline__ void dequantise(uint32_t q, T s0, T s1, const Offsets<T>& o, uint32_t (&b)[4]) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 sixteenth = __halves2half2(__ushort_as_half(0x2c00), __ushort_as_half(0x2c00));
    const __half2 scale0 = __halves2half2(s0, s0), scale1 = __halves2half2(s1, s1);
    const uint32_t magic = 0x64006400u;
    const uint32_t lo = and_or(q, 0x000f000fu, magic), hi = and_or(q, 0x00f000f0u, magic);
    b[0] = as_bits<T>(__hmul2(__hsub2(as_pair<T>(lo), as_pair<T>(o.lo0)), scale0));
    b[1] = as_bits<T>(__hmul2(__hfma2(as_pair<T>(hi), sixteenth, as_pair<T>(o.hi0)), scale0));
    q >>= 8;
    const uint32_t lo2 = and_or(q, 0x000f000fu, magic), hi2 = and_or(q, 0x00f000f0u, magic);
    b[2] = as_bits<T>(__hmul2(__hsub2(as_pair<T>(lo2), as_pair<T>(o.lo1)), scale1));
    b[3] = as_bits<T>(__hmul2(__hfma2(as_pair<T>(hi2), sixteenth, as_pair<T>(o.hi1)), scale1));
  } else {
    const __nv_bfloat162 scale0 = __halves2bfloat162(s0, s0), scale1 = __halves2bfloat162(s1, s1);
    const uint32_t magic = 0x43004300u;
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const __nv_bfloat162 v = as_pair<T>(and_or(q >> (4 * h), 0x000f000fu, magic));
      b[h] = as_bits<T>(__hmul2(__hsub2(v, as_pair<T>(h < 2 ? o.lo0 : o.lo1)), h < 2 ? scale0 : scale1));
    }
  }
}

// The kernel's parameters; every divisor is a power of two given as a shift (a division by a
// run-time value costs tens of instructions, and the loops below would pay it every stage).
struct Args {
  const void* a;
  const uint8_t* codes;
  const void* scales;
  const void* zero_points;
  const void* bias;
  void* y;
  float* partial;  // [splits][m][n] when gridDim.z > 1
  int m, n, k, n16;
  int block_shift;  // log2(block_size)
  int group_shift;  // log2(scale rows a stage meets): 2, 1 or 0
};

// ldmatrix.x4 without tensor_core.cuh's "memory" clobber (as CUTLASS writes it), so that the
// compiler may move the stage's other shared-memory loads across it; the barrier before the
// stage orders it after the copies that fill it.
__device__ __forceinline__ void load_matrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// Queues stage `kt` (64 k) of the block's tiles into ring slot `slot` (one commit group, empty
// past the block's range, so the waits count alike on every thread). Trip counts are constants.
template <typename T, int MT, int NW, bool ZP>
__device__ __forceinline__ void load_stage(const Args& p, char* slot, int kt, bool valid, int m0, int n0) {
  using Tl = Tile<MT, NW>;
  const int tid = static_cast<int>(threadIdx.x);
  if (valid) {
    // A: BM rows x 8 pieces of 16 bytes; piece c of row r at (c ^ r % 8), so that ldmatrix's 8
    // rows of one piece column fall in 8 different bank groups. Rows past M: zeros.
    T* const a_sh = reinterpret_cast<T*>(slot);
    const T* const a = static_cast<const T*>(p.a) + static_cast<int64_t>(kt) * kStageK;
#pragma unroll
    for (int it = 0; it < Tl::kRows * 8 / kThreads; ++it) {
      const int i = tid + it * kThreads, r = i / 8, c = i % 8;
      const bool in = m0 + r < p.m;
      cp_async16(a_sh + r * kStageK + ((c ^ (r & 7)) * 8), a + (in ? static_cast<int64_t>(m0 + r) * p.k : 0) + c * 8,
                 in ? 16 : 0);
    }
    // Codes: the block's chunks of this stage are contiguous; columns past N16: zeros.
    char* const b_sh = slot + Tl::kABytes;
    const uint8_t* const codes = p.codes + ((static_cast<int64_t>(kt) * (p.n16 >> 4) + (n0 >> 4)) << 9);
    const int chunks_in = (p.n16 - n0) >> 4;
#pragma unroll
    for (int it = 0; it < Tl::kChunks * 32 / kThreads; ++it) {
      const int i = tid + it * kThreads;
      const bool in = i / 32 < chunks_in;
      cp_async16(b_sh + i * 16, codes + (in ? i * 16 : 0), in ? 16 : 0);
    }
    // Scale (and zero-point) rows of the blocks this stage meets: up to 4 of each.
    char* const s_sh = b_sh + Tl::kBBytes;
    constexpr int kPieces = Tl::kColumns / 8;
    const int rows = (1 << p.group_shift) * (ZP ? 2 : 1);
    const int64_t g0 = (static_cast<int64_t>(kt) * kStageK) >> p.block_shift;
#pragma unroll
    for (int it = 0; it < ((ZP ? 8 : 4) * kPieces + kThreads - 1) / kThreads; ++it) {
      const int i = tid + it * kThreads, row = i / kPieces, c = i % kPieces;
      const int which = row >> p.group_shift, g = row & ((1 << p.group_shift) - 1);
      if (row < rows) {
        const bool in = n0 + c * 8 < p.n16;
        const T* const src = static_cast<const T*>(which == 0 ? p.scales : p.zero_points);
        cp_async16(s_sh + which * Tl::kSBytes + (g * Tl::kColumns + c * 8) * 2, src + (g0 + g) * p.n16 + (in ? n0 + c * 8 : 0),
                   in ? 16 : 0);
      }
    }
  }
  cp_async_commit();
}

// One stage's products for a warp: 4 steps of 16 k, each dequantising NW / 2 words and issuing
// MT x NW mma.sync.
template <typename T, int MT, int NW, bool ZP>
__device__ __forceinline__ void multiply_stage(const Args& p, const char* slot, int warp, int lane,
                                               float (&acc)[MT][NW][4]) {
  using Tl = Tile<MT, NW>;
  const T* const a_sh = reinterpret_cast<const T*>(slot);
  const uint4* const b_sh = reinterpret_cast<const uint4*>(slot + Tl::kABytes);
  const T* const s_sh = reinterpret_cast<const T*>(slot + Tl::kABytes + Tl::kBBytes);
  const T* const z_sh = s_sh + Tl::kSBytes / 2;
  const int g = lane / 4;
  uint4 words[NW / 2];
#pragma unroll
  for (int c = 0; c < NW / 2; ++c) words[c] = b_sh[(warp * NW / 2 + c) * 32 + lane];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    // The scale row of step j: 16 j >> log2(block) for blocks under a stage, else the one row.
    const int group = p.group_shift == 0 ? 0 : (j * 16) >> p.block_shift;
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      // Rows mt*16 + lane%16, piece 2j + lane/16 (k 16j.. or 16j+8..), swizzled as stored.
      const int r = mt * 16 + lane % 16, c = 2 * j + lane / 16;
      load_matrix_x4(a[mt], a_sh + r * kStageK + ((c ^ (r & 7)) * 8));
    }
    uint32_t b[NW / 2][4];
#pragma unroll
    for (int c = 0; c < NW / 2; ++c) {
      const int column = warp * NW * 8 + c * 16 + g;
      const T* const s = s_sh + group * Tl::kColumns + column;
      Offsets<T> o = symmetric_offsets<T>();
      if constexpr (ZP) o = offsets<T>(z_sh[group * Tl::kColumns + column], z_sh[group * Tl::kColumns + column + 8]);
      const uint32_t q = j == 0 ? words[c].x : j == 1 ? words[c].y : j == 2 ? words[c].z : words[c].w;
      dequantise<T>(q, s[0], s[8], o, b[c]);
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int c2 = 0; c2 < NW / 2; ++c2) {
        mma_16816<T>(acc[mt][2 * c2], a[mt], b[c2][0], b[c2][1]);
        mma_16816<T>(acc[mt][2 * c2 + 1], a[mt], b[c2][2], b[c2][3]);
      }
    }
  }
}

// Writes the warp's sums, two columns a store: y (+ bias) with one split, else f32 into the
// split's workspace slice.
template <typename T, int MT, int NW>
__device__ __forceinline__ void store_tile(const Args& p, const float (&acc)[MT][NW][4], int m0, int n0, int warp,
                                           int lane) {
  float* const partial = gridDim.z > 1 ? p.partial + static_cast<int64_t>(blockIdx.z) * p.m * p.n : nullptr;
  const bool pairs = p.n % 2 == 0;  // then a pair's first column is even: 8- / 4-byte aligned
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < NW; ++nt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = m0 + mt * 16 + lane / 4 + 8 * half;
        const int column = n0 + warp * NW * 8 + nt * 8 + 2 * (lane % 4);
        if (row >= p.m || column >= p.n) continue;
        const float v0 = acc[mt][nt][2 * half], v1 = acc[mt][nt][2 * half + 1];
        const int64_t at = static_cast<int64_t>(row) * p.n + column;
        const bool both = column + 1 < p.n;
        if (partial != nullptr) {
          if (pairs && both) {
            *reinterpret_cast<float2*>(partial + at) = make_float2(v0, v1);
          } else {
            partial[at] = v0;
            if (both) partial[at + 1] = v1;
          }
          continue;
        }
        const T* const bias = static_cast<const T*>(p.bias);
        const float y0 = v0 + (bias != nullptr ? to_float(bias[column]) : 0.0f);
        const float y1 = both ? v1 + (bias != nullptr ? to_float(bias[column + 1]) : 0.0f) : 0.0f;
        T* const y = static_cast<T*>(p.y) + at;
        if (pairs && both) {
          *reinterpret_cast<uint32_t*>(y) = pack_pair<T>(y0, y1);
        } else {
          y[0] = from_float<T>(y0);
          if (both) y[1] = from_float<T>(y1);
        }
      }
    }
  }
}

template <typename T, int MT, int NW, bool ZP>
__global__ void __launch_bounds__(kThreads, 2) int4_gemm_kernel(const Args p) {
  using Tl = Tile<MT, NW>;
  extern __shared__ uint4 shared[];
  char* const ring = reinterpret_cast<char*>(shared);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int m0 = static_cast<int>(blockIdx.x) * Tl::kRows, n0 = static_cast<int>(blockIdx.y) * Tl::kColumns;
  // This block's share of K, in stages.
  const int stages = p.k / kStageK, splits = static_cast<int>(gridDim.z);
  const int s_begin = stages * static_cast<int>(blockIdx.z) / splits;
  const int s_count = stages * (static_cast<int>(blockIdx.z) + 1) / splits - s_begin;
  float acc[MT][NW][4] = {};
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    load_stage<T, MT, NW, ZP>(p, ring + s * Tl::kStageBytes, s_begin + s, s < s_count, m0, n0);
  }
  for (int s = 0; s < s_count; ++s) {
    // Stage s has landed for every thread, and every warp is done with stage s - 1's slot,
    // which the load below refills.
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int next = s + kStages - 1;
    load_stage<T, MT, NW, ZP>(p, ring + (next % kStages) * Tl::kStageBytes, s_begin + next, next < s_count, m0, n0);
    multiply_stage<T, MT, NW, ZP>(p, ring + (s % kStages) * Tl::kStageBytes, warp, lane, acc);
  }
  cp_async_wait<0>();
  store_tile<T, MT, NW>(p, acc, m0, n0, warp, lane);
}

// Adds the splits' f32 sums in split order and writes y (+ bias).
template <typename T>
__global__ void int4_gemm_sum_kernel(const Args p, int splits) {
  const int64_t total = static_cast<int64_t>(p.m) * p.n;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += p.partial[s * total + i];
    const float bias = p.bias != nullptr ? to_float(static_cast<const T*>(p.bias)[i % p.n]) : 0.0f;
    static_cast<T*>(p.y)[i] = from_float<T>(sum + bias);
  }
}

using Kernel = void (*)(Args);

// The tile configurations (explicit, so the build stays bounded: 5 tiles x 2 dtypes x with and
// without zero points = 20 kernels). Up to 64 rows one row block holds them all (the weights are
// streamed once: memory-bound); past 64, 128-row blocks of 128 columns (fewer weight re-reads
// and dequantisations per flop) or 64 x 256.
struct Config {
  int rows, columns;
  template <typename T, bool ZP>
  Kernel kernel() const;
  size_t shared_bytes() const;
};
constexpr Config kConfigs[kInt4GemmConfigs] = {{16, 256}, {32, 256}, {48, 256}, {64, 256}, {128, 128}};

template <typename T, bool ZP>
Kernel Config::kernel() const {
  switch (rows) {
    case 16: return int4_gemm_kernel<T, 1, 8, ZP>;
    case 32: return int4_gemm_kernel<T, 2, 8, ZP>;
    case 48: return int4_gemm_kernel<T, 3, 8, ZP>;
    case 64: return int4_gemm_kernel<T, 4, 8, ZP>;
    default: return int4_gemm_kernel<T, 8, 4, ZP>;
  }
}

size_t Config::shared_bytes() const {
  switch (rows) {
    case 16: return Tile<1, 8>::kSharedBytes;
    case 32: return Tile<2, 8>::kSharedBytes;
    case 48: return Tile<3, 8>::kSharedBytes;
    case 64: return Tile<4, 8>::kSharedBytes;
    default: return Tile<8, 4>::kSharedBytes;
  }
}

Kernel kernel_of(const Config& c, DType dtype, bool zp) {
  if (dtype == DType::kBF16) return zp ? c.kernel<__nv_bfloat16, true>() : c.kernel<__nv_bfloat16, false>();
  return zp ? c.kernel<__half, true>() : c.kernel<__half, false>();
}

// Host side of the layout: word j of lane (g, t) in chunk (kt, c) of the codes.
uint32_t lane_word(const uint8_t* b, int64_t row_bytes, int64_t n, int64_t kt, int64_t c, int lane, int j) {
  const int g = lane / 4, t = lane % 4;
  const auto code = [&](int64_t column, int64_t kk) -> uint32_t {
    if (column >= n) return 8;  // padding columns: zero weights (never stored)
    const uint8_t byte = b[column * row_bytes + kk / 2];
    return kk % 2 == 0 ? byte & 0xFu : byte >> 4;
  };
  const int64_t k0 = kt * kStageK + j * 16, col = c * 16 + g;
  uint32_t word = 0;
  for (int h = 0; h < 4; ++h) {
    const int64_t column = col + (h >= 2 ? 8 : 0), kk = k0 + 2 * t + (h % 2 == 1 ? 8 : 0);
    word |= code(column, kk) << (4 * h);
    word |= code(column, kk + 1) << (4 * (h + 4));
  }
  return word;
}

}  // namespace

Status int4_gemm_supports(DType dtype, int64_t n, int64_t k, int64_t block_size, int64_t bits, bool float_zero_points) {
  if (bits != 4) return OG_ERROR("int4 GEMM: ", bits, "-bit codes (4 only)");
  if (dtype != DType::kF16 && dtype != DType::kBF16) return OG_ERROR("int4 GEMM: ", dtype_name(dtype), " activations");
  if (float_zero_points) return OG_ERROR("int4 GEMM: float zero points");
  if (k <= 0 || k % kStageK != 0) return OG_ERROR("int4 GEMM: K = ", k, " is not a multiple of ", kStageK);
  if (block_size < 16 || block_size > 256 || (block_size & (block_size - 1)) != 0) {
    return OG_ERROR("int4 GEMM: block size ", block_size);
  }
  if (n <= 0 || n > (int64_t{1} << 30) || k > (int64_t{1} << 30) || ceil_div(n, 16) * 16 * k / 2 >= (int64_t{1} << 40)) {
    return OG_ERROR("int4 GEMM: N = ", n, ", K = ", k, " out of range");
  }
  return Status::ok();
}

Result<Int4GemmWeights> pack_int4_gemm_weights(DType dtype, int64_t n, int64_t k, int64_t block_size,
                                               const uint8_t* b, const void* scales, const uint8_t* zero_points) {
  OG_RETURN_IF_ERROR(int4_gemm_supports(dtype, n, k, block_size, 4, false));
  Int4GemmWeights w;
  w.dtype = dtype, w.n = n, w.k = k, w.block_size = block_size;
  w.blocks = ceil_div(k, block_size), w.n16 = ceil_div(n, 16) * 16;
  const auto code_bytes = static_cast<size_t>(w.n16 * k / 2);
  const auto row_values = static_cast<size_t>(w.blocks * w.n16);
  const size_t scale_at = code_bytes, zp_at = scale_at + row_values * 2;
  std::vector<uint8_t> host(zp_at + (zero_points != nullptr ? row_values * 2 : 0));
  const int64_t row_bytes = w.blocks * block_size / 2, chunks = w.n16 / 16;
  auto* words = reinterpret_cast<uint32_t*>(host.data());
  for (int64_t kt = 0; kt < k / kStageK; ++kt) {
    for (int64_t c = 0; c < chunks; ++c) {
      for (int lane = 0; lane < 32; ++lane) {
        for (int j = 0; j < 4; ++j) *words++ = lane_word(b, row_bytes, n, kt, c, lane, j);
      }
    }
  }
  // Scales and zero points, transposed to [blocks][N16] (padding columns: scale 0).
  auto* s = reinterpret_cast<uint16_t*>(host.data() + scale_at);
  auto* z = reinterpret_cast<uint16_t*>(host.data() + zp_at);
  const auto* src = static_cast<const uint16_t*>(scales);
  const int64_t zp_row = (w.blocks + 1) / 2;
  for (int64_t blk = 0; blk < w.blocks; ++blk) {
    for (int64_t col = 0; col < w.n16; ++col) {
      s[blk * w.n16 + col] = col < n ? src[col * w.blocks + blk] : 0;
      if (zero_points == nullptr) continue;
      const int zp = col < n ? (zero_points[col * zp_row + blk / 2] >> (4 * (blk % 2))) & 0xF : 8;
      z[blk * w.n16 + col] = dtype == DType::kBF16 ? BFloat16(static_cast<float>(zp)).bits
                                                   : Float16(static_cast<float>(zp)).bits;
    }
  }
  int device = 0;
  OG_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  Result<DeviceBuffer> memory = DeviceBuffer::allocate(host.size(), device);
  if (!memory.is_ok()) {
    cudaGetLastError();  // an out-of-memory error is this plan's answer, not a later launch's
    return memory.status();
  }
  w.memory = std::move(memory).value();
  OG_RETURN_IF_ERROR(cuda_status(cudaMemcpy(w.memory.data(), host.data(), host.size(), cudaMemcpyHostToDevice),
                                 "int4 GEMM weights upload"));
  // The copy from pageable memory may still be in flight on return: finish it before any
  // stream (non-blocking ones too) reads the weights.
  OG_RETURN_IF_ERROR(cuda_status(cudaDeviceSynchronize(), "int4 GEMM weights upload"));
  auto* base = static_cast<uint8_t*>(w.memory.data());
  w.codes = base;
  w.scales = base + scale_at;
  w.zero_points = zero_points != nullptr ? base + zp_at : nullptr;
  return Result<Int4GemmWeights>(std::move(w));
}

Result<Int4GemmPlan> plan_int4_gemm(const Int4GemmWeights& w, int64_t m, int forced_config, int forced_splits) {
  if (m <= 0 || m > (int64_t{1} << 24) || m * w.n >= (int64_t{1} << 31)) return OG_ERROR("int4 GEMM: M = ", m);
  if (forced_config < 0 || forced_config > kInt4GemmConfigs || forced_splits < 0 || forced_splits > kMaxSplits) {
    return OG_ERROR("int4 GEMM: configuration ", forced_config, ", splits ", forced_splits);
  }
  Int4GemmPlan plan;
  plan.m = m;
  // Up to 64 rows: the smallest 256-column tile that holds them; past 64, 64-row tiles (as fast
  // as or faster than 128 x 128 in cuda_bench on the H100, 2026-12-06).
  plan.config = m <= 64 ? static_cast<int>(ceil_div(m, 16)) - 1 : 3;
  if (forced_config != 0) plan.config = forced_config - 1;
  const Config& c = kConfigs[plan.config];
  const Kernel kernel = kernel_of(c, w.dtype, w.zero_points != nullptr);
  int device = 0, sms = 0, resident = 0;
  OG_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  OG_RETURN_IF_ERROR(cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                      static_cast<int>(c.shared_bytes())),
                                 "int4 GEMM shared memory"));
  OG_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count"));
  OG_RETURN_IF_ERROR(cuda_status(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads, c.shared_bytes()), "occupancy"));
  if (resident == 0) return OG_ERROR("int4 GEMM: the tile does not fit an SM");
  // Splits of K: the fewest waves of resident blocks per split (each split's blocks take 1 /
  // splits of the time); a split more must gain 5% (its sums cost 8 bytes an output), and each
  // keeps at least kStages stages so the ring fills.
  const int64_t wave = int64_t{resident} * sms;
  const int64_t tiles = ceil_div(m, c.rows) * ceil_div(w.n16, c.columns), stages = w.k / kStageK;
  const auto cost = [&](int64_t s) { return static_cast<double>(ceil_div(tiles * s, wave)) / static_cast<double>(s); };
  int splits = 1;
  for (int s = 2; s <= kMaxSplits && s * kStages <= stages; ++s) splits = cost(s) < 0.95 * cost(splits) ? s : splits;
  if (forced_splits != 0) splits = static_cast<int>(std::min<int64_t>(forced_splits, stages));
  if (ceil_div(m, c.rows) > 0x7fffffff || ceil_div(w.n16, c.columns) > 65535) {
    return OG_ERROR("int4 GEMM: M = ", m, ", N = ", w.n, " exceed the grid");
  }
  plan.splits = splits;
  plan.workspace_bytes = splits > 1 ? static_cast<size_t>(splits) * static_cast<size_t>(m * w.n) * sizeof(float) : 0;
  return plan;
}

Status launch_int4_gemm(const Int4GemmPlan& plan, const Int4GemmWeights& w, const void* a, const void* bias, void* y,
                        void* workspace, void* stream) {
  if (plan.m == 0) return Status::ok();
  if (reinterpret_cast<uintptr_t>(a) % 16 != 0) return OG_ERROR("int4 GEMM: A is not 16-byte aligned");
  if (plan.splits > 1 && workspace == nullptr) return OG_ERROR("int4 GEMM: the plan needs its workspace");
  const Config& c = kConfigs[plan.config];
  int block_shift = 0;
  while ((int64_t{1} << block_shift) < w.block_size) ++block_shift;
  const int group_shift = std::max(0, 6 - block_shift);  // 64 k a stage
  const Args args{a, w.codes, w.scales, w.zero_points, bias, y, static_cast<float*>(workspace),
                  static_cast<int>(plan.m), static_cast<int>(w.n), static_cast<int>(w.k), static_cast<int>(w.n16),
                  block_shift, group_shift};
  const auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(ceil_div(plan.m, c.rows)), static_cast<unsigned>(ceil_div(w.n16, c.columns)),
                  static_cast<unsigned>(plan.splits));
  OG_RETURN_IF_ERROR(cuda_status(launch_kernel(kernel_of(c, w.dtype, w.zero_points != nullptr), grid, dim3(kThreads),
                                               c.shared_bytes(), s, false, args),
                                 "int4 GEMM launch"));
  if (plan.splits == 1) return Status::ok();
  const auto sum = w.dtype == DType::kBF16 ? int4_gemm_sum_kernel<__nv_bfloat16> : int4_gemm_sum_kernel<__half>;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(plan.m * w.n, 256), 4096));
  return cuda_status(launch_kernel(sum, dim3(blocks), dim3(256), 0, s, false, args, plan.splits),
                     "int4 GEMM sum launch");
}

// Where it beat the path planned before it (the 16-row GEMV, the 17-64-row kernel, or the dense
// dequantise + cuBLASLt product) in cuda_bench's "gemm" rows: docs/STATUS.md, "Many rows" (H100,
// f16, 2026-12-06). Small weights stay on the GEMV / dense path (launch- and tail-bound there),
// and past 128 rows only tall-K projections keep it (mma.sync against cuBLAS's wgmma).
bool int4_gemm_pays(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kMillion = 1'000'000;
  const int64_t codes = n * k;
  if (m < 16) return false;
  if (m == 16) return codes >= 16 * kMillion;
  if (m <= 64) return codes >= 4 * kMillion;
  if (m <= 128) return codes >= 12 * kMillion;
  if (m <= 256) return k >= 4 * n && codes >= 32 * kMillion;
  return false;
}

}  // namespace onnx_genai::cuda
