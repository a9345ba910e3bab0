// 4-bit MatMulNBits on the GPU: y [M, N] = A [M, K] x dequantise(B [N, K])^T.
//
// Decode is memory-bound: at small M every weight byte is used once per call, so the goal is to
// stream B at DRAM bandwidth, reading it once for all M rows, with as few instructions per byte
// as possible (at the H200's bandwidth each SM must consume 16 bytes of codes a clock). Two
// kernels:
//   - tensor_core (M <= 16; K a multiple of 128 and of the block; blocks of >= 32 codes; aligned
//     pointers: every decoder projection): below. M = 1 and M = 16 read the weights the same way.
//   - cuda_core (everything else, and M > 16; quantized_matmul_cuda_core.cu): FMA on CUDA cores,
//     B streamed once per tile of 8 activation rows.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/quantized_matmul_device.cuh"
#include "ops/cuda/quantized_matmul_kernels.h"
#include "ops/cuda/tensor_core_gemv.cuh"

namespace onnx_genai::cuda {

namespace {

using namespace nbits4;
using namespace tensor_core_gemv;

// ---------------------------------------------------------------------------------------------
// tensor_core: M <= 16 on mma.sync.m16n8k16 (f16 or bf16 operands, f32 accumulators).
//
// The mma computes D [16 rows of B, 8 columns] += W [16 rows of B, 16 k] x X [16 k, 8 columns];
// a warp owns a tile of 16 rows of B and streams a range of K ("quads") of it.
//
//   Streaming B. Lane (g, t) (g = lane / 4, t = lane % 4) loads 16 bytes (32 codes) of rows g
//   and g + 8 of its tile per quad: the 4 lanes of group g read 64 contiguous bytes of row g.
//   Loads are 16 bytes wide, unconditional (K is whole quads; rows past N read row N - 1, whose
//   results are dropped) and skip L1 (kept for the activations). Quads go through a ring of
//   STAGES in registers: quad q + STAGES - 1 is loaded before quad q is used. Variants, for
//   the benchmark to weigh (MatMulNBits4Kernel): a deep ring (6 quads, 2 blocks an SM instead
//   of 3 quads, 3 blocks), and 256-byte L2 fetches (the row's next quads reach L2 early).
//
//          row g     | lane 4g | lane 4g+1 | lane 4g+2 | lane 4g+3 |  <- quad q: bytes 64q..64q+63
//          row g + 8 | lane 4g | lane 4g+1 | lane 4g+2 | lane 4g+3 |
//
//   Exact weights, scales in f32. A code becomes magic + code by OR-ing it into the mantissa of
//   1024 (f16) or 128 (bf16); subtracting magic + zero point leaves q - zp exactly (f16 takes the
//   high nibble in place, as 1024 + 16 q, and one fma by 1/16 subtracts 64 + zp). A block's
//   scale multiplies the f32 mma result, so every mma column must sum codes of one block.
//   Which k a lane's code stands for is the lane's own choice (the same permutation is applied
//   to the activations it loads), so the blocks can be met two ways:
//   - Column classes (no shuffles; when classes x M <= 8). A quad spans C = 2^E blocks (E = 0
//     for blocks >= 64 bytes, 1 for 32, 2 for 16), lane t's 16 bytes lie in block t * C / 4,
//     and the mma's 8 columns are (activation row, block class) pairs: a lane loads activations
//     only for the class of its k positions and zeros otherwise, so column (m, c) sums block c
//     of row m. One scale per column, applied once per quad; the classes are added at the end.
//   - Spread (larger M): the 4 lanes of a group trade words over warp shuffles so that each
//     holds an equal share of every block; step s of the quad's 8 then reads block s >> (3 - E)
//     for all lanes, and all 8 columns are activation rows (two tiles of 8 for M > 8).
//   Activations are read through L1 (where the SM's warps share them), 16 bytes a lane for the
//   two steps of a word. Float zero points: W holds q and zp x sum(a) over the block (a second
//   mma with W = ones) is subtracted after scaling. f32 activations are split into three bf16
//   parts (hi + mid + lo is exact to f32), three mmas.
//
//   Dependent launch. The kernel starts while the previous one (which writes the activations)
//   drains: it issues its first quads of constant weights, then waits for it
//   (dependent_launch.cuh), and lets the next kernel launch once its loads are done.
//
//   Norm prologue (MatMulNBits4Args::norm_prologue, onnx_genai RmsNormMatMulNBits). Each block
//   first prefetches its first quads of weights into L2, waits, and RMS-normalises the M
//   activation rows into shared memory (tensor_core_gemv::norm_prologue: a few KiB read from L2
//   by every block); its lanes then read their activations there instead of through L1, and the
//   norm costs no launch of its own. One runtime flag, no kernel variants.
//
//   Splitting K. Small N gives few row tiles, so the 8 warps of a block may cover
//   8 / block_k_splits tiles each, splitting K between block_k_splits warps (plan() weighs
//   waves of resident blocks against memory round trips per warp). Partial sums meet in shared
//   memory and are summed in a fixed order: no atomics, no workspace, deterministic,
//   capture-safe. No thread-block clusters: their launch and cluster-wide barriers cost more
//   than they saved.
namespace tensor_core {

constexpr int kQuadBytes = 64;    // of one row of B, per lane group and quad
constexpr int kQuadCodes = 2 * kQuadBytes;

// What lanes with no activation row of their own multiply by: a quad's k range in f32, padded.
__device__ uint4 g_zero_activations[64];

// Operand type of the mma for activations of type T; f32 activations run as three bf16 parts.
template <typename T>
struct Operands {
  static constexpr bool kBf16 = !std::is_same_v<T, __half>;
  static constexpr int kParts = std::is_same_v<T, float> ? 3 : 1;
  static constexpr uint32_t kOnes = kBf16 ? 0x3F803F80u : 0x3C003C00u;  // (1, 1)
};

// Spreads each of the quad's 2^S blocks evenly over the group's 4 lanes.
template <int S>
__device__ __forceinline__ void spread_blocks(uint32_t (&x)[4], int t) {
  if constexpr (S >= 1) trade_words<2, 2>(x, (t & 2) != 0);
  if constexpr (S >= 2) trade_words<1, 1>(x, (t & 1) != 0);
}

// Byte offset in the quad of lane t's halfword for step s (= 2 x word + half) after S rounds
// of spreading, as a lane part and a step part: the inverse of spread_blocks.
template <int S>
__device__ __forceinline__ int lane_offset(int t) {
  if constexpr (S == 0) return 16 * t;
  else if constexpr (S == 1) return 16 * (t & 1) + 4 * (t & 2);
  else return 4 * t;
}

template <int S>
__device__ __forceinline__ constexpr int step_offset(int s) {
  const int word = s >> 1, half = s & 1;
  if constexpr (S == 0) return 4 * word + 2 * half;
  else if constexpr (S == 1) return 32 * (word >> 1) + 4 * (word & 1) + 2 * half;
  else return 16 * word + 2 * half;
}

// How a quad's 2^E quantisation blocks meet the mma (see above): column classes, or spread.
template <int E, bool SPREAD>
struct Layout {
  static constexpr int kBlocks = 1 << E;                  // blocks in a quad
  static constexpr int kSpread = SPREAD ? E : 0;          // rounds of spread_blocks
  static constexpr int kClasses = kBlocks >> kSpread;     // blocks side by side in an mma's columns
  static constexpr int kStepsPerPhase = 8 >> kSpread;     // steps of the quad sharing a block
  static constexpr int kTileM = 8 / kClasses;             // activation rows per mma
  static constexpr int kScales = SPREAD ? kBlocks : (kClasses == 1 ? 1 : 2);  // per row and lane
  static constexpr int kZeroBytes = E == 2 ? 2 : 1;       // packed zero points of a quad
  // The block (within the quad) of lane t's codes.
  __device__ static int lane_class(int t) { return t * kClasses / 4; }
  // The first block whose scale the lane applies: fragment columns 2t, 2t + 1 are classes
  // (2t) % C and (2t + 1) % C.
  __device__ static int scale_start(int t) { return kClasses == 4 ? 2 * (t & 1) : 0; }
  // The block (in zero-point nibbles from the quad's first byte) of the lane's codes at a step:
  // fixed per lane (its class, plus the parity of a block that starts mid-byte), or the phase.
  __device__ static int code_block(int step, int lane_block) { return SPREAD ? step / kStepsPerPhase : lane_block; }
  // Which of the lane's scales fragment element e takes in phase p.
  __device__ static constexpr int scale_index(int p, int e) { return SPREAD ? p : (kClasses == 1 ? 0 : e & 1); }
};

// magic + zp to subtract, and -(64 + zp) to add after scaling an in-place high nibble (f16).
struct ZeroPair {
  uint32_t sub, fma;
};

template <bool BF16>
__device__ __forceinline__ ZeroPair zero_pair(uint32_t zp) {
  if constexpr (BF16) return {(0x4300u | zp) * 0x10001u, 0u};
  else return {(0x6400u | zp) * 0x10001u, (0xD400u | zp << 4) * 0x10001u};
}

// Word w of codes (4 consecutive k per halfword) as four pairs q - zp: d[0] = (k0, k2),
// d[1] = (k1, k3) of the low halfword (zero point `lo`), d[2], d[3] of the high one (`hi`).
template <bool BF16>
__device__ __forceinline__ void dequantise_word(uint32_t w, ZeroPair lo, ZeroPair hi, uint32_t (&d)[4]) {
  w = __byte_perm(w, 0, 0x3120);  // bytes 0 2 1 3: each pair below comes from one halfword
  if constexpr (BF16) {
    constexpr uint32_t kMagic = 0x43004300u;  // (128, 128)
    d[0] = sub_pair<true>((w & 0x000F000Fu) | kMagic, lo.sub);
    d[1] = sub_pair<true>(((w >> 4) & 0x000F000Fu) | kMagic, lo.sub);
    d[2] = sub_pair<true>(((w >> 8) & 0x000F000Fu) | kMagic, hi.sub);
    d[3] = sub_pair<true>(((w >> 12) & 0x000F000Fu) | kMagic, hi.sub);
  } else {
    constexpr uint32_t kMagic = 0x64006400u, kSixteenth = 0x2C002C00u;  // (1024, 1024), (1/16, 1/16)
    d[0] = sub_pair<false>((w & 0x000F000Fu) | kMagic, lo.sub);
    d[1] = fma_pair<false>((w & 0x00F000F0u) | kMagic, kSixteenth, lo.fma);  // (1024 + 16 q) / 16 - (64 + zp)
    w >>= 8;
    d[2] = sub_pair<false>((w & 0x000F000Fu) | kMagic, hi.sub);
    d[3] = fma_pair<false>((w & 0x00F000F0u) | kMagic, kSixteenth, hi.fma);
  }
}

// The mma's B operands of a word's two steps, from activations p[0 .. 7] (16 bytes in f16 /
// bf16, so one load serves both steps): step h takes p[4h .. 4h + 3] in the order of
// dequantise_word, (p0, p2), (p1, p3); per part of an f32 split.
// `generic`: the rows are the norm prologue's, in shared memory (load_activations).
template <typename T>
__device__ __forceinline__ void activation_fragments(const T* p, bool generic,
                                                     uint32_t (&b)[2][Operands<T>::kParts][2]) {
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 v = load_activations(reinterpret_cast<const float4*>(p) + h, generic);
      float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int part = 0; part < 3; ++part) {
        uint32_t bits[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const __nv_bfloat16 r = __float2bfloat16_rn(x[i]);
          x[i] -= __bfloat162float(r);  // exact: the next part rounds the remainder
          bits[i] = __bfloat16_as_ushort(r);
        }
        b[h][part][0] = bits[0] | bits[2] << 16;
        b[h][part][1] = bits[1] | bits[3] << 16;
      }
    }
  } else {
    const uint4 v = load_activations(reinterpret_cast<const uint4*>(p), generic);  // (p0, p1), (p2, p3), ...
    b[0][0][0] = __byte_perm(v.x, v.y, 0x5410);
    b[0][0][1] = __byte_perm(v.x, v.y, 0x7632);
    b[1][0][0] = __byte_perm(v.z, v.w, 0x5410);
    b[1][0][1] = __byte_perm(v.z, v.w, 0x7632);
  }
}

// Zero points: none (8), packed 4-bit (subtracted before the mma), floats (applied after it).
enum class Zp { kNone, kPacked, kFloat };

// What one lane loads for one quad: codes of its two rows and their blocks' parameters.
template <typename T, typename Lay, Zp ZP>
struct Quad {
  uint4 codes[2];
  Pack<T, Lay::kScales> scale[2];
  Pack<T, ZP == Zp::kFloat ? Lay::kScales : 1> zero_float[2];
  uint32_t zero_packed[2];  // the quad's zero-point bytes, little-endian
};

// The lane's view of the problem: its rows (g, g + 8 of the tile) and activation rows (of `a`,
// `lda` elements apart: A in global memory, or the norm prologue's rows), at quad 0.
// Offsets into B and its parameters are 32-bit (the plan checks the sizes): fewer registers.
template <typename T, int NT>
struct LaneView {
  uint32_t codes[2];           // bytes to the lane's 16 of quad 0 (rows past N read row N - 1)
  uint32_t scales[2];          // elements to the first scale (and float zero point) it applies
  uint32_t zero_points[2];     // packed: bytes to the row's zero points
  const T* a[NT];              // activations of quad 0 at the lane's k, or zeros
  int a_step[NT];              // elements per quad: kQuadCodes, or 0 on the zeros
  int t;
  int block_shift;             // log2(bytes per block)
};

template <typename T, typename Lay, Zp ZP, int NT>
__device__ __forceinline__ LaneView<T, NT> lane_view(const MatMulNBits4Args& p, int64_t first_row, int lane, const T* a,
                                                    int64_t lda) {
  const int g = lane / 4, t = lane % 4;
  const uint32_t row_bytes = static_cast<uint32_t>(p.k / 2), blocks = static_cast<uint32_t>(p.blocks);
  LaneView<T, NT> v;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const uint32_t n = static_cast<uint32_t>(first_row + g + 8 * r < p.n ? first_row + g + 8 * r : p.n - 1);
    v.codes[r] = n * row_bytes + 16 * t;
    v.scales[r] = n * blocks + Lay::scale_start(t);
    v.zero_points[r] = n * ((blocks + 1) / 2);
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int64_t m = nt * Lay::kTileM + g / Lay::kClasses;
    const bool own = g % Lay::kClasses == Lay::lane_class(t) && m < p.m;
    v.a[nt] = own ? a + m * lda + 2 * lane_offset<Lay::kSpread>(t)
                  : reinterpret_cast<const T*>(g_zero_activations);
    v.a_step[nt] = own ? kQuadCodes : 0;
  }
  v.t = t;
  v.block_shift = __ffs(static_cast<int>(p.block_size)) - 2;  // block_size is a power of two
  return v;
}

// Issues quad q's loads (none past the warp's range).
template <typename T, typename Lay, Zp ZP, int NT>
__device__ __forceinline__ void load_quad(const MatMulNBits4Args& p, const LaneView<T, NT>& v, int q, int q_end,
                                          Quad<T, Lay, ZP>& d) {
  using Params = Pack<T, Lay::kScales>;
  if (q >= q_end) return;
  const uint32_t first = Lay::kBlocks == 1 ? (q * kQuadBytes) >> v.block_shift : q * Lay::kBlocks;
#pragma unroll
  for (int r = 0; r < 2; ++r) d.codes[r] = load_codes(p.b + (v.codes[r] + q * kQuadBytes));
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    d.scale[r] = *reinterpret_cast<const Params*>(static_cast<const T*>(p.scales) + (v.scales[r] + first));
    if constexpr (ZP == Zp::kFloat) {
      d.zero_float[r] = *reinterpret_cast<const Params*>(static_cast<const T*>(p.zp_float) + (v.scales[r] + first));
    }
    if constexpr (ZP == Zp::kPacked) {
      const uint8_t* zp = p.zp_packed + (v.zero_points[r] + first / 2);
      if constexpr (Lay::kZeroBytes == 1) d.zero_packed[r] = *zp;
      else d.zero_packed[r] = *reinterpret_cast<const uint16_t*>(zp);
    }
  }
}

// Zero pairs of row r's block `nibble` (counted from the quad's first zero-point byte).
template <typename T, typename Lay, Zp ZP>
__device__ __forceinline__ ZeroPair zeros(const Quad<T, Lay, ZP>& d, int r, int nibble) {
  constexpr bool kBf16 = Operands<T>::kBf16;
  if constexpr (ZP == Zp::kPacked) return zero_pair<kBf16>((d.zero_packed[r] >> (4 * nibble)) & 0xFu);
  else return zero_pair<kBf16>(ZP == Zp::kFloat ? 0u : 8u);  // float zero points are applied after the mma
}

// acc [activation tile][fragment] += the quad's contribution. part / sums collect one phase's
// steps before its scales (and float zero points) are applied. `generic`: activations in shared
// memory (the norm prologue's).
template <typename T, typename Lay, Zp ZP, int NT>
__device__ __forceinline__ void multiply_quad(const LaneView<T, NT>& v, int q, const Quad<T, Lay, ZP>& d, bool generic,
                                              float (&acc)[NT][4]) {
  using Ops = Operands<T>;
  constexpr bool kFloatZp = ZP == Zp::kFloat;
  // Phases of >= 4 steps alternate between two accumulators: half the mma dependency chain.
  constexpr int kChains = Lay::kStepsPerPhase >= 4 ? 2 : 1;
  uint32_t x[2][4] = {{d.codes[0].x, d.codes[0].y, d.codes[0].z, d.codes[0].w},
                      {d.codes[1].x, d.codes[1].y, d.codes[1].z, d.codes[1].w}};
  spread_blocks<Lay::kSpread>(x[0], v.t);
  spread_blocks<Lay::kSpread>(x[1], v.t);
  const T* a[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) a[nt] = v.a[nt] + q * v.a_step[nt];
  // A block of >= 64 bytes may start in the high half of its zero-point byte.
  const int parity = Lay::kBlocks == 1 ? ((q * kQuadBytes) >> v.block_shift) & 1 : 0;
  const int lane_block = Lay::lane_class(v.t) + parity;
  const uint32_t ones[4] = {Ops::kOnes, Ops::kOnes, Ops::kOnes, Ops::kOnes};
  float part[kChains][NT][4] = {}, sums[kChains][NT][4] = {};
#pragma unroll
  for (int word = 0; word < 4; ++word) {
    // Blocks of the word's two steps.
    const int lo = Lay::code_block(2 * word, lane_block), hi = Lay::code_block(2 * word + 1, lane_block);
    uint32_t dq[2][4];
#pragma unroll
    for (int r = 0; r < 2; ++r) dequantise_word<Ops::kBf16>(x[r][word], zeros(d, r, lo), zeros(d, r, hi), dq[r]);
    uint32_t b[NT][2][Ops::kParts][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      activation_fragments<T>(a[nt] + 2 * step_offset<Lay::kSpread>(2 * word), generic, b[nt]);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int step = 2 * word + half, chain = step % kChains;
      const uint32_t w[4] = {dq[0][2 * half], dq[1][2 * half], dq[0][2 * half + 1], dq[1][2 * half + 1]};
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int i = 0; i < Ops::kParts; ++i) {
          mma<Ops::kBf16>(part[chain][nt], w, b[nt][half][i]);
          if constexpr (kFloatZp) mma<Ops::kBf16>(sums[chain][nt], ones, b[nt][half][i]);
        }
      }
      if (step % Lay::kStepsPerPhase != Lay::kStepsPerPhase - 1) continue;
      // Fragment element e is row g + 8 (e / 2) of the tile, column 2t + (e % 2).
      const int phase = step / Lay::kStepsPerPhase;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int s = Lay::scale_index(phase, e);
        const float scale = to_float(d.scale[e / 2].v[s]);
        const float zp_scale = kFloatZp ? scale * to_float(d.zero_float[e / 2].v[kFloatZp ? s : 0]) : 0.0f;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
          for (int c = 0; c < kChains; ++c) {
            acc[nt][e] = fmaf(scale, part[c][nt][e], acc[nt][e]);
            if constexpr (kFloatZp) acc[nt][e] = fmaf(-zp_scale, sums[c][nt][e], acc[nt][e]);
            part[c][nt][e] = 0.0f;
            sums[c][nt][e] = 0.0f;
          }
        }
      }
    }
  }
}

// Calls out(tile row, activation row, sum) for each sum the lane holds, once the column classes
// of an activation row are added up (within the lane, then across lane pairs for 4 classes).
template <typename Lay, int NT, typename F>
__device__ __forceinline__ void for_each_output(const float (&acc)[NT][4], int lane, F&& out) {
  constexpr int kClasses = Lay::kClasses;
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = g + 8 * h, m = nt * Lay::kTileM + 2 * t / kClasses;
      float sum = acc[nt][2 * h];
      if constexpr (kClasses == 1) {
        out(row, m, sum);
        out(row, m + 1, acc[nt][2 * h + 1]);
        continue;
      }
      sum += acc[nt][2 * h + 1];
      if constexpr (kClasses == 4) sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      if (kClasses == 2 || (t & 1) == 0) out(row, m, sum);
    }
  }
}

// Registers. Kernels that hold only codes and scales (f16, no zero points, one tile of
// activation rows) fit 80 registers: 3 blocks an SM, more loads in flight. Zero points, bf16's
// longer dequantisation, f32 splits and two activation tiles need more (up to 128: 2 blocks).
// The deep ring trades the third block for twice the quads in flight per warp (128 registers).
template <typename T, Zp ZP, int NT, bool DEEP>
constexpr int kMinBlocksPerSm = !DEEP && std::is_same_v<T, __half> && ZP == Zp::kNone && NT == 1 ? 3 : 2;

// Quads in the ring: float zero points and f32 activations hold twice the parameters or
// operands and would spill with a third. The deep ring (f16 with no zero points): 16 warps x
// 6 KiB in flight per SM (against 24 x 3 KiB), all of a warp's quads at once where K is split 8
// ways up to K = 6144; bf16 and packed zero points spill past 4.
template <typename T, Zp ZP>
constexpr int kDeepStages = std::is_same_v<T, __half> && ZP == Zp::kNone ? 6 : 4;
template <typename T, Zp ZP, bool DEEP>
constexpr int kStages = DEEP ? kDeepStages<T, ZP> : ZP == Zp::kFloat || std::is_same_v<T, float> ? 2 : 3;

// The deep ring exists for f16 / bf16 activations with no or packed zero
// points and one tile of activation rows (M <= 8): the deep ring would spill on the others, and
// fewer variants keep the build short.
template <typename T, Zp ZP, int NT>
constexpr bool kHasRingVariants = !std::is_same_v<T, float> && ZP != Zp::kFloat && NT == 1;

template <typename T, typename Lay, Zp ZP, int NT, bool DEEP>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm<T, ZP, NT, DEEP>) small_m_kernel(const MatMulNBits4Args p) {
  constexpr int STAGES = kStages<T, ZP, DEEP>;
  __shared__ float partial[kWarps][kTileRows][kMaxMTiles * 8];
  extern __shared__ uint4 norm_rows[];  // the norm prologue's (norm_prologue_bytes; else none)
  const int ksb = p.block_k_splits;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t block_first_row = static_cast<int64_t>(blockIdx.x) * (kWarps / ksb * kTileRows);
  const int64_t first_row = block_first_row + warp / ksb * kTileRows;
  // The norm prologue comes first, before the lane's state is live (registers), its scratch
  // `partial`, whose own use starts after the last quad.
  const bool normalise = p.norm_prologue;
  T* const rows = reinterpret_cast<T*>(norm_rows);
  if (normalise) {
    norm_prologue<T>(p, rows, &partial[0][0][0], first_row, static_cast<int>(p.k / kQuadCodes) * (warp % ksb) / ksb,
                     p.k / 2);
  }
  const LaneView<T, NT> v = lane_view<T, Lay, ZP, NT>(p, first_row, lane, normalise ? rows : static_cast<const T*>(p.a),
                                                      normalise ? norm_row_stride(p.k, sizeof(T)) : p.k);

  // This warp's share of K: quads [q_begin, q_end) of split warp % ksb (none past N).
  const int quads = static_cast<int>(p.k / kQuadCodes), split = warp % ksb;
  const int q_begin = quads * split / ksb, q_end = first_row < p.n ? quads * (split + 1) / ksb : q_begin;
  float acc[NT][4] = {};
  Quad<T, Lay, ZP> ring[STAGES];
  stream_quads<STAGES>(
      q_begin, q_end, p.constant_weights, [&](int q, int slot) { load_quad(p, v, q, q_end, ring[slot]); },
      [&](int q, int slot) { multiply_quad(v, q, ring[slot], normalise, acc); });

  const bool swiglu = p.epilogue == MatMulNBits4Epilogue::kSwiGLU;
  if (ksb == 1 && !swiglu) {
    for_each_output<Lay>(acc, lane, [&](int row, int m, float sum) { store_output<T>(p, first_row + row, m, sum); });
    return;
  }
  // Split sums meet in shared memory, and so do a SwiGLU's column pairs: rows g and g + 1 of a
  // tile are in different lanes (the fragment pairs rows g and g + 8).
  for_each_output<Lay>(acc, lane, [&](int row, int m, float sum) { partial[warp][row][m] = sum; });
  __syncthreads();
  store_split_sums<T>(p, partial, ksb, block_first_row);
}

// ---------------------------------------------------------------------------------------------
// Planning and launch.

using Kernel = void (*)(MatMulNBits4Args);

// log2 of the quantisation blocks in a quad: 0 for blocks of >= 64 bytes, 1 for 32, 2 for 16.
int block_exponent(int64_t block_size) {
  int e = 0;
  while ((kQuadBytes >> e) > block_size / 2) ++e;
  return e;
}

// The planned kernel's layout: column classes unless classes x M > 8 (then spread, M in tiles
// of 8); E = 0 has one class either way.
struct Shape {
  int e = 0;
  bool spread = false;
  int m_tiles = 1;
};

Shape shape_of(const MatMulNBits4Args& p) {
  Shape s;
  s.e = block_exponent(p.block_size);
  s.spread = s.e > 0 && (p.m << s.e) > 8;
  s.m_tiles = s.spread || s.e == 0 ? static_cast<int>(ceil_div(p.m, 8)) : 1;
  return s;
}

template <typename T, typename Lay, Zp ZP, int NT>
Kernel with_ring(bool deep) {
  if constexpr (kHasRingVariants<T, ZP, NT>) {
    if (deep) return small_m_kernel<T, Lay, ZP, NT, true>;
  }
  return small_m_kernel<T, Lay, ZP, NT, false>;
}

template <typename T, int E, bool SPREAD, int NT>
Kernel with_zero_points(Zp zp, bool deep) {
  using Lay = Layout<E, SPREAD>;
  if (zp == Zp::kFloat) return with_ring<T, Lay, Zp::kFloat, NT>(deep);
  return zp == Zp::kPacked ? with_ring<T, Lay, Zp::kPacked, NT>(deep)
                           : with_ring<T, Lay, Zp::kNone, NT>(deep);
}

// The 8 layouts a plan can pick, x 3 zero-point kinds x 3 dtypes: 72 kernels, and 20 more with
// the deep ring.
template <typename T>
Kernel kernel_for(const Shape& s, Zp zp, bool deep) {
  const bool one = s.m_tiles == 1;
  switch (s.e) {
    case 0:
      return one ? with_zero_points<T, 0, false, 1>(zp, deep) : with_zero_points<T, 0, false, 2>(zp, deep);
    case 1:
      if (!s.spread) return with_zero_points<T, 1, false, 1>(zp, deep);
      return one ? with_zero_points<T, 1, true, 1>(zp, deep) : with_zero_points<T, 1, true, 2>(zp, deep);
    default:
      if (!s.spread) return with_zero_points<T, 2, false, 1>(zp, deep);
      return one ? with_zero_points<T, 2, true, 1>(zp, deep) : with_zero_points<T, 2, true, 2>(zp, deep);
  }
}

Zp zero_points_of(const MatMulNBits4Args& p) {
  return p.float_zero_points ? Zp::kFloat : p.packed_zero_points ? Zp::kPacked : Zp::kNone;
}

Kernel kernel_for(const MatMulNBits4Args& p) {
  const Shape s = shape_of(p);
  Kernel kernel = nullptr;
  dispatch_float_type(p.dtype,
                      [&]<typename T>() { kernel = kernel_for<T>(s, zero_points_of(p), p.deep_ring); });
  return kernel;
}

// Whether the deep ring exists for the plan's shape (as kHasRingVariants
// decides).
bool ring_variants_exist(const MatMulNBits4Args& p) {
  return p.dtype != DType::kF32 && !p.float_zero_points && shape_of(p).m_tiles == 1;
}

// Quads a warp of the planned kernel keeps in flight while it waits for one.
int quads_in_flight(const MatMulNBits4Args& p) {
  if (!p.deep_ring) return 2;
  int stages = 0;
  dispatch_float_type(p.dtype, [&]<typename T>() {
    stages = p.packed_zero_points ? kDeepStages<T, Zp::kPacked> : kDeepStages<T, Zp::kNone>;
  });
  return stages - 1;
}

// Picks how many warps split K (tensor_core_gemv::plan_splits), or takes `forced_splits`.
Status plan(MatMulNBits4Args& p, int forced_splits) {
  const Kernel kernel = kernel_for(p);
  if (kernel == nullptr) return OG_ERROR("MatMulNBits (CUDA): unsupported dtype ", dtype_name(p.dtype));
  OG_ASSIGN_OR_RETURN(const int64_t wave, resident_wave(kernel, norm_prologue_bytes(p)));
  OG_ASSIGN_OR_RETURN(p.block_k_splits, plan_splits(ceil_div(p.n, kTileRows), p.k / kQuadCodes, wave,
                                                    quads_in_flight(p), forced_splits, "MatMulNBits (CUDA)"));
  p.norm_prologue = p.norm_prologue && norm_prologue_pays(ceil_div(p.n, kTileRows), p.block_k_splits, wave);
  return Status::ok();
}

// The kernel's loads need these alignments (the shapes were checked by the plan; the norm
// prologue's pointers are null or 16-byte aligned, A is null with it).
bool pointers_fit(const MatMulNBits4Args& p) {
  const uintptr_t element = p.dtype == DType::kF32 ? 4 : 2;
  const uintptr_t params = element << block_exponent(p.block_size);
  const bool norm = aligned(p.norm_x, 16) && aligned(p.norm_skip, 16) && aligned(p.norm_gamma, 16) &&
                    aligned(p.norm_sum, 16);
  return aligned(p.b, 16) && aligned(p.a, 16) && aligned(p.scales, params) && aligned(p.zp_float, params) &&
         aligned(p.zp_packed, 2) && norm;
}

Status launch(const MatMulNBits4Args& p, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>(ceil_div(ceil_div(p.n, kTileRows) * p.block_k_splits, kWarps));
  return cuda_status(launch_kernel(kernel_for(p), dim3(grid), dim3(kThreads), norm_prologue_bytes(p), s,
                                   p.dependent_launch, p),
                     "MatMulNBits small_m_kernel launch");
}

}  // namespace tensor_core

Status check_layout(const MatMulNBits4Args& p) {
  if (p.block_size < 16 || (p.block_size & (p.block_size - 1)) != 0 || p.blocks * p.block_size / 2 % 8 != 0) {
    return OG_ERROR("MatMulNBits (CUDA): block_size ", p.block_size, " must be a power of two >= 16");
  }
  if (p.dtype != DType::kF32 && p.dtype != DType::kF16 && p.dtype != DType::kBF16) {
    return OG_ERROR("MatMulNBits (CUDA): unsupported dtype ", dtype_name(p.dtype));
  }
  if (p.epilogue == MatMulNBits4Epilogue::kSwiGLU && p.n % 2 != 0) {
    return OG_ERROR("MatMulNBits (CUDA): the SwiGLU epilogue needs an even number of columns, got ", p.n);
  }
  return Status::ok();
}

// What plans given the default choice take (set_matmul_nbits4_choice: the tests).
MatMulNBits4Choice g_default_choice;

// The ring kAuto plans, from cuda_bench's side-by-side rows on the H200 (2026-12-01, dependent
// launches): the deep one for 2-8 rows of block-32 weights with K >= N, where the standard
// kernel spills registers and tall K leaves few row tiles to spread (M = 8: 18944x3584 32.2 ->
// 23.2 us, 14336x4096 25.0 -> 19.6, 4864x896 7.7 -> 4.7), and for one row where K >= 2N (K
// split 8 ways still leaves few warps an SM: 18944x3584 22.4 -> 19.7 us, 14336x4096 18.7 ->
// 16.5, 4864x896 4.6 -> 4.1); elsewhere it lost (wide N: 896x151936 at M = 8 41.0 -> 45.5, the
// fused gate/up) or made no difference.
MatMulNBits4Kernel planned_tensor_core(const MatMulNBits4Args& args) {
  const bool deep = (args.m >= 2 && args.m <= 8 && args.block_size == 32 && args.k >= args.n) ||
                    (args.m == 1 && args.k >= 2 * args.n);
  return deep ? MatMulNBits4Kernel::kTensorCoreDeep : MatMulNBits4Kernel::kTensorCore;
}

}  // namespace

void set_matmul_nbits4_choice(MatMulNBits4Choice choice) { g_default_choice = choice; }

Status plan_matmul_nbits4(MatMulNBits4Args& args, MatMulNBits4Choice choice) {
  OG_RETURN_IF_ERROR(check_layout(args));
  if (choice == MatMulNBits4Choice{}) choice = g_default_choice;
  if (choice.kernel == MatMulNBits4Kernel::kAuto) choice.kernel = planned_tensor_core(args);
  // The tensor-core kernel reads whole quads with no bound on K, blocks of >= 32 codes, and
  // indexes B and its parameters in 32 bits.
  args.tensor_core = choice.kernel != MatMulNBits4Kernel::kCudaCore && args.m >= 1 && args.m <= 16 &&
                     args.k % tensor_core::kQuadCodes == 0 && args.k % args.block_size == 0 &&
                     args.block_size >= 32 && args.n * (args.k / 2) < (int64_t{1} << 32);
  // The norm prologue's rows must fit their shared-memory budget.
  const int64_t element = args.dtype == DType::kF32 ? 4 : 2;
  args.norm_prologue = args.norm_prologue && args.tensor_core && args.m * args.k * element <= kNormPrologueBytes;
  const bool variants = args.tensor_core && tensor_core::ring_variants_exist(args);
  args.deep_ring = variants && choice.kernel == MatMulNBits4Kernel::kTensorCoreDeep;
  args.block_k_splits = 1;
  args.dependent_launch = args.tensor_core && choice.dependent_launch && dependent_launch_allowed();
  return args.tensor_core ? tensor_core::plan(args, choice.block_k_splits) : Status::ok();
}

Status launch_matmul_nbits4(const MatMulNBits4Args& p, void* stream) {
  if (p.m == 0 || p.n == 0) return Status::ok();
  OG_RETURN_IF_ERROR(check_layout(p));
  if ((p.zp_float != nullptr) != p.float_zero_points || (p.zp_packed != nullptr) != p.packed_zero_points) {
    return OG_ERROR("MatMulNBits (CUDA): zero points given or missing against the plan");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  // Pointers the tensor-core kernel cannot load from (possible for sub-tensors) take the
  // CUDA-core path, which has no norm prologue (its caller normalises first where
  // matmul_nbits4_runs_tensor_core says no).
  if (matmul_nbits4_runs_tensor_core(p)) return tensor_core::launch(p, s);
  if (p.norm_prologue) return OG_ERROR("MatMulNBits (CUDA): the norm prologue needs the tensor-core kernel");
  return launch_cuda_core(p, 4, s);
}

bool matmul_nbits4_runs_tensor_core(const MatMulNBits4Args& p) { return p.tensor_core && tensor_core::pointers_fit(p); }

}  // namespace onnx_genai::cuda
