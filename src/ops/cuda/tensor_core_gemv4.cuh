// Device pieces of the 4-bit tensor-core kernels of MatMulNBits: the small-M GEMV
// (quantized_matmul_kernels.cu, M <= 16) and the many-row kernel (quantized_matmul_many_rows.cu,
// M = 17..64). How a warp meets its 16 rows of B and the quantisation blocks with the mma
// (column classes or spread), the exact dequantisation, what a lane loads per quad of K, and
// how a quad is multiplied into the accumulators; the design is described in
// quantized_matmul_kernels.cu. Internal linkage: each .cu file has its own copy. .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda/device_types.cuh"
#include "ops/cuda/quantized_matmul_device.cuh"
#include "ops/cuda/quantized_matmul_kernels.h"
#include "ops/cuda/tensor_core_gemv.cuh"

namespace onnx_genai::cuda {
namespace {

namespace tensor_core {

using namespace nbits4;
using namespace tensor_core_gemv;

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
  int tiles;                   // activation tiles holding rows (the many-row form skips the rest)
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
  v.tiles = static_cast<int>(ceil_div(p.m, Lay::kTileM));
  v.t = t;
  v.block_shift = __ffs(static_cast<int>(p.block_size)) - 2;  // block_size is a power of two
  return v;
}

// Issues the loads of quad q's scales and zero points.
template <typename T, typename Lay, Zp ZP, int NT>
__device__ __forceinline__ void load_params(const MatMulNBits4Args& p, const LaneView<T, NT>& v, int q,
                                            Quad<T, Lay, ZP>& d) {
  using Params = Pack<T, Lay::kScales>;
  const uint32_t first = Lay::kBlocks == 1 ? (q * kQuadBytes) >> v.block_shift : q * Lay::kBlocks;
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

// Issues quad q's loads (none past the warp's range).
template <typename T, typename Lay, Zp ZP, int NT>
__device__ __forceinline__ void load_quad(const MatMulNBits4Args& p, const LaneView<T, NT>& v, int q, int q_end,
                                          Quad<T, Lay, ZP>& d) {
  if (q >= q_end) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) d.codes[r] = load_codes(p.b + (v.codes[r] + q * kQuadBytes));
  load_params(p, v, q, d);
}

// Zero pairs of row r's block `nibble` (counted from the quad's first zero-point byte).
template <typename T, typename Lay, Zp ZP>
__device__ __forceinline__ ZeroPair zeros(const Quad<T, Lay, ZP>& d, int r, int nibble) {
  constexpr bool kBf16 = Operands<T>::kBf16;
  if constexpr (ZP == Zp::kPacked) return zero_pair<kBf16>((d.zero_packed[r] >> (4 * nibble)) & 0xFu);
  else return zero_pair<kBf16>(ZP == Zp::kFloat ? 0u : 8u);  // float zero points are applied after the mma
}

// acc [activation tile][fragment] += quad q's contribution, its activations a_quad steps of
// v.a_step from v.a (the GEMV: q; the many-row kernel: a slot of its shared-memory ring). part /
// sums collect one phase's steps before its scales (and float zero points) are applied.
// `generic`: activations in shared memory. STAGED: the quad's activations are stored in the order
// the lanes read them (16 bytes of lane t for word w at element 32 w + 8 t), not in k order.
template <typename T, typename Lay, Zp ZP, int NT, bool STAGED = false>
__device__ __forceinline__ void multiply_quad(const LaneView<T, NT>& v, int q, int a_quad, const Quad<T, Lay, ZP>& d,
                                              bool generic, float (&acc)[NT][4]) {
  using Ops = Operands<T>;
  constexpr bool kFloatZp = ZP == Zp::kFloat;
  // The many-row form (NT > kMaxMTiles) multiplies only the tiles holding rows (v.tiles, uniform
  // over the grid).
  constexpr bool kManyRows = NT > kMaxMTiles;
  const auto live = [&](int nt) { return !kManyRows || nt < v.tiles; };
  // Phases of >= 4 steps alternate between two accumulators: half the mma dependency chain. The
  // many-row form's independent tiles already overlap, and its registers are spent on them.
  constexpr int kChains = !kManyRows && Lay::kStepsPerPhase >= 4 ? 2 : 1;
  uint32_t x[2][4] = {{d.codes[0].x, d.codes[0].y, d.codes[0].z, d.codes[0].w},
                      {d.codes[1].x, d.codes[1].y, d.codes[1].z, d.codes[1].w}};
  spread_blocks<Lay::kSpread>(x[0], v.t);
  spread_blocks<Lay::kSpread>(x[1], v.t);
  const T* a[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) a[nt] = v.a[nt] + a_quad * v.a_step[nt];
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
      const int word_at = STAGED ? 32 * word : 2 * step_offset<Lay::kSpread>(2 * word);
      if (live(nt)) activation_fragments<T>(a[nt] + word_at, generic, b[nt]);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int step = 2 * word + half, chain = step % kChains;
      const uint32_t w[4] = {dq[0][2 * half], dq[1][2 * half], dq[0][2 * half + 1], dq[1][2 * half + 1]};
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        if (!live(nt)) continue;
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
          if (!live(nt)) continue;
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

}  // namespace tensor_core

}  // namespace
}  // namespace onnx_genai::cuda
