// The int8 path of MatMulNBits (accuracy_level >= 4, 4-bit weights), compiled per ISA with
// qgemm_impl.h: A is quantised once per call, per block of B's block_size, to int8 with scale
// max|a| / 127, and every dot product runs on bytes:
//
//   AVX-512 VNNI  vpdpbusd: 64 unsigned codes x 64 signed A values summed in fours into 16 int32
//   AVX2          vpmaddubsw + vpmaddwd: the same sums through int16 pairs (at most 2 * 15 * 127
//                 each, two of them added: no saturation)
//
// A chunk (8 * kW values) is one load of 4 * kW code bytes split into low and high nibbles, paired
// with the chunk's two halves of packed A. Int32 lane l of a chunk's dot then covers values
// [8l, 8l + 8) of the chunk, so it converts to f32 and takes one scale: A's block scale times
// B's, each spread over the lanes of its blocks. The default zero point (8) is folded into the
// integers: each lane's dot starts from -8 * the sum of its A values (PackedA::lane_offsets),
// computed once when A is packed. Given zero points, as in the f32 path, are subtracted once per
// pair of rows: sum_b s_b z_b (a_scale_b * sum of the block's int8 values).
//
// Register tile: kInt8RowsA rows of A x kInt8RowsB rows of B, each B chunk decoded once per tile
// and each A chunk loaded once per tile; B rows outermost so the tile's codes stay in L1 while
// all of A (L2-resident) passes.
#pragma once

#include "ops/cpu/avx2/qgemm_lanes.h"

namespace onnx_genai::simd {
namespace {

#if defined(__AVX512F__)
constexpr int kInt8GemvRows = 4;                  // M = 1: rows of B per pass
constexpr int kInt8RowsA = 4, kInt8RowsB = 4;     // M > 1
// 4 * kW bytes: one chunk of code bytes, or one half of a packed int8 chunk of A.
struct VecU8 {
  __m512i v;
  static VecU8 load(const void* p) { return {_mm512_loadu_si512(p)}; }
};
inline VecU8 low_nibbles(VecU8 x) { return {_mm512_and_si512(x.v, _mm512_set1_epi8(0x0F))}; }
inline VecU8 high_nibbles(VecU8 x) { return {_mm512_and_si512(_mm512_srli_epi16(x.v, 4), _mm512_set1_epi8(0x0F))}; }
inline VecU8 splat_u8(uint8_t x) { return {_mm512_set1_epi8(static_cast<char>(x))}; }
// Lane l: start + sum over bytes 4l..4l+3 of u0 * s0 + u1 * s1 (u unsigned, s signed).
inline VecI32 dot_u8s8(VecI32 start, VecU8 u0, VecU8 s0, VecU8 u1, VecU8 s1) {
  return {_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start.v, u0.v, s0.v), u1.v, s1.v)};
}
// kW int32 lanes (in int8 range) as kW bytes.
inline void store_int8(VecI32 q, int8_t* dst) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(q.v));
}
#else
constexpr int kInt8GemvRows = 2;
constexpr int kInt8RowsA = 2, kInt8RowsB = 2;
struct VecU8 {
  __m256i v;
  static VecU8 load(const void* p) { return {_mm256_loadu_si256(static_cast<const __m256i*>(p))}; }
};
inline VecU8 low_nibbles(VecU8 x) { return {_mm256_and_si256(x.v, _mm256_set1_epi8(0x0F))}; }
inline VecU8 high_nibbles(VecU8 x) { return {_mm256_and_si256(_mm256_srli_epi16(x.v, 4), _mm256_set1_epi8(0x0F))}; }
inline VecU8 splat_u8(uint8_t x) { return {_mm256_set1_epi8(static_cast<char>(x))}; }
inline VecI32 dot_u8s8(VecI32 start, VecU8 u0, VecU8 s0, VecU8 u1, VecU8 s1) {
  const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(u0.v, s0.v), _mm256_maddubs_epi16(u1.v, s1.v));
  return {_mm256_add_epi32(start.v, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))};
}
inline void store_int8(VecI32 q, int8_t* dst) {
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(q.v), _mm256_extracti128_si256(q.v, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packs_epi16(words, words));
}
#endif

// Quantises row `src` [K] of A: per block, scale = max|a| / 127 and q = round(a / scale), written
// in the chunk order (each pair of vectors split into its even and odd values); and the row's
// lane offsets (PackedA::lane_offsets).
void pack_row_int8(const QWeights& w, const float* src, int64_t row_values, int8_t* dst, float* block_scales,
                   float* block_terms, int32_t* lane_offsets) {
  for (int64_t b = 0; b < w.blocks; ++b) {
    VecF amax = VecF::splat(0.0f);
    for (int64_t i = b * w.block_size; i < (b + 1) * w.block_size; i += kW) amax = max(amax, abs(load_row(src, w.k, i)));
    block_scales[b] = reduce_max(amax) / 127.0f;
    block_terms[b] = 0.0f;
  }
  const int shift = std::countr_zero(static_cast<uint64_t>(w.block_size));
  // Padding past the last block quantises zeros: any finite inverse will do.
  const auto block_of = [&](int64_t i) { return std::min(i >> shift, w.blocks - 1); };
  // a / scale for values [i, i + kW), which lie in one block (blocks hold >= 16 values); adds the
  // rounded values to the block's sum (exact in f32: small integers).
  const auto scaled = [&](int64_t i) {
    const float scale = block_scales[block_of(i)];
    const VecF v = load_row(src, w.k, i) * VecF::splat(scale > 0.0f ? 1.0f / scale : 0.0f);
    block_terms[block_of(i)] += reduce_add(to_float(to_int(v)));
    return v;
  };
  for (int64_t c = 0; c < row_values; c += kChunk) {
    for (int64_t i = 0; i < kChunk; i += 2 * kW) {
      VecF even, odd;
      deinterleave(scaled(c + i), scaled(c + i + kW), &even, &odd);
      store_int8(to_int(even), dst + c + i / 2);
      store_int8(to_int(odd), dst + c + kChunk / 2 + i / 2);
    }
  }
  // The same lane pairing as the chunk's dots, with every code at the default zero point.
  const bool given_zp = w.zp_packed != nullptr || w.zp_float != nullptr;
  const VecU8 zero_point = splat_u8(given_zp ? 0 : static_cast<uint8_t>(1 << (w.bits - 1)));
  for (int64_t c = 0; c < row_values; c += kChunk) {
    const VecU8 first = VecU8::load(dst + c), second = VecU8::load(dst + c + kChunk / 2);
    (VecI32::splat(0) - dot_u8s8(VecI32::splat(0), zero_point, first, zero_point, second)).store(lane_offsets + c / 8);
  }
  for (int64_t b = 0; b < w.blocks; ++b) block_terms[b] *= block_scales[b];
}

// Adds one chunk of a kRowsA x kRowsB tile to acc. codes[j] and b_scales[j]: row j of B's code
// bytes and block scales at the chunk; qa, a_scales and offsets: row 0 of A's int8 values, block
// scales and lane offsets at the chunk, the next rows a.row_values, a_scales_stride and
// a.row_values / 8 further.
template <int kRowsA, int kRowsB, ScaleMode kMode>
[[gnu::always_inline]] inline void int8_chunk(const uint8_t* const (&codes)[kRowsB],
                                              const float* const (&b_scales)[kRowsB], const int8_t* qa,
                                              const float* a_scales, int64_t a_scales_stride, const int32_t* offsets,
                                              const PackedA& a, const LaneBlocks& blocks,
                                              VecF (&acc)[kRowsA][kRowsB]) {
  constexpr int64_t kHalf = kChunk / 2;  // bytes of a chunk's codes = of each half of packed A
  // B rows outermost, A reloaded per pair (L1 hits): the tile's 16 accumulators, a B row's
  // nibbles and scales and A's scales then fit the register file without spills.
  VecF scale_a[kRowsA];
#pragma GCC unroll 4
  for (int r = 0; r < kRowsA; ++r) scale_a[r] = blocks.spread<kMode>(a_scales + r * a_scales_stride);
#pragma GCC unroll 4
  for (int j = 0; j < kRowsB; ++j) {
    VecU8 bytes = VecU8::load(codes[j]);
    // One load: folded into both the mask and the shift it would be issued twice, and B is only
    // 16-byte aligned, so a full-width load may straddle two cache lines.
    __asm__("" : "+v"(bytes.v));
    const VecU8 low = low_nibbles(bytes), high = high_nibbles(bytes);
    const VecF scale_b = blocks.spread<kMode>(b_scales[j]);
#pragma GCC unroll 4
    for (int r = 0; r < kRowsA; ++r) {
      const int8_t* row = qa + r * a.row_values;
      const VecI32 dot = dot_u8s8(VecI32::load(offsets + r * (a.row_values / 8)), low, VecU8::load(row), high,
                                  VecU8::load(row + kHalf));
      acc[r][j] = fmadd(to_float(dot), scale_a[r] * scale_b, acc[r][j]);
    }
  }
}

// y[r * ldy + j] = A row (r0 + r) . B row (n + j) for a kRowsA x kRowsB tile.
template <int kRowsA, int kRowsB, ScaleMode kMode>
void int8_tile(const QWeights& w, const PackedA& a, const LaneBlocks& blocks, int64_t r0, int64_t n, float* y,
               int64_t ldy) {
  using Chunks = RowChunks<4>;
  const Chunks chunks(w);
  // Later row tiles of A find this tile's codes in L1; the first one fetches them.
  const RowPrefetch<kRowsB> prefetch(w, n, r0 == 0);
  VecF acc[kRowsA][kRowsB];
#pragma GCC unroll 4
  for (int r = 0; r < kRowsA; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < kRowsB; ++j) acc[r][j] = VecF::splat(0.0f);
  }
  const int8_t* qa = a.int8_values + r0 * a.row_values;
  const float* a_scales = a.block_scales + r0 * w.blocks;
  const int32_t* offsets = a.lane_offsets + r0 * (a.row_values / 8);
  const uint8_t* codes[kRowsB];
  const float* b_scales[kRowsB];
#pragma GCC unroll 4
  for (int j = 0; j < kRowsB; ++j) codes[j] = w.codes + (n + j) * w.row_bytes();
  for (int64_t c = 0; c < chunks.full; ++c) {
    const int64_t b = chunks.first_block(c);
#pragma GCC unroll 4
    for (int j = 0; j < kRowsB; ++j) b_scales[j] = w.scales + (n + j) * w.blocks + b;
    int8_chunk<kRowsA, kRowsB, kMode>(codes, b_scales, qa + c * kChunk, a_scales + b, w.blocks,
                                      offsets + c * (kChunk / 8), a, blocks, acc);
    prefetch.at(c, Chunks::kBytes);
#pragma GCC unroll 4
    for (int j = 0; j < kRowsB; ++j) codes[j] += Chunks::kBytes;
  }
  if (chunks.ragged) {
    // Zero-padded copies of the last chunk's codes and of both sides' scales, so that no load
    // leaves a row.
    typename Chunks::Padded pads[kRowsB];
    float a_pads[kRowsA][Chunks::kPadScales] = {};
    const int64_t b = chunks.first_block(chunks.full);
    for (int j = 0; j < kRowsB; ++j) {
      codes[j] = chunks.pad_last(w, n + j, pads[j]).codes;
      b_scales[j] = pads[j].scales;
    }
    for (int r = 0; r < kRowsA; ++r) {
      std::memcpy(a_pads[r], a_scales + r * w.blocks + b, static_cast<size_t>(w.blocks - b) * sizeof(float));
    }
    int8_chunk<kRowsA, kRowsB, kMode>(codes, b_scales, qa + chunks.full * kChunk, a_pads[0], Chunks::kPadScales,
                                      offsets + chunks.full * (kChunk / 8), a, blocks, acc);
  }
  const bool given_zp = w.zp_packed != nullptr || w.zp_float != nullptr;
  for (int r = 0; r < kRowsA; ++r) {
    float dots[kRowsB];
    reduce_row(acc[r], dots);
    for (int j = 0; j < kRowsB; ++j) {
      const float zero = given_zp ? zero_point_term(w, n + j, a.block_terms + (r0 + r) * w.blocks) : 0.0f;
      y[r * ldy + j] = dots[j] - zero;
    }
  }
}

void gemm_int8(const QWeights& w, const PackedA& a, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  constexpr int64_t kLaneValues = 8;  // a lane of the dot products covers 8 values
  const LaneBlocks blocks(w.block_size, kLaneValues);
  with_scale_mode<kLaneValues>(w.block_size, [&]<ScaleMode kMode>() {
    if (a.m == 1) {
      for_each_tile<kInt8GemvRows>(n0, n1, [&]<int RB>(int64_t n) {
        int8_tile<1, RB, kMode>(w, a, blocks, 0, n, y + (n - n0), ldy);
      });
      return;
    }
    for_each_tile<kInt8RowsB>(n0, n1, [&]<int RB>(int64_t n) {
      for_each_tile<kInt8RowsA>(0, a.m, [&]<int RA>(int64_t r) {
        int8_tile<RA, RB, kMode>(w, a, blocks, r, n, y + r * ldy + (n - n0), ldy);
      });
    });
  });
}

}  // namespace
}  // namespace onnx_genai::simd
