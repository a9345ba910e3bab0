// What the MatMulNBits SIMD kernels (qgemm_impl.h, qgemm_int8_impl.h) share: the chunk geometry,
// decoding code bytes, spreading per-block scales over lanes, the ragged last chunk, tile
// dispatch and the zero-point term. Compiled per ISA like vec_f32.h; anonymous namespace.
#pragma once

#include <algorithm>
#include <bit>
#include <cstring>

#include "ops/cpu/avx2/qgemm_kernels.h"
#include "ops/cpu/avx2/vec_f32.h"

namespace onnx_genai::simd {
namespace {

constexpr int64_t kW = VecF::kWidth;
constexpr int64_t kChunk = 8 * kW;  // packed values per chunk

// The code bytes of one chunk of one row of B.
template <int kBits>
struct CodeLayout {
  static constexpr int64_t kValuesPerByte = 8 / kBits;
  static constexpr int64_t kChunkBytes = kChunk / kValuesPerByte;
  static constexpr int64_t kGroups = kChunkBytes / kW;  // vectors of kW code bytes per chunk
  static constexpr int64_t kGroupValues = kW * kValuesPerByte;
  // decode()'s second vector holds 16 x the high-nibble codes: masking with 0xF0 instead of
  // shifting keeps the conversion off the port the int-to-float conversions need. The A values
  // paired with it are stored divided by 16 (exact: a power of two).
  static constexpr float kSecondScale = 16.0f;

  // The f32 codes of group g, in A's packed order: one vector for 8-bit codes (values
  // [g * kW, g * kW + kW) of the chunk), two for 4-bit (low nibbles: values g * kW + l of the
  // chunk's first half; 16 x high nibbles: the same lanes of its second half).
  static void decode(const uint8_t* chunk_codes, int64_t g, VecF* first, VecF* second) {
    const VecI32 bytes = VecI32::load_u8(chunk_codes + g * kW);
    if constexpr (kBits == 4) {
      *first = to_float(bytes & VecI32::splat(0x0F));
      *second = to_float(bytes & VecI32::splat(0xF0));
    } else {
      *first = to_float(bytes);
    }
  }
  // Offset in the packed chunk of the A values that pair with decode()'s first / second vector.
  static constexpr int64_t first_at(int64_t g) { return g * kW; }
  static constexpr int64_t second_at(int64_t g) { return kChunk / 2 + g * kW; }
};

// Splits 2 * kW consecutive values (v0, then v1) into their even- and odd-indexed ones: the
// chunk order of packed A.
inline void deinterleave(VecF v0, VecF v1, VecF* even, VecF* odd) {
#if defined(__AVX512F__)
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  *even = {_mm512_permutex2var_ps(v0.v, evens, v1.v)};
  *odd = {_mm512_permutex2var_ps(v0.v, _mm512_add_epi32(evens, _mm512_set1_epi32(1)), v1.v)};
#else
  // Within each vector: evens to the low half, odds to the high half; then halves regrouped.
  const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256 a = _mm256_permutevar8x32_ps(v0.v, split), b = _mm256_permutevar8x32_ps(v1.v, split);
  *even = {_mm256_permute2f128_ps(a, b, 0x20)};
  *odd = {_mm256_permute2f128_ps(a, b, 0x31)};
#endif
}

// Values [i, i + kW) of a row of `k` values, zeros past its end.
inline VecF load_row(const float* row, int64_t k, int64_t i) {
  return i + kW <= k ? VecF::load(row + i) : VecF::load_partial(row + i, std::max<int64_t>(0, k - i), 0.0f);
}

// How a vector's lanes map to blocks, which decides how per-block scales reach them:
//   kPerChunk  the whole chunk lies in one block: one broadcast scale per chunk;
//   kPerVector each vector lies in one block: one broadcast per vector;
//   kPerLane   a vector spans several blocks: their scales spread over the lanes by a permute.
enum class ScaleMode { kPerChunk, kPerVector, kPerLane };

struct LaneBlocks {
  int block_shift = 0;  // log2(block_size)
  int64_t count = 1;    // kPerLane: blocks per vector
  VecI32 index;         // kPerLane: lane l takes block l / (lanes per block)

  // `lane_values`: values of the row behind one lane.
  LaneBlocks(int64_t block_size, int64_t lane_values)
      : block_shift(std::countr_zero(static_cast<uint64_t>(block_size))) {
    const int64_t lanes_per_block = std::max<int64_t>(1, block_size / lane_values);
    int32_t idx[kW];
    for (int64_t l = 0; l < kW; ++l) idx[l] = static_cast<int32_t>(l / lanes_per_block);
    index = VecI32::load(idx);
    count = lanes_per_block >= kW ? 1 : kW / lanes_per_block;
  }
  // Lane scales of a vector whose first lane is in the block of `scales[0]`.
  template <ScaleMode kMode>
  VecF spread(const float* scales) const {
    if constexpr (kMode == ScaleMode::kPerLane) return permute(VecF::load_partial(scales, count, 0.0f), index);
    else return VecF::splat(*scales);
  }
};

// Calls f.template operator()<kMode>() for the mode of a row with `block_size` whose vectors
// cover kW * kLaneValues values; only the modes that can occur are compiled.
template <int64_t kLaneValues, typename F>
void with_scale_mode(int64_t block_size, F&& f) {
  if (block_size >= kChunk) {
    f.template operator()<ScaleMode::kPerChunk>();
  } else if (block_size < kW * kLaneValues) {
    f.template operator()<ScaleMode::kPerLane>();
  } else if constexpr (kW * kLaneValues < kChunk) {
    f.template operator()<ScaleMode::kPerVector>();
  }
}

// The chunks of one row of B: whole ones read in place, the ragged last one (codes ending inside
// it when K is not a whole number of chunks) copied, zero-padded, so that full-width loads never
// leave the row. Scales are copied along: the padded lanes read scale 0 and their A values are 0.
template <int kBits>
struct RowChunks {
  static constexpr int64_t kBytes = CodeLayout<kBits>::kChunkBytes;
  static constexpr int64_t kPadScales = kChunk / 16 + 2 * kW;  // blocks of a chunk, + a vector's overrun
  int64_t full = 0;     // whole chunks
  bool ragged = false;  // one more, partial
  int block_shift = 0;  // log2(block_size)

  explicit RowChunks(const QWeights& w)
      : full(w.row_bytes() / kBytes), ragged(w.row_bytes() % kBytes != 0),
        block_shift(std::countr_zero(static_cast<uint64_t>(w.block_size))) {}
  int64_t count() const { return full + (ragged ? 1 : 0); }
  int64_t first_block(int64_t c) const { return (c * kChunk) >> block_shift; }

  struct Padded {
    alignas(64) uint8_t codes[kBytes];
    float scales[kPadScales];
  };
  // Fills `pad` with chunk `full` of row n and returns it.
  const Padded& pad_last(const QWeights& w, int64_t n, Padded& pad) const {
    std::memset(&pad, 0, sizeof(pad));
    const int64_t done = full * kBytes;
    std::memcpy(pad.codes, w.codes + n * w.row_bytes() + done, static_cast<size_t>(w.row_bytes() - done));
    const int64_t b0 = first_block(full);
    std::memcpy(pad.scales, w.scales + n * w.blocks + b0, static_cast<size_t>(w.blocks - b0) * sizeof(float));
    return pad;
  }
};

// Software prefetch of the rows a tile will read later. Rows of B are short streams (K / 2 bytes
// for 4 bits), read a few at a time: the hardware prefetcher barely ramps up on one before it
// ends, so decoding weights from DRAM waits on memory latency. A tile of kRows rows at row n
// therefore prefetches, as it reads chunk c, the same chunk (and a line of scales) of the rows
// kPrefetchTiles tiles further on, into L2: two tiles ahead covers DRAM latency, and L2 rather
// than L1 keeps the prefetched lines from evicting the tile's own (measured on Zen 4: decode of a
// 4096 x 14336 matrix from DRAM 2.3 -> 1.8 ms; L3-resident shapes unchanged).
constexpr int64_t kPrefetchTiles = 2;

template <int kRows>
struct RowPrefetch {
  const uint8_t* rows[kRows] = {};  // null: past the last row of B (or not wanted)
  const char* scales[kRows] = {};
  int64_t scale_bytes = 0;
  RowPrefetch(const QWeights& w, int64_t n, bool wanted) : scale_bytes(w.blocks * 4) {
    for (int j = 0; j < kRows; ++j) {
      const int64_t row = n + kPrefetchTiles * kRows + j;
      if (wanted && row < w.rows) {
        rows[j] = w.codes + row * w.row_bytes();
        scales[j] = reinterpret_cast<const char*>(w.scales + row * w.blocks);
      }
    }
  }
  // While chunk c is read: its codes in the rows ahead, and one line of their scales.
  void at(int64_t c, int64_t chunk_bytes) const {
#pragma GCC unroll 4
    for (int j = 0; j < kRows; ++j) {
      if (rows[j] == nullptr) continue;
      _mm_prefetch(reinterpret_cast<const char*>(rows[j] + c * chunk_bytes), _MM_HINT_T1);
      if (c * 64 < scale_bytes) _mm_prefetch(scales[j] + c * 64, _MM_HINT_T1);
    }
  }
};

// Calls f.template operator()<R>(i) for i = begin, begin + kMax, ...: tiles of kMax, then one
// smaller tile for the remainder, so every tile size is a compile-time constant.
template <int R, typename F>
void call_tile(int64_t rows, int64_t i, F& f) {
  if constexpr (R > 0) {
    if (rows == R) f.template operator()<R>(i);
    else call_tile<R - 1>(rows, i, f);
  }
}
template <int kMax, typename F>
void for_each_tile(int64_t begin, int64_t end, F&& f) {
  int64_t i = begin;
  for (; i + kMax <= end; i += kMax) f.template operator()<kMax>(i);
  if (i < end) call_tile<kMax - 1>(end - i, i, f);
}

// out[j] = reduce_add(v[j]), four at a time where the row allows.
template <int kCount>
void reduce_row(const VecF (&v)[kCount], float* out) {
  if constexpr (kCount == 4) {
    reduce_add4(v[0], v[1], v[2], v[3], out);
  } else {
    for (int j = 0; j < kCount; ++j) out[j] = reduce_add(v[j]);
  }
}

// sum_b scale_b * zero_point_b * terms[b] over row n's blocks: what the zero points subtract
// from the row's dot product (terms: PackedA::block_terms of one row of A).
float zero_point_term(const QWeights& w, int64_t n, const float* terms) {
  const float* s = w.scales + n * w.blocks;
  if (w.zp_packed != nullptr) {  // rare in practice (model builders quantise symmetrically)
    float t = 0.0f;
    for (int64_t b = 0; b < w.blocks; ++b) t += s[b] * w.zero_point(n, b) * terms[b];
    return t;
  }
  const float* z = w.zp_float != nullptr ? w.zp_float + n * w.blocks : nullptr;
  const auto product = [&](int64_t b, int64_t count) {
    const auto load = [count](const float* p) { return count == kW ? VecF::load(p) : VecF::load_partial(p, count, 0.0f); };
    const VecF p = load(s + b) * load(terms + b);
    return z != nullptr ? p * load(z + b) : p;
  };
  VecF acc = VecF::splat(0.0f);
  int64_t b = 0;
  for (; b + kW <= w.blocks; b += kW) acc = acc + product(b, kW);
  if (b < w.blocks) acc = acc + product(b, w.blocks - b);
  const float t = reduce_add(acc);
  return z != nullptr ? t : t * static_cast<float>(1 << (w.bits - 1));
}

}  // namespace
}  // namespace onnx_genai::simd
