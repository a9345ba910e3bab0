// Inner loops of MatMulNBits (ops/schema/quantized_matmul.h), one table per instruction set:
// qgemm_impl.h compiled for AVX-512 (avx512/qgemm_avx512.cc) and AVX2 (avx2/qgemm_avx2.cc), and
// plain loops (cpu/quantized_matmul.cc).
//
// A call runs in two steps: pack_a writes A once into the workspace in the order the table's
// loops read it (PackedA), then gemv / gemm compute rows [n0, n1) of B, or gemm_int8 panels of
// them (Int4Panels, below), against every row of A. On the f32 path, packing is what lets 4-bit codes be used as they lie in memory: a byte holds the codes
// of elements 2p (low nibble) and 2p + 1 (high nibble), so each chunk of `chunk` packed values
// holds the chunk's even-indexed elements first, then its odd-indexed ones, and a load of code
// bytes splits into two vectors (low nibbles, high nibbles) that line up with two loads of A.
#pragma once

#include <cstdint>

namespace onnx_genai {

// One quantised weight matrix as the kernels read it. Scales and float zero points are f32
// here (16-bit inputs are widened into the workspace first).
struct QWeights {
  const uint8_t* codes = nullptr;  // [N = rows, blocks, block_bytes]
  const float* scales = nullptr;   // [N * blocks]
  const uint8_t* zp_packed = nullptr;  // [N, zp_row_bytes] or null
  const float* zp_float = nullptr;     // [N * blocks] or null; both null: 2^(bits-1)
  int64_t rows = 0, k = 0, bits = 4, block_size = 0, blocks = 0, block_bytes = 0, zp_row_bytes = 0;

  int64_t row_bytes() const { return blocks * block_bytes; }
  float zero_point(int64_t n, int64_t b) const {
    if (zp_float != nullptr) return zp_float[n * blocks + b];
    if (zp_packed == nullptr) return static_cast<float>(1 << (bits - 1));
    const uint8_t* row = zp_packed + n * zp_row_bytes;
    if (bits == 8) return static_cast<float>(row[b]);
    if (bits == 4) return static_cast<float>((row[b / 2] >> (4 * (b & 1))) & 0x0F);
    return static_cast<float>((row[b / 4] >> (2 * (b & 3))) & 0x03);  // 2-bit
  }
};

// The int8 path's B (accuracy_level >= 4, 4-bit weights): the codes reordered once, at load, into
// panels of kPanelCols rows of B (output columns) so that one int32 lane of a SIMD dot is one
// output column, as int4_panels.h writes them:
//   codes  [panels, groups, kPanelCols, 4 bytes], groups = blocks * block_size / 8: the 4 bytes of
//          column j in group g hold the codes of elements 8g..8g+3 in their low nibbles and of
//          8g+4..8g+7 in their high nibbles, so `& 0x0F` and `>> 4 & 0x0F` of one 64-byte load give
//          16 columns x 4 elements each, the operand of a 4-way byte dot;
//   scales [panels, blocks, kPanelCols];
//   zero_scaled [panels, blocks, kPanelCols]: scale x zero point, where B has zero points (null:
//          the default 8, folded into the integer dots).
// Columns past N are zero codes and zero scales.
constexpr int64_t kPanelCols = 16;
constexpr int64_t kPanelGroupValues = 8;                // elements of one column per group
constexpr int64_t kPanelGroupBytes = kPanelCols * 4;    // one group of one panel

struct Int4Panels {
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  const float* zero_scaled = nullptr;
  int64_t n = 0, panels = 0, blocks = 0, block_size = 0;

  int64_t groups_per_block() const { return block_size / kPanelGroupValues; }
  int64_t panel_code_bytes() const { return blocks * groups_per_block() * kPanelGroupBytes; }
  int64_t panel_floats() const { return blocks * kPanelCols; }
};

// A as the GEMMs read it, [m, row_values], zeros past K. f32 path: `values`, row_values =
// blocks * block_size rounded up to a whole chunk (4-bit weights: in chunk order, see above, and
// scaled as the table's loops want it; 8-bit: natural order). int8 path: each block of A quantised
// symmetrically to int8 (scale max|a| / 127), `int8_values` in natural order, row_values =
// blocks * block_size.
struct PackedA {
  float* values = nullptr;        // f32 path: [m, row_values]
  int8_t* int8_values = nullptr;  // int8 path: [m, row_values]
  float* block_scales = nullptr;  // int8 path: [m, blocks], the scale of each block's int8 values
  int32_t* block_sums = nullptr;  // int8 path: [m, blocks], the sum of each block's int8 values
  // f32 path: sum of A over block b. Times the block's zero point and weight scale, it is the
  // term the zero points subtract from a dot.
  float* block_terms = nullptr;   // f32 path: [m, blocks]
  int64_t m = 0, row_values = 0;
};

struct QGemmKernels {
  int64_t chunk = 0;        // packed values per chunk (the unit of reordering and of padding)
  int64_t panel_floats = 0; // workspace floats `gemm` needs per concurrent call
  // Packs `m` rows of A [m, K] into `out` (pointers and row_values set by the caller).
  void (*pack_a)(const QWeights& w, const float* a, bool int8, const PackedA& out) = nullptr;
  // f32 activations, m <= kGemvMaxRows: y[r * ldy + n - n0] = sum_k A[r][k] * B[n][k] for n in
  // [n0, n1), codes decoded in registers once per tile of rows of A; a row's result is the same
  // bits whatever m is.
  void (*gemv)(const QWeights& w, const PackedA& a, int64_t n0, int64_t n1, float* y, int64_t ldy) = nullptr;
  // f32 activations, any m: y[r * ldy + n - n0] for every row r; `panel` holds panel_floats.
  void (*gemm)(const QWeights& w, const PackedA& a, int64_t n0, int64_t n1, float* panel, float* y,
               int64_t ldy) = nullptr;
  // int8 activations (4-bit weights as Int4Panels), any m: y[r * ldy + n - 16 * p0] for the
  // columns n < b.n of panels [p0, p1); a row's result is the same bits whatever m is and
  // whichever panels the call takes.
  void (*gemm_int8)(const Int4Panels& b, const PackedA& a, int64_t p0, int64_t p1, float* y, int64_t ldy) = nullptr;
};

// The most rows of A `gemv` takes. Above it the panels of `gemm` are cheaper: they dequantise
// each weight once, where gemv decodes it again for every tile of 4 rows of A.
constexpr int64_t kGemvMaxRows = 8;

// Values per packed row of A (PackedA::row_values) under a table with chunk `chunk`.
inline int64_t packed_row_values(int64_t blocks, int64_t block_size, int64_t chunk) {
  return (blocks * block_size + chunk - 1) / chunk * chunk;
}

namespace scalar { const QGemmKernels& qgemm_kernels(); }
namespace avx2 { const QGemmKernels& qgemm_kernels(); }
namespace avx512 { const QGemmKernels& qgemm_kernels(); }

}  // namespace onnx_genai
