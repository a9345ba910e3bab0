// 8-bit MatMulNBits GEMV on tensor cores: y [M, N] = A [M, K] x dequantise(B [N, K])^T for
// M <= 16 (decode, a speculative verify), f16 or bf16 activations, K a multiple of 64. Elsewhere
// (f32 activations, other K, unaligned pointers, one row of a wide projection) the CUDA-core
// kernel of quantized_matmul_cuda_core.cu runs.
//
// Decode is memory-bound: every weight byte is used once per call, so the kernel streams B once
// for all M rows at DRAM bandwidth, with about one instruction per code (f16) to turn codes into
// mma operands: at the H200's bandwidth each SM must consume ~16 bytes of codes a clock.
//
// mma.m16n8k16 (f16 or bf16 operands, f32 accumulators) computes D [16 rows of B, 8 activation
// rows] += W [16 rows of B, 16 k] x X [16 k, 8 activation rows]; a warp owns a tile of 16 rows
// of B and streams a range of K in quads of 64 codes.
//
//   Streaming B. Lane (g, t) (g = lane / 4, t = lane % 4) loads 16 bytes (16 codes) of rows g
//   and g + 8 of its tile per quad: the 4 lanes of group g read 64 contiguous bytes of a row.
//   Loads are 16 bytes wide, unconditional (K is whole quads; rows past N read row N - 1, whose
//   results are dropped), skip L1 (kept for the activations) and go through a ring of STAGES
//   quads in registers: quad q + STAGES - 1 is loaded before quad q is used. The deep ring
//   (6 quads, 2 blocks an SM, against 3 quads and 3 blocks) keeps more bytes in flight where a
//   shape gives an SM few warps.
//
//          row g     | lane 4g | lane 4g+1 | lane 4g+2 | lane 4g+3 |  <- quad q: bytes 64q..64q+63
//          row g + 8 | lane 4g | lane 4g+1 | lane 4g+2 | lane 4g+3 |
//
//   A lane's 16 codes are 4 mma steps of one word (4 codes) each. Which k a lane's code stands
//   for is the lane's own choice (the activations it loads follow the same permutation): codes
//   (c0, c2) of a word are k slots (2t, 2t + 1), (c1, c3) slots (2t + 8, 2t + 9), the pairs a
//   mask of the word gives without moving bytes.
//
//   Exact weights, scales in f32. f16: a code OR-ed into the mantissa of 1024 is 1024 + q, and
//   subtracting 1024 + zp leaves q - zp exactly (|q - zp| <= 255). bf16 has 7 mantissa bits, so
//   a code splits into nibbles q = 16 h + l (and zp = 16 zh + zl): l - zl from 128 + l as for
//   4-bit codes, 16 (h - zh) from one fma, (128 + h) x 16 - (2048 + 16 zh) (exact), and both
//   go through the mma into the accumulators (two mmas a step). Float zero points: W holds q,
//   and zp x sum(a) over the block (an mma with W = ones) is subtracted after scaling. A
//   block's scale multiplies the f32 mma result, so the 16 k of an mma step must lie in one
//   block: blocks of >= 64 codes hold whole quads; for blocks of 32 and 16 codes the 4 lanes of
//   a group first trade words over shuffles (one or two rounds), after which step s of every
//   lane reads block s >> (2 - E) of the quad's 2^E.
//   Activations are read through L1 (where the SM's warps share them): 16 bytes a lane for two
//   steps whose k are adjacent, else 8 for one.
//
//   Dependent launch, split K and the norm prologue as in the 4-bit kernel
//   (quantized_matmul_kernels.cu): the first quads of constant weights are loaded before waiting
//   for the previous kernel; the 8 warps of a block cover 8 / ksb row tiles, ksb warps splitting
//   K, their partial sums meeting in shared memory in a fixed order (no atomics, no workspace,
//   capture-safe); with norm_prologue each block first normalises the activation rows into
//   shared memory (prefetching its first weights into L2 before the wait) and reads them there.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/quantized_matmul8_kernels.h"
#include "ops/cuda/tensor_core_gemv.cuh"

namespace onnx_genai::cuda {

namespace {

using namespace tensor_core_gemv;
using nbits4::aligned;
using nbits4::ceil_div;

constexpr int kLaneBytes = 16;   // of one row, per lane and quad
constexpr int kQuadCodes = 4 * kLaneBytes;
constexpr int kSteps = kLaneBytes / 4;  // mma steps of a quad: a word of each lane's codes
constexpr int kMaxRows = kMaxMTiles * 8;

template <typename T>
constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;

// Where in the quad (bytes, = k) the codes of lane t's word s lie after E rounds of spreading
// (E = log2 of the quad's blocks), as the lane's part plus the step's: rounds trade the lane
// bits of the loaded position for word bits (see spread).
template <int E>
__device__ __forceinline__ int lane_offset(int t) {
  if constexpr (E == 0) return kLaneBytes * t;
  else if constexpr (E == 1) return 16 * (t & 1) + 4 * (t & 2);
  else return 4 * t;
}

template <int E>
__device__ __forceinline__ constexpr int step_offset(int s) {
  if constexpr (E == 0) return 4 * s;
  else if constexpr (E == 1) return 16 * (s & 2) + 4 * (s & 1);
  else return 16 * s;
}

// Gives each of the group's lanes an equal share of each of the quad's 2^E blocks, in the
// order of its steps: one round for blocks of 32 codes (lanes t and t ^ 2 trade two words),
// two for 16 (a 4 x 4 transpose of the group's words).
template <int E>
__device__ __forceinline__ void spread(uint32_t (&x)[4], int t) {
  if constexpr (E >= 1) trade_words<2, 2>(x, (t & 2) != 0);
  if constexpr (E >= 2) trade_words<1, 1>(x, (t & 1) != 0);
}

// What turns a word's codes into q - zp for zero point zp: f16 subtracts `sub` = 1024 + zp;
// bf16 subtracts `sub` = 128 + zl from the low nibbles and adds `add` = -(2048 + 16 zh) to 16 x
// the high ones (each a pair of equal halves).
struct Zero {
  uint32_t sub, add;
};

template <bool BF16>
__device__ __forceinline__ Zero zero_of(uint32_t zp) {
  if constexpr (BF16) return {(0x4300u | (zp & 0xFu)) * 0x10001u, (0xC500u | (zp >> 4)) * 0x10001u};
  else return {(0x6400u | zp) * 0x10001u, 0u};
}

// Word w (codes c0..c3, little-endian, all of one block) as pairs (c0, c2) and (c1, c3) of
// q - zp exactly: f16 in out[0]; bf16 as 16 (h - zh) in out[0] and l - zl in out[1].
template <bool BF16>
__device__ __forceinline__ void dequantise_word(uint32_t w, Zero z, uint32_t (&out)[BF16 ? 2 : 1][2]) {
  if constexpr (BF16) {
    constexpr uint32_t kMagic = 0x43004300u, kSixteen = 0x41804180u;  // (128, 128), (16, 16)
    out[0][0] = fma_pair<true>(((w >> 4) & 0x000F000Fu) | kMagic, kSixteen, z.add);
    out[0][1] = fma_pair<true>(((w >> 12) & 0x000F000Fu) | kMagic, kSixteen, z.add);
    out[1][0] = sub_pair<true>((w & 0x000F000Fu) | kMagic, z.sub);
    out[1][1] = sub_pair<true>(((w >> 8) & 0x000F000Fu) | kMagic, z.sub);
  } else {
    constexpr uint32_t kMagic = 0x64006400u;  // (1024, 1024)
    out[0][0] = sub_pair<false>((w & 0x00FF00FFu) | kMagic, z.sub);
    out[0][1] = sub_pair<false>(((w >> 8) & 0x00FF00FFu) | kMagic, z.sub);
  }
}

// What one lane loads for one quad: codes of its two rows and their blocks' parameters.
template <typename T, int E, bool FLOAT_ZP>
struct Quad {
  uint4 codes[2];  // rows g, g + 8
  Pack<T, (1 << E)> scale[2];
  Pack<T, FLOAT_ZP ? (1 << E) : 1> zero_float[2];
  uint32_t zero_bytes[2];  // byte i: the zero point of the quad's block i (128 where none given)
};

// The lane's view of the problem at quad 0. Offsets into B and its parameters are 32-bit (the
// plan checks the sizes): fewer registers.
template <typename T, int NT>
struct LaneView {
  uint32_t codes[2];   // bytes to the lane's 16 in rows g and g + 8 (rows past N: row N - 1)
  uint32_t params[2];  // elements to the rows' first block: scales, zero points (one byte or value each)
  uint32_t a[NT];      // elements to the lane's activation row at its first k (row 0 where it has none),
                       // rows `lda` apart (A's k, or the norm prologue's stride)
  bool own[NT];        // whether it has an activation row (m < M); else its fragments are zeros
  int t;
  int block_shift;     // log2(block_size)
};

template <typename T, int E, int NT>
__device__ __forceinline__ LaneView<T, NT> lane_view(const MatMulNBits4Args& p, int64_t first_row, int lane,
                                                    int64_t lda) {
  const int g = lane / 4, t = lane % 4;
  const auto row_bytes = static_cast<uint32_t>(p.blocks * p.block_size), blocks = static_cast<uint32_t>(p.blocks);
  LaneView<T, NT> v;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const auto n = static_cast<uint32_t>(first_row + g + 8 * r < p.n ? first_row + g + 8 * r : p.n - 1);
    v.codes[r] = n * row_bytes + kLaneBytes * t;
    v.params[r] = n * blocks;
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int64_t m = nt * 8 + g;
    v.own[nt] = m < p.m;
    v.a[nt] = static_cast<uint32_t>((v.own[nt] ? m : 0) * lda + lane_offset<E>(t));
  }
  v.t = t;
  v.block_shift = __ffs(static_cast<int>(p.block_size)) - 1;  // a power of two
  return v;
}

// Zero points of a quad's 2^E blocks of one row, from packed bytes at `at` (one per block).
template <int E>
__device__ __forceinline__ uint32_t zero_bytes(const uint8_t* packed, uint32_t at) {
  if (packed == nullptr) return 0x80808080u;
  if constexpr (E == 0) return packed[at];
  else if constexpr (E == 1) return *reinterpret_cast<const uint16_t*>(packed + at);
  else return *reinterpret_cast<const uint32_t*>(packed + at);
}

// Issues quad q's loads (none past the warp's range).
template <typename T, int E, bool FLOAT_ZP, int NT>
__device__ __forceinline__ void load_quad(const MatMulNBits4Args& p, const LaneView<T, NT>& v, int q, int q_end,
                                          Quad<T, E, FLOAT_ZP>& d) {
  using Params = Pack<T, (1 << E)>;
  if (q >= q_end) return;
  // The quad's first block: blocks of >= 64 codes span one or more quads.
  const auto quad = static_cast<uint32_t>(q);
  const uint32_t first = E == 0 ? (quad * kQuadCodes) >> v.block_shift : quad << E;
#pragma unroll
  for (int r = 0; r < 2; ++r) d.codes[r] = load_codes(p.b + (v.codes[r] + quad * kQuadCodes));
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    d.scale[r] = *reinterpret_cast<const Params*>(static_cast<const T*>(p.scales) + (v.params[r] + first));
    if constexpr (FLOAT_ZP) {
      d.zero_float[r] = *reinterpret_cast<const Params*>(static_cast<const T*>(p.zp_float) + (v.params[r] + first));
    } else {
      d.zero_bytes[r] = zero_bytes<E>(p.zp_packed, v.params[r] + first);
    }
  }
}

// The mma's B fragments of activation tile nt for steps 2 pair and 2 pair + 1 of quad q: per
// step, (x0, x2) and (x1, x3) of its 4 activations (the order of dequantise_word's pairs), or
// zeros for a lane without an activation row. Activations are A's (through the read-only path),
// or with the norm prologue its `rows` in shared memory (else null). The choice is read from
// the parameters at each load: of the forms ptxas was shown, the one that spilled least in the
// kernels decode runs, which sit at their register limits.
template <typename T, int E, int NT>
__device__ __forceinline__ void activation_pair(const MatMulNBits4Args& p, const T* rows, const LaneView<T, NT>& v,
                                                int nt, int q, int pair, uint32_t (&b)[2][2]) {
  uint32_t x[2][2] = {};  // per step: (x0, x1), (x2, x3)
  if (v.own[nt]) {
    const bool shared = p.norm_prologue;
    const T* at = (shared ? rows : static_cast<const T*>(p.a)) + (v.a[nt] + static_cast<uint32_t>(q) * kQuadCodes);
    if constexpr (E < 2) {  // the pair's k are adjacent (step_offset): one 16-byte load
      const uint4 u = load_activations(reinterpret_cast<const uint4*>(at + step_offset<E>(2 * pair)), shared);
      x[0][0] = u.x, x[0][1] = u.y, x[1][0] = u.z, x[1][1] = u.w;
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint2 u = load_activations(reinterpret_cast<const uint2*>(at + step_offset<E>(2 * pair + h)), shared);
        x[h][0] = u.x, x[h][1] = u.y;
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    b[h][0] = __byte_perm(x[h][0], x[h][1], 0x5410);
    b[h][1] = __byte_perm(x[h][0], x[h][1], 0x7632);
  }
}

// acc [activation tile][fragment] += the quad's contribution. part / sums collect one phase's
// (block's) steps before its scales (and float zero points) are applied. `rows`: the norm
// prologue's activations in shared memory, or null (A's).
template <typename T, int E, bool FLOAT_ZP, int NT>
__device__ __forceinline__ void multiply_quad(const MatMulNBits4Args& p, const T* rows, const LaneView<T, NT>& v, int q,
                                              const Quad<T, E, FLOAT_ZP>& d, float (&acc)[NT][4]) {
  constexpr bool kB = kBf16<T>;
  constexpr int kWeightSets = kB ? 2 : 1;  // mmas a step per activation tile
  constexpr int kStepsPerPhase = kSteps >> E;
  // bf16's two mmas a step feed two accumulators, f16 alternates its steps between two where a
  // phase has several: half the mma dependency chain either way.
  constexpr int kChains = kB || kStepsPerPhase > 1 ? 2 : 1;
  constexpr uint32_t kOnes = kB ? 0x3F803F80u : 0x3C003C00u;  // (1, 1)
  uint32_t x[2][4] = {{d.codes[0].x, d.codes[0].y, d.codes[0].z, d.codes[0].w},
                      {d.codes[1].x, d.codes[1].y, d.codes[1].z, d.codes[1].w}};
  spread<E>(x[0], v.t);
  spread<E>(x[1], v.t);
  float part[kChains][NT][4] = {}, sums[NT][4] = {};
  Zero zero[2] = {};
#pragma unroll
  for (int pair = 0; pair < kSteps / 2; ++pair) {
    uint32_t b[NT][2][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) activation_pair<T, E, NT>(p, rows, v, nt, q, pair, b[nt]);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int step = 2 * pair + half, phase = step / kStepsPerPhase;
      if (step % kStepsPerPhase == 0) {
#pragma unroll
        for (int r = 0; r < 2; ++r) zero[r] = zero_of<kB>(FLOAT_ZP ? 0u : (d.zero_bytes[r] >> (8 * phase)) & 0xFFu);
      }
      uint32_t w[2][kWeightSets][2];
#pragma unroll
      for (int r = 0; r < 2; ++r) dequantise_word<kB>(x[r][step], zero[r], w[r]);
#pragma unroll
      for (int i = 0; i < kWeightSets; ++i) {
        const uint32_t a[4] = {w[0][i][0], w[1][i][0], w[0][i][1], w[1][i][1]};
        const int chain = kB ? i : step % kChains;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma<kB>(part[chain][nt], a, b[nt][half]);
      }
      if constexpr (FLOAT_ZP) {
        const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma<kB>(sums[nt], ones, b[nt][half]);
      }
      if (step % kStepsPerPhase != kStepsPerPhase - 1) continue;
      // Fragment element e is row g + 8 (e / 2) of the tile: its block's scale and zero point.
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float scale = to_float(d.scale[e / 2].v[phase]);
        const float zp_scale = FLOAT_ZP ? scale * to_float(d.zero_float[e / 2].v[FLOAT_ZP ? phase : 0]) : 0.0f;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          float sum = 0.0f;
#pragma unroll
          for (int c = 0; c < kChains; ++c) {
            sum += part[c][nt][e];
            part[c][nt][e] = 0.0f;
          }
          acc[nt][e] = fmaf(scale, sum, acc[nt][e]);
          if constexpr (FLOAT_ZP) acc[nt][e] = fmaf(-zp_scale, sums[nt][e], acc[nt][e]);
          sums[nt][e] = 0.0f;
        }
      }
    }
  }
}

// Quads in the ring and blocks an SM keeps resident: the largest rings that do not spill (ptxas,
// CUDA 13; only bf16 with 16-code blocks, float zero points and two tiles spills, 14 bytes). A
// kernel's weight: one for bf16's nibble split, one per round of spreading.
//   - Standard ring: 3 quads; 3 blocks an SM (80 registers) with one activation tile, integer
//     zero points and a weight <= 1; else 2 (128 registers: float zero points carry their values
//     and the ones-mma sums, two tiles twice the fragments).
//   - Deep ring (one tile, integer zero points): 2 blocks an SM, 6 quads less one per weight
//     past 1 (bf16 with 32-code blocks: 5; with 16: 4).
__host__ __device__ constexpr int dequantise_weight(bool bf16, int e) { return e + (bf16 ? 1 : 0); }

__host__ __device__ constexpr int ring_stages(bool bf16, int e, bool deep) {
  const int weight = dequantise_weight(bf16, e);
  return deep ? 6 - (weight > 1 ? weight - 1 : 0) : 3;
}

__host__ __device__ constexpr int min_blocks_per_sm(bool bf16, int e, bool float_zp, int nt, bool deep) {
  return !deep && !float_zp && nt == 1 && dequantise_weight(bf16, e) <= 1 ? 3 : 2;
}

// The deep ring exists for integer zero points and one tile of activation rows (M <= 8): the
// others would spill with more quads, and fewer variants keep the build short.
template <bool FLOAT_ZP, int NT>
constexpr bool kHasDeepRing = !FLOAT_ZP && NT == 1;

template <typename T, int E, bool FLOAT_ZP, int NT, bool DEEP>
__global__ void __launch_bounds__(kThreads, min_blocks_per_sm(kBf16<T>, E, FLOAT_ZP, NT, DEEP))
    gemv8_kernel(const MatMulNBits4Args p) {
  constexpr int STAGES = ring_stages(kBf16<T>, E, DEEP);
  __shared__ float partial[kWarps][kTileRows][kMaxRows];
  extern __shared__ uint4 norm_rows[];  // the norm prologue's (norm_prologue_bytes; else none)
  const int ksb = p.block_k_splits;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t block_first_row = static_cast<int64_t>(blockIdx.x) * (kWarps / ksb * kTileRows);
  const int64_t first_row = block_first_row + warp / ksb * kTileRows;
  // The norm prologue comes first, before the lane's state is live (registers), its scratch
  // `partial`, whose own use starts after the last quad.
  T* const rows = p.norm_prologue ? reinterpret_cast<T*>(norm_rows) : nullptr;
  if (rows != nullptr) {
    norm_prologue<T>(p, rows, &partial[0][0][0], first_row, static_cast<int>(p.k / kQuadCodes) * (warp % ksb) / ksb,
                     p.blocks * p.block_size);
  }
  const LaneView<T, NT> v =
      lane_view<T, E, NT>(p, first_row, lane, rows != nullptr ? norm_row_stride(p.k, sizeof(T)) : p.k);

  // This warp's share of K: quads [q_begin, q_end) of split warp % ksb (none past N).
  const int quads = static_cast<int>(p.k / kQuadCodes), split = warp % ksb;
  const int q_begin = quads * split / ksb, q_end = first_row < p.n ? quads * (split + 1) / ksb : q_begin;
  float acc[NT][4] = {};
  Quad<T, E, FLOAT_ZP> ring[STAGES];
  stream_quads<STAGES>(
      q_begin, q_end, p.constant_weights, [&](int q, int slot) { load_quad(p, v, q, q_end, ring[slot]); },
      [&](int q, int slot) { multiply_quad(p, rows, v, q, ring[slot], acc); });

  // Fragment element e of tile nt: row g + 8 (e / 2) of the warp's tile, activation row
  // 8 nt + 2t + e % 2.
  const int g = lane / 4, t = lane % 4;
  if (ksb == 1 && p.epilogue == MatMulNBits4Epilogue::kNone) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        nbits4::store_output<T>(p, first_row + g + 8 * (e / 2), 8 * nt + 2 * t + e % 2, acc[nt][e]);
      }
    }
    return;
  }
  // Split sums meet in shared memory, and so do a SwiGLU's column pairs (rows g and g + 1 of a
  // tile are in different lanes).
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][g + 8 * (e / 2)][8 * nt + 2 * t + e % 2] = acc[nt][e];
  }
  __syncthreads();
  store_split_sums<T>(p, partial, ksb, block_first_row);
}

// ---------------------------------------------------------------------------------------------
// Planning and launch.

using Kernel = void (*)(MatMulNBits4Args);

// log2 of the quantisation blocks in a quad: 0 for blocks of >= 64 codes, 1 for 32, 2 for 16.
int block_exponent(int64_t block_size) { return block_size >= kQuadCodes ? 0 : block_size == 32 ? 1 : 2; }

int activation_tiles(const MatMulNBits4Args& p) { return static_cast<int>(ceil_div(p.m, 8)); }

bool deep_ring_exists(const MatMulNBits4Args& p) { return !p.float_zero_points && activation_tiles(p) == 1; }

template <typename T, int E, bool FLOAT_ZP, int NT>
Kernel with_ring(bool deep) {
  if constexpr (kHasDeepRing<FLOAT_ZP, NT>) {
    if (deep) return gemv8_kernel<T, E, FLOAT_ZP, NT, true>;
  }
  return gemv8_kernel<T, E, FLOAT_ZP, NT, false>;
}

template <typename T, int E>
Kernel with_layout(bool float_zp, bool two_tiles, bool deep) {
  if (float_zp) return two_tiles ? with_ring<T, E, true, 2>(deep) : with_ring<T, E, true, 1>(deep);
  return two_tiles ? with_ring<T, E, false, 2>(deep) : with_ring<T, E, false, 1>(deep);
}

// 2 dtypes x 3 block layouts x 2 zero-point kinds x 2 activation tiles: 24 kernels, and 6 more
// with the deep ring.
template <typename T>
Kernel kernel_for(const MatMulNBits4Args& p) {
  const bool two_tiles = activation_tiles(p) == 2;
  switch (block_exponent(p.block_size)) {
    case 0: return with_layout<T, 0>(p.float_zero_points, two_tiles, p.deep_ring);
    case 1: return with_layout<T, 1>(p.float_zero_points, two_tiles, p.deep_ring);
    default: return with_layout<T, 2>(p.float_zero_points, two_tiles, p.deep_ring);
  }
}

Kernel kernel_for(const MatMulNBits4Args& p) {
  if (p.dtype == DType::kF16) return kernel_for<__half>(p);
  if (p.dtype == DType::kBF16) return kernel_for<__nv_bfloat16>(p);
  return nullptr;
}

// Blocks of the kernel `p` plans resident on the whole device at once.
Result<int64_t> resident_blocks(const MatMulNBits4Args& p) {
  const Kernel kernel = kernel_for(p);
  if (kernel == nullptr) return OG_ERROR("MatMulNBits 8-bit (CUDA): unsupported dtype ", dtype_name(p.dtype));
  return tensor_core_gemv::resident_wave(kernel, norm_prologue_bytes(p));
}

// The split of K for p's ring (tensor_core_gemv::plan_splits), or `forced`.
Result<int> splits_for(const MatMulNBits4Args& p, int forced) {
  OG_ASSIGN_OR_RETURN(const int64_t wave, resident_blocks(p));
  const int64_t in_flight = ring_stages(p.dtype == DType::kBF16, block_exponent(p.block_size), p.deep_ring) - 1;
  return tensor_core_gemv::plan_splits(ceil_div(p.n, kTileRows), p.k / kQuadCodes, wave, in_flight, forced,
                                       "MatMulNBits 8-bit (CUDA)");
}

// Whether the deep ring pays: it keeps more quads in flight per warp, with as many warps an SM
// where registers hold the standard ring to 2 blocks too, else with fewer, which pays where the
// standard ring leaves the device less than one wave of blocks (few warps, few bytes in flight).
Result<bool> deep_ring_pays(MatMulNBits4Args p) {
  p.deep_ring = true;
  OG_ASSIGN_OR_RETURN(const int64_t deep_wave, resident_blocks(p));
  p.deep_ring = false;
  OG_ASSIGN_OR_RETURN(const int64_t wave, resident_blocks(p));
  if (deep_wave >= wave) return true;
  OG_ASSIGN_OR_RETURN(const int splits, splits_for(p, 0));
  return ceil_div(ceil_div(p.n, kTileRows) * splits, kWarps) < wave;
}

Status plan_tensor_core(MatMulNBits4Args& p, const MatMulNBits4Choice& choice) {
  bool deep = false;
  if (deep_ring_exists(p) && choice.kernel != MatMulNBits4Kernel::kTensorCore) {
    if (choice.kernel == MatMulNBits4Kernel::kTensorCoreDeep) {
      deep = true;
    } else {
      OG_ASSIGN_OR_RETURN(deep, deep_ring_pays(p));
    }
  }
  p.deep_ring = deep;
  OG_ASSIGN_OR_RETURN(p.block_k_splits, splits_for(p, choice.block_k_splits));
  if (p.norm_prologue) {
    OG_ASSIGN_OR_RETURN(const int64_t wave, resident_blocks(p));
    p.norm_prologue = tensor_core_gemv::norm_prologue_pays(ceil_div(p.n, kTileRows), p.block_k_splits, wave);
  }
  return Status::ok();
}

// The kernel's loads need these alignments (the shapes were checked by the plan; the norm
// prologue's pointers are null or 16-byte aligned, A is null with it).
bool pointers_fit(const MatMulNBits4Args& p) {
  const uintptr_t params = uintptr_t{2} << block_exponent(p.block_size);  // 2^E 16-bit values
  const bool norm = aligned(p.norm_x, 16) && aligned(p.norm_skip, 16) && aligned(p.norm_gamma, 16) &&
                    aligned(p.norm_sum, 16);
  return aligned(p.b, 16) && aligned(p.a, 16) && aligned(p.scales, params) && aligned(p.zp_float, params) &&
         aligned(p.zp_packed, uintptr_t{1} << block_exponent(p.block_size)) && norm;
}

Status check_layout(const MatMulNBits4Args& p) {
  if (p.block_size < 16 || (p.block_size & (p.block_size - 1)) != 0) {
    return OG_ERROR("MatMulNBits 8-bit (CUDA): block_size ", p.block_size, " must be a power of two >= 16");
  }
  if (p.dtype != DType::kF32 && p.dtype != DType::kF16 && p.dtype != DType::kBF16) {
    return OG_ERROR("MatMulNBits 8-bit (CUDA): unsupported dtype ", dtype_name(p.dtype));
  }
  if (p.m > kMaxRows) {
    return OG_ERROR("MatMulNBits 8-bit (CUDA): the GEMV takes at most ", kMaxRows, " rows, got ", p.m);
  }
  if (p.epilogue == MatMulNBits4Epilogue::kSwiGLU && p.n % 2 != 0) {
    return OG_ERROR("MatMulNBits 8-bit (CUDA): the SwiGLU epilogue needs an even number of columns, got ", p.n);
  }
  return Status::ok();
}

// What plans given the default choice take (set_matmul_nbits8_choice: the tests).
MatMulNBits4Choice g_default_choice;

}  // namespace

void set_matmul_nbits8_choice(MatMulNBits4Choice choice) { g_default_choice = choice; }

Status plan_matmul_nbits8(MatMulNBits4Args& args, MatMulNBits4Choice choice) {
  OG_RETURN_IF_ERROR(check_layout(args));
  if (choice == MatMulNBits4Choice{}) choice = g_default_choice;
  // The tensor-core kernel reads whole quads with no bound on K and indexes A, B and B's
  // parameters in 32 bits.
  constexpr int64_t kIndexLimit = int64_t{1} << 32;
  // One row with more outputs than K (the wide MLP up projections): the CUDA-core kernel, each
  // warp streaming two whole rows, beats K split over the tensor-core warps (H200, 3584 x 18944
  // block 32: 25.7 against 30.5 us; at 4096 x 4096 they tie, with tall K the deep ring wins).
  const bool wide_row = choice.kernel == MatMulNBits4Kernel::kAuto && args.m == 1 && args.n > args.k;
  args.tensor_core = choice.kernel != MatMulNBits4Kernel::kCudaCore && !wide_row && args.dtype != DType::kF32 && args.m >= 1 &&
                     args.k % kQuadCodes == 0 && args.m * args.k < kIndexLimit &&
                     args.n * args.blocks * args.block_size < kIndexLimit;
  // The norm prologue's rows (16-bit) must fit their shared-memory budget.
  args.norm_prologue = args.norm_prologue && args.tensor_core && args.m * args.k * 2 <= kNormPrologueBytes;
  args.deep_ring = false;
  args.block_k_splits = 1;
  args.dependent_launch = args.tensor_core && choice.dependent_launch && dependent_launch_allowed();
  return args.tensor_core ? plan_tensor_core(args, choice) : Status::ok();
}

bool matmul_nbits8_runs_tensor_core(const MatMulNBits4Args& p) { return p.tensor_core && pointers_fit(p); }

Status launch_matmul_nbits8(const MatMulNBits4Args& p, void* stream) {
  if (p.m == 0 || p.n == 0) return Status::ok();
  OG_RETURN_IF_ERROR(check_layout(p));
  if ((p.zp_float != nullptr) != p.float_zero_points || (p.zp_packed != nullptr) != p.packed_zero_points) {
    return OG_ERROR("MatMulNBits 8-bit (CUDA): zero points given or missing against the plan");
  }
  // Pointers the tensor-core kernel cannot load from (possible for sub-tensors) take the
  // CUDA-core path, which has no norm prologue (its caller normalises first where
  // matmul_nbits8_runs_tensor_core says no).
  if (!matmul_nbits8_runs_tensor_core(p)) {
    if (p.norm_prologue) return OG_ERROR("MatMulNBits 8-bit (CUDA): the norm prologue needs the tensor-core kernel");
    return nbits4::launch_cuda_core(p, 8, static_cast<cudaStream_t>(stream));
  }
  const unsigned grid = static_cast<unsigned>(ceil_div(ceil_div(p.n, kTileRows) * p.block_k_splits, kWarps));
  return cuda_status(launch_kernel(kernel_for(p), dim3(grid), dim3(kThreads), norm_prologue_bytes(p),
                                   static_cast<cudaStream_t>(stream), p.dependent_launch, p),
                     "MatMulNBits 8-bit gemv8_kernel launch");
}

}  // namespace onnx_genai::cuda
