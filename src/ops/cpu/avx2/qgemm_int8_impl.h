// The int8 path of MatMulNBits (accuracy_level >= 4, 4-bit weights, blocks of >= 32), compiled
// per ISA with qgemm_impl.h: A is quantised once per call, per block of B's block_size, to int8
// with scale max|a| / 127, and every dot product runs on bytes:
//
//   AVX-512 VNNI  vpdpbusd: 64 unsigned codes x 64 signed A values summed in fours into 16 int32
//   AVX2          vpmaddubsw, eight of them added in int16 (at most 8 * 2 * 15 * 127 = 30480: no
//                 saturation), then vpmaddwd into 8 int32
//
// Memory-access plan. An int8 chunk is kW segments of 32 values (16 code bytes, one block or part
// of one), read as four vectors of code bytes, each holding whole segments:
//
//   loaded    z[i]: segments 4i..4i+3 (AVX2: 2i, 2i+1), one per 128-bit lane, 4 dwords each
//   transpose z[t]: int32 lane p = dword t of segment segment_of_lane(p)   (8 in-lane unpacks)
//
// so each int32 lane of a dot sums one whole segment (8 byte dots: low and high nibbles of 4
// dwords), converts to f32 once and takes one scale (A's block scale times B's), where lanes of 8
// values would take four. The transpose and nibble split happen once per row of B and chunk, and
// serve every row of A in the tile; A is packed in the same lane order once per call. The default
// zero point (8) is folded into the integers: each lane's dot starts from -8 * the sum of its A
// values (PackedA::lane_offsets). Given zero points, as in the f32 path, are subtracted once per
// pair of rows: sum_b s_b z_b (a_scale_b * sum of the block's int8 values).
//
// Register tile: kInt8RowsA rows of A x kInt8RowsB rows of B, B rows outermost so the tile's codes
// stay in L1 while the further tiles of A (L2-resident) pass. A row's sums run in the same order whatever
// the tile, so its result does not depend on the other rows of the call.
#pragma once

#include "ops/cpu/avx2/qgemm_lanes.h"

namespace onnx_genai::simd {
namespace {

constexpr int64_t kSegment = kInt8LaneValues;      // values per int32 lane of a dot
constexpr int64_t kInt8Chunk = kSegment * kW;      // packed values per int8 chunk
constexpr int64_t kInt8ChunkBytes = kInt8Chunk / 2;
constexpr int64_t kCodeVectorBytes = kInt8ChunkBytes / 4;  // = 4 * kW: one VecU8

// The segment (within its chunk) whose dot int32 lane p holds, after transpose_segments.
constexpr int64_t segment_of_lane(int64_t p) { return (p % 4) * (kW / 4) + p / 4; }

#if defined(__AVX512F__)
// 16 accumulators + 8 nibble vectors of 32 registers. Four rows of B share each L1-resident chunk
// of A: with one (and 8 rows of A, measured), a call of 16 rows re-read A from L2 for every row
// of B and ran slower than before.
constexpr int kInt8RowsA = 4, kInt8RowsB = 4;
// 4 * kW bytes: a quarter of an int8 chunk's codes, or an eighth of its packed A.
struct VecU8 {
  __m512i v;
  static VecU8 load(const void* p) { return {_mm512_loadu_si512(p)}; }
  // The first `dwords` (< 16) dwords at p, zeros after; nothing past them is read.
  static VecU8 load_dwords(const void* p, int64_t dwords) {
    return {_mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << dwords) - 1), p)};
  }
};
inline VecU8 low_nibbles(VecU8 x) { return {_mm512_and_si512(x.v, _mm512_set1_epi8(0x0F))}; }
inline VecU8 high_nibbles(VecU8 x) { return {_mm512_and_si512(_mm512_srli_epi16(x.v, 4), _mm512_set1_epi8(0x0F))}; }
// kW int32 lanes (in int8 range) as kW bytes.
inline void store_int8(VecI32 q, int8_t* dst) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(q.v));
}
inline void transpose_segments(VecU8 (&z)[4]) {
  const __m512i t0 = _mm512_unpacklo_epi32(z[0].v, z[1].v), t1 = _mm512_unpackhi_epi32(z[0].v, z[1].v);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2].v, z[3].v), t3 = _mm512_unpackhi_epi32(z[2].v, z[3].v);
  z[0] = {_mm512_unpacklo_epi64(t0, t2)};
  z[1] = {_mm512_unpackhi_epi64(t0, t2)};
  z[2] = {_mm512_unpacklo_epi64(t1, t3)};
  z[3] = {_mm512_unpackhi_epi64(t1, t3)};
}
// start + per lane, the dot of its segment: codes lo[t] / hi[t] x A's vectors 2t / 2t + 1 at a.
inline VecI32 segment_dots(VecI32 start, const VecU8 (&lo)[4], const VecU8 (&hi)[4], const int8_t* a) {
  __m512i acc = start.v;
#pragma GCC unroll 4
  for (int t = 0; t < 4; ++t) {
    acc = _mm512_dpbusd_epi32(acc, lo[t].v, VecU8::load(a + (2 * t) * kCodeVectorBytes).v);
    acc = _mm512_dpbusd_epi32(acc, hi[t].v, VecU8::load(a + (2 * t + 1) * kCodeVectorBytes).v);
  }
  return {acc};
}
#else
constexpr int kInt8RowsA = 2, kInt8RowsB = 2;  // 4 accumulators + 8 nibble vectors of 16 registers
struct VecU8 {
  __m256i v;
  static VecU8 load(const void* p) { return {_mm256_loadu_si256(static_cast<const __m256i*>(p))}; }
  static VecU8 load_dwords(const void* p, int64_t dwords) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(dwords)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return {_mm256_maskload_epi32(static_cast<const int*>(p), mask)};
  }
};
inline VecU8 low_nibbles(VecU8 x) { return {_mm256_and_si256(x.v, _mm256_set1_epi8(0x0F))}; }
inline VecU8 high_nibbles(VecU8 x) { return {_mm256_and_si256(_mm256_srli_epi16(x.v, 4), _mm256_set1_epi8(0x0F))}; }
inline void store_int8(VecI32 q, int8_t* dst) {
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(q.v), _mm256_extracti128_si256(q.v, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packs_epi16(words, words));
}
inline void transpose_segments(VecU8 (&z)[4]) {
  const __m256i t0 = _mm256_unpacklo_epi32(z[0].v, z[1].v), t1 = _mm256_unpackhi_epi32(z[0].v, z[1].v);
  const __m256i t2 = _mm256_unpacklo_epi32(z[2].v, z[3].v), t3 = _mm256_unpackhi_epi32(z[2].v, z[3].v);
  z[0] = {_mm256_unpacklo_epi64(t0, t2)};
  z[1] = {_mm256_unpackhi_epi64(t0, t2)};
  z[2] = {_mm256_unpacklo_epi64(t1, t3)};
  z[3] = {_mm256_unpackhi_epi64(t1, t3)};
}
inline VecI32 segment_dots(VecI32 start, const VecU8 (&lo)[4], const VecU8 (&hi)[4], const int8_t* a) {
  __m256i pairs = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int t = 0; t < 4; ++t) {
    pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(lo[t].v, VecU8::load(a + (2 * t) * kCodeVectorBytes).v));
    pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(hi[t].v, VecU8::load(a + (2 * t + 1) * kCodeVectorBytes).v));
  }
  return {_mm256_add_epi32(start.v, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))};
}
#endif

// Lane scales of B's chunks: lane p takes the scale of its segment's block.
struct ChunkScales {
  int shift = 0;           // log2(block_size / kSegment)
  VecI32 index;            // lane p: its block, counted from the chunk's first
  explicit ChunkScales(int64_t block_size)
      : shift(std::countr_zero(static_cast<uint64_t>(block_size / kSegment))) {
    int32_t idx[kW];
    for (int64_t p = 0; p < kW; ++p) idx[p] = static_cast<int32_t>(segment_of_lane(p) >> shift);
    index = VecI32::load(idx);
  }
  // Chunk c of a row of B with `blocks` scales at `row`; 0 past the row's last block.
  VecF at(const float* row, int64_t blocks, int64_t c) const {
    const int64_t first = (c * kW) >> shift;
    return permute(VecF::load_partial(row + first, std::min<int64_t>(kW >> shift, blocks - first), 0.0f), index);
  }
};

// Quantises row `src` [K] of A: per block, scale = max|a| / 127 and q = round(a / scale); writes
// the int8 chunks in lane order (vector 2t + h, lane p, byte u: value 8t + 2u + h of segment
// segment_of_lane(p)), each lane's scale and zero-point offset, and the block terms.
void pack_row_int8(const QWeights& w, const float* src, int64_t row_values, int8_t* dst, float* block_scales,
                   float* block_terms, float* lane_scales, int32_t* lane_offsets) {
  for (int64_t b = 0; b < w.blocks; ++b) {
    VecF amax = VecF::splat(0.0f);
    for (int64_t i = b * w.block_size; i < (b + 1) * w.block_size; i += kW) amax = max(amax, abs(load_row(src, w.k, i)));
    block_scales[b] = reduce_max(amax) / 127.0f;
    block_terms[b] = 0.0f;
  }
  const int block_shift = std::countr_zero(static_cast<uint64_t>(w.block_size));
  const bool given_zp = w.zp_packed != nullptr || w.zp_float != nullptr;
  const int32_t zero_point = given_zp ? 0 : 1 << (w.bits - 1);
  for (int64_t c = 0; c < row_values / kInt8Chunk; ++c) {
    for (int64_t p = 0; p < kW; ++p) {
      const int64_t segment = c * kW + segment_of_lane(p), begin = segment * kSegment;
      const int64_t b = std::min(begin >> block_shift, w.blocks - 1);  // padding quantises zeros
      const bool real = begin < w.blocks * w.block_size;
      const float scale = real ? block_scales[b] : 0.0f;
      const VecF inverse = VecF::splat(scale > 0.0f ? 1.0f / scale : 0.0f);
      alignas(64) int8_t q[kSegment];
      int32_t sum = 0;
      for (int64_t i = 0; i < kSegment; i += kW) {
        const VecI32 rounded = to_int(load_row(src, w.k, begin + i) * inverse);
        store_int8(rounded, q + i);
        sum += static_cast<int32_t>(reduce_add(to_float(rounded)));  // small integers: exact
      }
      int8_t* chunk = dst + c * kInt8Chunk;
      for (int64_t i = 0; i < kSegment; ++i) {
        chunk[(2 * (i / 8) + (i & 1)) * kCodeVectorBytes + 4 * p + (i % 8) / 2] = q[i];
      }
      if (real) block_terms[b] += static_cast<float>(sum);
      lane_scales[c * kW + p] = scale;
      lane_offsets[c * kW + p] = -zero_point * sum;
    }
  }
  for (int64_t b = 0; b < w.blocks; ++b) block_terms[b] *= block_scales[b];
}

// Adds chunk c of a kRowsA x kRowsB tile to acc. codes[j] / scales[j]: row j of B's code bytes
// and scales; qa, a_scales, offsets: row 0 of A's packed values, lane scales and lane offsets at
// the chunk, the next rows a.row_values, and lanes, further.
template <int kRowsA, int kRowsB>
[[gnu::always_inline]] inline void int8_chunk(const QWeights& w, const uint8_t* const (&codes)[kRowsB],
                                              const float* const (&scales)[kRowsB], int64_t c, const int8_t* qa,
                                              const float* a_scales, const int32_t* offsets, int64_t lanes,
                                              const PackedA& a, const ChunkScales& chunk_scales,
                                              VecF (&acc)[kRowsA][kRowsB]) {
  const int64_t bytes_left = w.row_bytes() - c * kInt8ChunkBytes;
#pragma GCC unroll 4
  for (int j = 0; j < kRowsB; ++j) {
    VecU8 z[4];
    const uint8_t* chunk = codes[j] + c * kInt8ChunkBytes;
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const int64_t dwords = (bytes_left - i * kCodeVectorBytes) / 4;
      if (bytes_left >= kInt8ChunkBytes) z[i] = VecU8::load(chunk + i * kCodeVectorBytes);
      else z[i] = dwords > 0 ? VecU8::load_dwords(chunk + i * kCodeVectorBytes, std::min<int64_t>(dwords, kW)) : VecU8{};
    }
    transpose_segments(z);
    VecU8 lo[4], hi[4];
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) lo[t] = low_nibbles(z[t]), hi[t] = high_nibbles(z[t]);
    const VecF scale_b = chunk_scales.at(scales[j], w.blocks, c);
#pragma GCC unroll 8
    for (int r = 0; r < kRowsA; ++r) {
      const VecI32 dot = segment_dots(VecI32::load(offsets + r * lanes), lo, hi, qa + r * a.row_values);
      acc[r][j] = fmadd(to_float(dot), VecF::load(a_scales + r * lanes) * scale_b, acc[r][j]);
    }
  }
}

// y[r * ldy + j] = A row (r0 + r) . B row (n + j) for a kRowsA x kRowsB tile.
template <int kRowsA, int kRowsB>
void int8_tile(const QWeights& w, const PackedA& a, const ChunkScales& chunk_scales, int64_t r0, int64_t n, float* y,
               int64_t ldy) {
  // Later row tiles of A find this tile's codes in L1; the first one fetches them.
  const RowPrefetch<kRowsB> prefetch(w, n, r0 == 0);
  VecF acc[kRowsA][kRowsB];
#pragma GCC unroll 8
  for (int r = 0; r < kRowsA; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < kRowsB; ++j) acc[r][j] = VecF::splat(0.0f);
  }
  const int64_t lanes = a.row_values / kSegment;
  const uint8_t* codes[kRowsB];
  const float* scales[kRowsB];
#pragma GCC unroll 4
  for (int j = 0; j < kRowsB; ++j) {
    codes[j] = w.codes + (n + j) * w.row_bytes();
    scales[j] = w.scales + (n + j) * w.blocks;
  }
  for (int64_t c = 0; c < a.row_values / kInt8Chunk; ++c) {
    int8_chunk<kRowsA, kRowsB>(w, codes, scales, c, a.int8_values + r0 * a.row_values + c * kInt8Chunk,
                               a.lane_scales + r0 * lanes + c * kW, a.lane_offsets + r0 * lanes + c * kW, lanes, a,
                               chunk_scales, acc);
    for (int64_t line = 0; line < kInt8ChunkBytes / 64; ++line) prefetch.at(c * (kInt8ChunkBytes / 64) + line, 64);
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
  const ChunkScales chunk_scales(w.block_size);
  for_each_tile<kInt8RowsB>(n0, n1, [&]<int RB>(int64_t n) {
    for_each_tile<kInt8RowsA>(0, a.m, [&]<int RA>(int64_t r) {
      int8_tile<RA, RB>(w, a, chunk_scales, r, n, y + r * ldy + (n - n0), ldy);
    });
  });
}

}  // namespace
}  // namespace onnx_genai::simd
