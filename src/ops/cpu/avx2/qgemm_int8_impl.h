// The int8 path of MatMulNBits (accuracy_level >= 4, 4-bit weights), compiled per ISA with
// qgemm_impl.h: A is quantised once per call, per block of B's block_size, to int8 with scale
// max|a| / 127, and every dot product runs on bytes against B's column panels (Int4Panels in
// qgemm_kernels.h, reordered once at load):
//
//   AVX-512 VNNI  vpdpbusd: 16 columns x 4 elements per instruction, unsigned codes x signed A
//   AVX2          vpmaddubsw on both nibble halves added in int16 (at most 2 * 4 * 15 * 127 =
//                 15240: no saturation), then vpmaddwd into 8 int32 columns; a panel is two vectors
//
// Memory-access plan. One int32 lane is one output column, so sums never cross lanes: per group
// of 8 elements a panel is one 64-byte load split into low / high nibbles, and each row of A
// contributes two broadcast dwords (elements 8g..8g+3 and 8g+4..8g+7). Integer sums run per
// block (the default zero point 8 folded in as a start of -8 x the block's sum of A), then
// convert to f32 once and take A's block scale times the panel's 16 column scales. A tile is
// kInt8RowsA rows of A x kInt8PanelsMany panels (one row: kInt8PanelsOne); every code vector is unpacked once per tile and serves its
// rows. Rows of A are taken kRowBatch at a time (their int8 values stay in L2) while the panels
// stream past; a panel's codes stay in L1 / L2 across the batch's row tiles. Each output's sums run
// in the same order whatever the tile or the call, so a row's result is the same bits alone as in
// a batch, and the same whichever thread takes its panel.
#pragma once

#include "ops/cpu/avx2/qgemm_lanes.h"

namespace onnx_genai::simd {
namespace {

constexpr int64_t kHalves = kPanelCols / kW;  // vectors per panel of int32 columns
constexpr int64_t kRowBatch = 64;             // rows of A per pass over the panels

#if defined(__AVX512F__)
// 16 int32 + 8 f32 accumulators of 32 registers at 4 x 2; one row reads 4 panels (8 chains of
// dependent vpdpbusd, enough to hide their latency).
constexpr int kInt8RowsA = 4, kInt8PanelsMany = 2, kInt8PanelsOne = 4;
inline VecI32 load_group(const uint8_t* p) { return {_mm512_loadu_si512(p)}; }
inline VecI32 low_nibbles(VecI32 x) { return {_mm512_and_si512(x.v, _mm512_set1_epi8(0x0F))}; }
inline VecI32 high_nibbles(VecI32 x) { return {_mm512_and_si512(_mm512_srli_epi16(x.v, 4), _mm512_set1_epi8(0x0F))}; }
// Integer sums per (row, panel): one tile of a single row keeps its low- and high-nibble dots in
// two accumulators, so its few chains of dependent vpdpbusd still overlap (integer sums: the
// split does not change a result).
template <int kRows>
constexpr int kDotSplit = kRows == 1 ? 2 : 1;
// acc[0] (+ acc[1]) + per column, the dots of its 4 + 4 codes with A's dwords lo_a / hi_a.
template <int kSplit>
inline void group_dot(VecI32 (&acc)[kSplit], VecI32 lo, VecI32 hi, int32_t lo_a, int32_t hi_a) {
  acc[0] = {_mm512_dpbusd_epi32(acc[0].v, lo.v, _mm512_set1_epi32(lo_a))};
  acc[kSplit - 1] = {_mm512_dpbusd_epi32(acc[kSplit - 1].v, hi.v, _mm512_set1_epi32(hi_a))};
}
inline void store_int8(VecI32 q, int8_t* dst) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(q.v));
}
#else
constexpr int kInt8RowsA = 2, kInt8PanelsMany = 1, kInt8PanelsOne = 1;  // 16 registers
inline VecI32 load_group(const uint8_t* p) { return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))}; }
inline VecI32 low_nibbles(VecI32 x) { return {_mm256_and_si256(x.v, _mm256_set1_epi8(0x0F))}; }
inline VecI32 high_nibbles(VecI32 x) { return {_mm256_and_si256(_mm256_srli_epi16(x.v, 4), _mm256_set1_epi8(0x0F))}; }
template <int kRows>
constexpr int kDotSplit = 1;  // the int16 pair sums already join both halves
template <int kSplit>
inline void group_dot(VecI32 (&acc)[kSplit], VecI32 lo, VecI32 hi, int32_t lo_a, int32_t hi_a) {
  const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo.v, _mm256_set1_epi32(lo_a)),
                                         _mm256_maddubs_epi16(hi.v, _mm256_set1_epi32(hi_a)));
  acc[0] = {_mm256_add_epi32(acc[0].v, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))};
}
inline void store_int8(VecI32 q, int8_t* dst) {
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(q.v), _mm256_extracti128_si256(q.v, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packs_epi16(words, words));
}
#endif

inline int32_t load_dword(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Quantises row `src` [K] of A: per block, scale = max|a| / 127 and q = round(a / scale), in
// natural order, zeros past K; each block's scale and sum of its int8 values.
void pack_row_int8(const QWeights& w, const float* src, int8_t* dst, float* block_scales, int32_t* block_sums) {
  for (int64_t b = 0; b < w.blocks; ++b) {
    const int64_t begin = b * w.block_size;
    VecF amax = VecF::splat(0.0f);
    for (int64_t i = begin; i < begin + w.block_size; i += kW) amax = max(amax, abs(load_row(src, w.k, i)));
    const float scale = reduce_max(amax) / 127.0f;
    const VecF inverse = VecF::splat(scale > 0.0f ? 1.0f / scale : 0.0f);
    int32_t sum = 0;
    for (int64_t i = begin; i < begin + w.block_size; i += kW) {
      const VecI32 rounded = to_int(load_row(src, w.k, i) * inverse);
      store_int8(rounded, dst + i);
      sum += static_cast<int32_t>(reduce_add(to_float(rounded)));  // small integers: exact
    }
    block_scales[b] = scale;
    block_sums[b] = sum;
  }
}

// y[r * ldy + c] for rows [r0, r0 + kRows) of A and the columns of panels [p, p + kCount).
template <int kRows, int kCount>
void int8_tile(const Int4Panels& b, const PackedA& a, int64_t r0, int64_t p, float* y, int64_t ldy) {
  const int64_t groups = b.groups_per_block();
  const bool default_zp = b.zero_scaled == nullptr;
  VecF acc[kRows][kCount][kHalves];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < kCount; ++q) {
#pragma GCC unroll 2
      for (int h = 0; h < kHalves; ++h) acc[r][q][h] = VecF::splat(0.0f);
    }
  }
  const uint8_t* codes = b.codes + p * b.panel_code_bytes();
  for (int64_t blk = 0; blk < b.blocks; ++blk) {
    constexpr int kSplit = kDotSplit<kRows>;
    VecI32 dot[kRows][kCount][kHalves][kSplit];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const int32_t start = default_zp ? -8 * a.block_sums[(r0 + r) * b.blocks + blk] : 0;
#pragma GCC unroll 4
      for (int q = 0; q < kCount; ++q) {
#pragma GCC unroll 2
        for (int h = 0; h < kHalves; ++h) {
          dot[r][q][h][0] = VecI32::splat(start);
          if constexpr (kSplit == 2) dot[r][q][h][1] = VecI32::splat(0);
        }
      }
    }
    for (int64_t g = blk * groups; g < (blk + 1) * groups; ++g) {
      VecI32 lo[kCount][kHalves], hi[kCount][kHalves];
#pragma GCC unroll 4
      for (int q = 0; q < kCount; ++q) {
#pragma GCC unroll 2
        for (int h = 0; h < kHalves; ++h) {
          const VecI32 z = load_group(codes + q * b.panel_code_bytes() + g * kPanelGroupBytes + h * (kPanelGroupBytes / kHalves));
          lo[q][h] = low_nibbles(z);
          hi[q][h] = high_nibbles(z);
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const int8_t* qa = a.int8_values + (r0 + r) * a.row_values + g * kPanelGroupValues;
        const int32_t lo_a = load_dword(qa), hi_a = load_dword(qa + 4);
#pragma GCC unroll 4
        for (int q = 0; q < kCount; ++q) {
#pragma GCC unroll 2
          for (int h = 0; h < kHalves; ++h) group_dot(dot[r][q][h], lo[q][h], hi[q][h], lo_a, hi_a);
        }
      }
    }
#pragma GCC unroll 4
    for (int q = 0; q < kCount; ++q) {
      const int64_t at = ((p + q) * b.blocks + blk) * kPanelCols;
#pragma GCC unroll 2
      for (int h = 0; h < kHalves; ++h) {
        const VecF scale_b = VecF::load(b.scales + at + h * kW);
#pragma GCC unroll 4
        for (int r = 0; r < kRows; ++r) {
          const float scale_a = a.block_scales[(r0 + r) * b.blocks + blk];
          VecI32 sum = dot[r][q][h][0];
          if constexpr (kSplit == 2) sum = sum + dot[r][q][h][1];
          acc[r][q][h] = fmadd(to_float(sum), scale_b * VecF::splat(scale_a), acc[r][q][h]);
          if (!default_zp) {
            const float term = scale_a * static_cast<float>(a.block_sums[(r0 + r) * b.blocks + blk]);
            acc[r][q][h] = acc[r][q][h] - VecF::load(b.zero_scaled + at + h * kW) * VecF::splat(term);
          }
        }
      }
    }
  }
  for (int q = 0; q < kCount; ++q) {
    const int64_t cols = std::min<int64_t>(kPanelCols, b.n - (p + q) * kPanelCols);
    for (int r = 0; r < kRows; ++r) {
      float* out = y + r * ldy + q * kPanelCols;
      for (int h = 0; h < kHalves; ++h) {
        const int64_t left = cols - h * kW;
        if (left >= kW) acc[r][q][h].store(out + h * kW);
        else if (left > 0) acc[r][q][h].store_partial(out + h * kW, left);
      }
    }
  }
}

void gemm_int8(const Int4Panels& b, const PackedA& a, int64_t p0, int64_t p1, float* y, int64_t ldy) {
  for (int64_t r_batch = 0; r_batch < a.m; r_batch += kRowBatch) {
    const int64_t r_end = std::min(a.m, r_batch + kRowBatch);
    if (r_end - r_batch == 1) {
      for_each_tile<kInt8PanelsOne>(p0, p1, [&]<int P>(int64_t p) {
        int8_tile<1, P>(b, a, r_batch, p, y + r_batch * ldy + (p - p0) * kPanelCols, ldy);
      });
      continue;
    }
    for_each_tile<kInt8PanelsMany>(p0, p1, [&]<int P>(int64_t p) {
      for_each_tile<kInt8RowsA>(r_batch, r_end, [&]<int R>(int64_t r) {
        int8_tile<R, P>(b, a, r, p, y + r * ldy + (p - p0) * kPanelCols, ldy);
      });
    });
  }
}

}  // namespace
}  // namespace onnx_genai::simd
