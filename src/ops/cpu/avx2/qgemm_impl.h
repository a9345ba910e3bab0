// The QGemmKernels implementation over VecF (ops/cpu/avx2/vec_f32.h), compiled once per ISA:
// avx2/qgemm_avx2.cc (8 lanes) and avx512/qgemm_avx512.cc (16 lanes). This file holds the
// f32-activation path and the table; the int8 path is qgemm_int8_impl.h, shared pieces qgemm_lanes.h.
//
// Memory-access plan (kW = lanes, a chunk = 8 * kW packed values of A = 4 * kW code bytes):
//
//   gemv (M <= kGemvMaxRows)
//                  tiles of kGemvRows rows of B x up to 4 rows of A: each load of A serves the
//                  tile's B rows, each decoded code vector its A rows. Per chunk and row of B, kW
//                  code bytes at a time are zero-extended into int32 lanes; `& 0x0F` gives the low
//                  nibbles, `& 0xF0` 16 x the high ones (a mask, not a shift: shifts and int->f32
//                  conversions share a port), paired with the chunk's first half of A and its
//                  second half stored / 16. Codes are converted in registers and never stored.
//                  Partial dots take their block scale once per block (per chunk when blocks
//                  span chunks); zero points are applied once per row through the block sums of A:
//                    sum_k a_k (q_k - z) s = s (sum_k a_k q_k) - s z (sum_k a_k).
//                  B rows outermost: the later A tiles read a B tile's codes from L1, so B streams
//                  from memory once per call. Sums run in the same order whatever M is: a row's
//                  result is the same bits as when it runs alone.
//   gemm (larger M) per thread, B rows in panels of kPanelRows x kPanelDepth values, dequantised
//                  once into the workspace (in A's packed order, so no transposition) and read by
//                  every row of A: a kTileRowsA x kTileRowsB tile of dot products with K in the
//                  lanes, reduced across lanes once per panel.
//   Both prefetch the rows of B they read next (RowPrefetch, qgemm_lanes.h).
#pragma once

#include <algorithm>

#include "ops/cpu/avx2/qgemm_int8_impl.h"
#include "ops/cpu/avx2/qgemm_lanes.h"

namespace onnx_genai::simd {
namespace {

constexpr int64_t kPanelRows = 16;     // rows of B dequantised per panel
constexpr int64_t kPanelDepth = 4096;  // packed values per panel row: a panel is 256 KiB, next to A's slice in L2
// gemv tiles: kGemvRows rows of B (fixed: it decides how a row's columns reduce) x
// gemv_rows_a(mode) rows of A, as many as the accumulators (twice as many per chunk when blocks
// span chunks) and the A operands leave registers for.
#if defined(__AVX512F__)
constexpr int kGemvRows = 4;  // M = 1: 4 accumulators, 2 A loads per 8 FMAs
constexpr int gemv_rows_a(ScaleMode mode) { return mode == ScaleMode::kPerChunk ? 2 : 4; }
constexpr int kTileRowsA = 4, kTileRowsB = 4;  // 16 accumulators + 8 operands of 32 registers
#else
constexpr int kGemvRows = 2;
constexpr int gemv_rows_a(ScaleMode mode) { return mode == ScaleMode::kPerChunk ? 2 : 3; }
constexpr int kTileRowsA = 2, kTileRowsB = 4;  // 8 accumulators + 6 operands of 16 registers
#endif

// Packs row `src` [K] of A for the f32 path: 4-bit weights take the chunk order, its second half
// divided by CodeLayout<4>::kSecondScale; 8-bit the natural order; zeros past K; block sums for
// the zero-point term.
void pack_row_f32(const QWeights& w, const float* src, int64_t row_values, float* dst, float* block_sums) {
  for (int64_t b = 0; b < w.blocks; ++b) {
    VecF sum = VecF::splat(0.0f);
    for (int64_t i = b * w.block_size; i < (b + 1) * w.block_size; i += kW) sum = sum + load_row(src, w.k, i);
    block_sums[b] = reduce_add(sum);
  }
  if (w.bits == 8) {
    for (int64_t i = 0; i < row_values; i += kW) load_row(src, w.k, i).store(dst + i);
    return;
  }
  const VecF second_scale = VecF::splat(1.0f / CodeLayout<4>::kSecondScale);
  for (int64_t c = 0; c < row_values; c += kChunk) {
    for (int64_t i = 0; i < kChunk; i += 2 * kW) {
      VecF even, odd;
      deinterleave(load_row(src, w.k, c + i), load_row(src, w.k, c + i + kW), &even, &odd);
      even.store(dst + c + i / 2);
      (odd * second_scale).store(dst + c + kChunk / 2 + i / 2);
    }
  }
}

// Adds one chunk of kRowsA rows of A x kRows rows of B to acc. codes[j]: row j's code bytes of
// the chunk; scales[j]: row j's scale of the chunk's first block; a: the chunk of packed A, the
// next rows lda further. Each code vector is decoded once and applied to every row of A. Partial
// dots are summed in f32 and scaled once per block (per chunk when a block holds whole chunks).
// Every accumulator sees the same operations in the same order whatever kRowsA is, so a row's
// result does not depend on which rows share the tile.
template <int kBits, int kRowsA, int kRows, ScaleMode kMode>
[[gnu::always_inline]] inline void gemv_chunk(const uint8_t* const (&codes)[kRows], const float* const (&scales)[kRows],
                                              const float* a, int64_t lda, const LaneBlocks& blocks,
                                              VecF (&acc)[kRowsA][kRows]) {
  using L = CodeLayout<kBits>;
  VecF chunk_dot[kRowsA][kRows];
  if constexpr (kMode == ScaleMode::kPerChunk) {
#pragma GCC unroll 4
    for (int r = 0; r < kRowsA; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < kRows; ++j) chunk_dot[r][j] = VecF::splat(0.0f);
    }
  }
#pragma GCC unroll 8
  for (int64_t g = 0; g < L::kGroups; ++g) {
    VecF a1[kRowsA], a2[kRowsA];
#pragma GCC unroll 4
    for (int r = 0; r < kRowsA; ++r) {
      a1[r] = VecF::load(a + r * lda + L::first_at(g));
      a2[r] = kBits == 4 ? VecF::load(a + r * lda + L::second_at(g)) : a1[r];
    }
    const int64_t block = (g * L::kGroupValues) >> blocks.block_shift;
#pragma GCC unroll 4
    for (int j = 0; j < kRows; ++j) {
      VecF q1, q2;
      L::decode(codes[j], g, &q1, &q2);
      if constexpr (kMode == ScaleMode::kPerChunk) {
#pragma GCC unroll 4
        for (int r = 0; r < kRowsA; ++r) {
          chunk_dot[r][j] = fmadd(q1, a1[r], chunk_dot[r][j]);
          if constexpr (kBits == 4) chunk_dot[r][j] = fmadd(q2, a2[r], chunk_dot[r][j]);
        }
      } else {
        // Scaling the partial dot rather than the codes costs a multiply per row of A, not per
        // row of B, but keeps M = 1 as fast (and its results) as a GEMV of one row.
        const VecF scale = blocks.spread<kMode>(scales[j] + block);
#pragma GCC unroll 4
        for (int r = 0; r < kRowsA; ++r) {
          const VecF dot = kBits == 4 ? fmadd(q2, a2[r], q1 * a1[r]) : q1 * a1[r];
          acc[r][j] = fmadd(dot, scale, acc[r][j]);
        }
      }
    }
  }
  if constexpr (kMode == ScaleMode::kPerChunk) {
#pragma GCC unroll 4
    for (int j = 0; j < kRows; ++j) {
      const VecF scale = VecF::splat(*scales[j]);
#pragma GCC unroll 4
      for (int r = 0; r < kRowsA; ++r) acc[r][j] = fmadd(chunk_dot[r][j], scale, acc[r][j]);
    }
  }
}

// A kRowsA x kRows tile, f32 activations: y[r * ldy + j] = A row (r0 + r) . B row (n + j).
template <int kBits, int kRowsA, int kRows, ScaleMode kMode>
void gemv_tile(const QWeights& w, const PackedA& a, const LaneBlocks& blocks, int64_t r0, int64_t n, float* y,
               int64_t ldy) {
  using Chunks = RowChunks<kBits>;
  const Chunks chunks(w);
  VecF acc[kRowsA][kRows];
#pragma GCC unroll 4
  for (int r = 0; r < kRowsA; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < kRows; ++j) acc[r][j] = VecF::splat(0.0f);
  }
  const uint8_t* codes[kRows];
  const float* row_scales[kRows];
  const float* scales[kRows];
#pragma GCC unroll 4
  for (int j = 0; j < kRows; ++j) {
    codes[j] = w.codes + (n + j) * w.row_bytes();
    row_scales[j] = w.scales + (n + j) * w.blocks;
  }
  const float* rows = a.values + r0 * a.row_values;
  // Later row tiles of A find this tile's codes in L1; the first one fetches them.
  const RowPrefetch<kRows> prefetch(w, n, r0 == 0);
  for (int64_t c = 0; c < chunks.full; ++c) {
    const int64_t b0 = chunks.first_block(c);
#pragma GCC unroll 4
    for (int j = 0; j < kRows; ++j) scales[j] = row_scales[j] + b0;
    gemv_chunk<kBits, kRowsA, kRows, kMode>(codes, scales, rows + c * kChunk, a.row_values, blocks, acc);
    prefetch.at(c, Chunks::kBytes);
#pragma GCC unroll 4
    for (int j = 0; j < kRows; ++j) codes[j] += Chunks::kBytes;
  }
  if (chunks.ragged) {
    typename Chunks::Padded pads[kRows];
    for (int j = 0; j < kRows; ++j) {
      codes[j] = chunks.pad_last(w, n + j, pads[j]).codes;
      scales[j] = pads[j].scales;
    }
    gemv_chunk<kBits, kRowsA, kRows, kMode>(codes, scales, rows + chunks.full * kChunk, a.row_values, blocks, acc);
  }
  for (int r = 0; r < kRowsA; ++r) {
    float dots[kRows];
    reduce_row(acc[r], dots);
    for (int j = 0; j < kRows; ++j) y[r * ldy + j] = dots[j] - zero_point_term(w, n + j, a.block_terms + (r0 + r) * w.blocks);
  }
}

void gemv(const QWeights& w, const PackedA& a, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  const auto run = [&]<int kBits>() {
    const LaneBlocks blocks(w.block_size, CodeLayout<kBits>::kValuesPerByte);
    with_scale_mode<CodeLayout<kBits>::kValuesPerByte>(w.block_size, [&]<ScaleMode kMode>() {
      // B rows outermost: a tile's codes stay in L1 while every row tile of A passes.
      for_each_tile<kGemvRows>(n0, n1, [&]<int R>(int64_t n) {
        for_each_tile<gemv_rows_a(kMode)>(0, a.m, [&]<int RA>(int64_t r) {
          gemv_tile<kBits, RA, R, kMode>(w, a, blocks, r, n, y + r * ldy + (n - n0), ldy);
        });
      });
    });
  };
  if (w.bits == 4) run.template operator()<4>();
  else run.template operator()<8>();
}

// Dequantises rows [n, n + rows) of B over packed positions [k0, k0 + depth) (whole chunks) into
// panel[j * depth + i], in A's packed order: q * scale - zero point * scale (second halves of
// 4-bit chunks times kSecondScale, matching their A values).
template <int kBits, ScaleMode kMode>
void dequantize_panel(const QWeights& w, const LaneBlocks& blocks, int64_t n, int64_t rows, int64_t k0,
                      int64_t depth, float* panel) {
  using L = CodeLayout<kBits>;
  using Chunks = RowChunks<kBits>;
  const Chunks chunks(w);
  // This slice's scales and zero point x scale (for the second halves: x kSecondScale too), zero
  // past the row's last block.
  constexpr int64_t kSliceBlocks = kPanelDepth / 16 + 2 * kW;
  float scales[kSliceBlocks], offsets[kSliceBlocks], second_offsets[kSliceBlocks];
  typename Chunks::Padded pad;
  const int64_t b0 = chunks.first_block(k0 / kChunk), count = std::min(w.blocks - b0, kSliceBlocks - kW);
  const bool given_zp = w.zp_packed != nullptr || w.zp_float != nullptr;
  const float default_zp = static_cast<float>(1 << (w.bits - 1));
  std::fill(scales + count, scales + kSliceBlocks, 0.0f);
  std::fill(offsets + count, offsets + kSliceBlocks, 0.0f);
  std::fill(second_offsets + count, second_offsets + kSliceBlocks, 0.0f);
  for (int64_t j = 0; j < rows; ++j) {
    std::copy_n(w.scales + (n + j) * w.blocks + b0, count, scales);
    for (int64_t b = 0; b < count; ++b) {
      offsets[b] = (given_zp ? w.zero_point(n + j, b0 + b) : default_zp) * scales[b];
      second_offsets[b] = offsets[b] * L::kSecondScale;
    }
    const uint8_t* row = w.codes + (n + j) * w.row_bytes();
    const RowPrefetch<1> prefetch(w, n + j, true);  // the next row's slice
    for (int64_t c = k0 / kChunk; c < (k0 + depth) / kChunk; ++c) {
      prefetch.at(c, Chunks::kBytes);
      const uint8_t* codes = c < chunks.full ? row + c * Chunks::kBytes : chunks.pad_last(w, n + j, pad).codes;
      float* out = panel + j * depth + (c * kChunk - k0);
      const int64_t chunk_block = chunks.first_block(c) - b0;
#pragma GCC unroll 8
      for (int64_t g = 0; g < L::kGroups; ++g) {
        const int64_t block = chunk_block + ((g * L::kGroupValues) >> chunks.block_shift);
        const VecF s = blocks.spread<kMode>(scales + block);
        VecF q1, q2;
        L::decode(codes, g, &q1, &q2);
        fmsub(q1, s, blocks.spread<kMode>(offsets + block)).store(out + L::first_at(g));
        if constexpr (kBits == 4) fmsub(q2, s, blocks.spread<kMode>(second_offsets + block)).store(out + L::second_at(g));
      }
    }
  }
}

// y[r * ldy + j] (+)= a row r . panel row j over `depth` values, for a kRowsA x kRowsB tile.
template <int kRowsA, int kRowsB>
void f32_tile(const float* a, int64_t lda, const float* panel, int64_t depth, float* y, int64_t ldy, bool accumulate) {
  VecF acc[kRowsA][kRowsB];
#pragma GCC unroll 4
  for (int r = 0; r < kRowsA; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < kRowsB; ++j) acc[r][j] = VecF::splat(0.0f);
  }
  for (int64_t i = 0; i < depth; i += kW) {
    VecF b[kRowsB];
#pragma GCC unroll 4
    for (int j = 0; j < kRowsB; ++j) b[j] = VecF::load(panel + j * depth + i);
#pragma GCC unroll 4
    for (int r = 0; r < kRowsA; ++r) {
      const VecF av = VecF::load(a + r * lda + i);
#pragma GCC unroll 4
      for (int j = 0; j < kRowsB; ++j) acc[r][j] = fmadd(av, b[j], acc[r][j]);
    }
  }
  for (int r = 0; r < kRowsA; ++r) {
    float sums[kRowsB];
    reduce_row(acc[r], sums);
    for (int j = 0; j < kRowsB; ++j) y[r * ldy + j] = accumulate ? y[r * ldy + j] + sums[j] : sums[j];
  }
}

template <int kBits, ScaleMode kMode>
void gemm_bits(const QWeights& w, const PackedA& a, int64_t n0, int64_t n1, float* panel, float* y, int64_t ldy) {
  const LaneBlocks blocks(w.block_size, CodeLayout<kBits>::kValuesPerByte);
  // Depth slices outermost: A's slice stays in L2 while every panel of this thread's rows passes.
  for (int64_t k0 = 0; k0 < a.row_values; k0 += kPanelDepth) {
    const int64_t depth = std::min(kPanelDepth, a.row_values - k0);
    for (int64_t p = n0; p < n1; p += kPanelRows) {
      const int64_t rows = std::min(kPanelRows, n1 - p);
      dequantize_panel<kBits, kMode>(w, blocks, p, rows, k0, depth, panel);
      for_each_tile<kTileRowsA>(0, a.m, [&]<int RA>(int64_t r) {
        for_each_tile<kTileRowsB>(0, rows, [&]<int RB>(int64_t j) {
          f32_tile<RA, RB>(a.values + r * a.row_values + k0, a.row_values, panel + j * depth, depth,
                           y + r * ldy + (p - n0) + j, ldy, k0 > 0);
        });
      });
    }
  }
}

void gemm(const QWeights& w, const PackedA& a, int64_t n0, int64_t n1, float* panel, float* y, int64_t ldy) {
  const auto run = [&]<int kBits>() {
    with_scale_mode<CodeLayout<kBits>::kValuesPerByte>(
        w.block_size, [&]<ScaleMode kMode>() { gemm_bits<kBits, kMode>(w, a, n0, n1, panel, y, ldy); });
  };
  if (w.bits == 4) run.template operator()<4>();
  else run.template operator()<8>();
}

void pack_a(const QWeights& w, const float* a, bool int8, const PackedA& out) {
  for (int64_t r = 0; r < out.m; ++r) {
    const float* src = a + r * w.k;
    if (int8) {
      pack_row_int8(w, src, out.int8_values + r * out.row_values, out.block_scales + r * w.blocks,
                    out.block_sums + r * w.blocks);
    } else {
      pack_row_f32(w, src, out.row_values, out.values + r * out.row_values, out.block_terms + r * w.blocks);
    }
  }
}

// Instantiated per ISA (compile time stays a few seconds): gemv for bits {4, 8} x the scale modes
// a bit width allows x 1..kGemvRows rows of B x 1..gemv_rows_a(mode) rows of A; gemm's
// dequantize_panel for bits x modes and f32_tile for 1..kTileRowsA x 1..kTileRowsB; gemm_int8 for
// 1..kInt8RowsA rows x 1..kInt8PanelsMany (one row: kInt8PanelsOne) panels.
constexpr QGemmKernels kQGemmKernels{.chunk = kChunk,
                                     .panel_floats = kPanelRows * kPanelDepth,
                                     .pack_a = pack_a,
                                     .gemv = gemv,
                                     .gemm = gemm,
                                     .gemm_int8 = gemm_int8};

}  // namespace
}  // namespace onnx_genai::simd
