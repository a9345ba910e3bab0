// AttentionRowKernels (ops/cpu/avx2/attention_rows.h) over VecF (ops/cpu/avx2/vec_f32.h),
// compiled once per ISA by avx2/attention_avx2.cc and avx512/attention_avx512.cc.
//
// dot_rows takes eight keys at a time: eight independent FMA chains hide the FMA latency, the
// query vector is loaded once for all eight, and the eight sums leave the registers through one
// transpose-and-add tree instead of eight horizontal reductions. accumulate_rows keeps up to
// eight vectors of the output row in registers while it streams the value rows.
//
// The tile forms serve kQueryTile (4) query vectors per key / value row loaded, a small
// register-blocked GEMM: 4 queries x kTileKeys keys of dot-product accumulators, and 4 outputs x
// kTileVectors vectors of output accumulators (16 registers with AVX-512's 32, 8 with AVX2's 16).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "ops/cpu/avx2/attention_rows.h"
#include "ops/cpu/avx2/vec_f32.h"

namespace onnx_genai::simd {
namespace {

constexpr int kDotKeys = 8;
constexpr int kMaxAccVectors = 8;

// out[r] = the lane sum of acc[r], r < 8.
inline void store_lane_sums8(const VecF* acc, float* out) {
  __m256 half[kDotKeys];
#if defined(__AVX512F__)
  for (int r = 0; r < kDotKeys; ++r) {
    half[r] = _mm256_add_ps(_mm512_castps512_ps256(acc[r].v), _mm512_extractf32x8_ps(acc[r].v, 1));
  }
#else
  for (int r = 0; r < kDotKeys; ++r) half[r] = acc[r].v;
#endif
  // Pairwise adds interleave the rows; after three rounds lane r of each 128-bit half holds
  // half of row r's sum (rows 0-3 in u0, 4-7 in u1), and the two halves are added.
  const __m256 t0 = _mm256_hadd_ps(half[0], half[1]), t1 = _mm256_hadd_ps(half[2], half[3]);
  const __m256 t2 = _mm256_hadd_ps(half[4], half[5]), t3 = _mm256_hadd_ps(half[6], half[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
  _mm256_storeu_ps(out, sums);
}

// out[c] = the lane sum of acc[c], c < 4: one transpose-and-add tree for the four.
inline void store_lane_sums4(const VecF* acc, float* out) {
  __m256 half[4];
#if defined(__AVX512F__)
  for (int c = 0; c < 4; ++c) half[c] = _mm256_add_ps(_mm512_castps512_ps256(acc[c].v), _mm512_extractf32x8_ps(acc[c].v, 1));
#else
  for (int c = 0; c < 4; ++c) half[c] = acc[c].v;
#endif
  const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(half[0], half[1]), _mm256_hadd_ps(half[2], half[3]));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

// One score's lane sum by the same tree as store_lane_sums8/4, so that a key's score does not
// depend on whether it came in a group of keys or alone (a query row then gives the same numbers
// whatever the rows beside it: a speculative verify step equals the decode steps it replaces).
inline float lane_sum(VecF a) {
  const VecF four[4] = {a, VecF::splat(0.0f), VecF::splat(0.0f), VecF::splat(0.0f)};
  float sums[4];
  store_lane_sums4(four, sums);
  return sums[0];
}

template <int kKeys>
inline void dot_keys(const float* q, const float* k, int64_t stride, int64_t d, float* scores) {
  constexpr int64_t kW = VecF::kWidth;
  VecF acc[kKeys];
  for (VecF& a : acc) a = VecF::splat(0.0f);
  int64_t i = 0;
  for (; i + kW <= d; i += kW) {
    const VecF qv = VecF::load(q + i);
    for (int r = 0; r < kKeys; ++r) acc[r] = fmadd(qv, VecF::load(k + r * stride + i), acc[r]);
  }
  if (i < d) {
    const VecF qv = VecF::load_partial(q + i, d - i, 0.0f);
    for (int r = 0; r < kKeys; ++r) acc[r] = fmadd(qv, VecF::load_partial(k + r * stride + i, d - i, 0.0f), acc[r]);
  }
  if constexpr (kKeys == kDotKeys) {
    store_lane_sums8(acc, scores);
  } else {
    for (int r = 0; r < kKeys; ++r) scores[r] = lane_sum(acc[r]);
  }
}

void attention_dot_rows(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float* scores) {
  int64_t j = 0;
  for (; j + kDotKeys <= n; j += kDotKeys) dot_keys<kDotKeys>(q, k + j * stride, stride, d, scores + j);
  for (; j < n; ++j) dot_keys<1>(q, k + j * stride, stride, d, scores + j);
}

// kVectors full vectors of acc (at most kMaxAccVectors, so they stay in registers).
template <int kVectors>
inline void accumulate_vectors(const float* p, const float* v, int64_t stride, int64_t n, float correction, float* acc) {
  constexpr int64_t kW = VecF::kWidth;
  const VecF c = VecF::splat(correction);
  VecF a[kVectors];
  for (int r = 0; r < kVectors; ++r) a[r] = VecF::load(acc + r * kW) * c;
  for (int64_t j = 0; j < n; ++j) {
    const VecF pj = VecF::splat(p[j]);
    const float* row = v + j * stride;
    for (int r = 0; r < kVectors; ++r) a[r] = fmadd(pj, VecF::load(row + r * kW), a[r]);
  }
  for (int r = 0; r < kVectors; ++r) a[r].store(acc + r * kW);
}

template <int... kCounts>
inline void accumulate_vectors_n(int count, const float* p, const float* v, int64_t stride, int64_t n, float correction,
                                 float* acc, std::integer_sequence<int, kCounts...>) {
  ((count == kCounts + 1 ? (accumulate_vectors<kCounts + 1>(p, v, stride, n, correction, acc), 0) : 0), ...);
}

void attention_accumulate_rows(const float* p, const float* v, int64_t stride, int64_t n, int64_t d, float correction,
                               float* acc) {
  constexpr int64_t kW = VecF::kWidth;
  int64_t off = 0;
  while (d - off >= kW) {
    const int count = static_cast<int>(std::min<int64_t>((d - off) / kW, kMaxAccVectors));
    accumulate_vectors_n(count, p, v + off, stride, n, correction, acc + off, std::make_integer_sequence<int, kMaxAccVectors>{});
    off += count * kW;
  }
  if (off < d) {
    const int64_t tail = d - off;
    VecF a = VecF::load_partial(acc + off, tail, 0.0f) * VecF::splat(correction);
    for (int64_t j = 0; j < n; ++j) a = fmadd(VecF::splat(p[j]), VecF::load_partial(v + j * stride + off, tail, 0.0f), a);
    a.store_partial(acc + off, tail);
  }
}

float attention_row_max(const float* x, int64_t n) {
  constexpr int64_t kW = VecF::kWidth;
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  VecF m = VecF::splat(kLowest);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) m = max(m, VecF::load(x + i));
  if (i < n) m = max(m, VecF::load_partial(x + i, n - i, kLowest));
  return reduce_max(m);
}

float attention_exp_sum(float* x, int64_t n, float shift) {
  constexpr int64_t kW = VecF::kWidth;
  const VecF s = VecF::splat(shift);
  VecF sum = VecF::splat(0.0f);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const VecF e = exp(VecF::load(x + i) - s);
    e.store(x + i);
    sum = sum + e;
  }
  if (i < n) {
    // Lanes past n read -inf, whose exp is exactly 0, so they add nothing.
    const VecF e = exp(VecF::load_partial(x + i, n - i, -std::numeric_limits<float>::infinity()) - s);
    e.store_partial(x + i, n - i);
    sum = sum + e;
  }
  return reduce_add(sum);
}

constexpr int kTileKeys = VecF::kWidth == 16 ? 4 : 2;
constexpr int kTileVectors = VecF::kWidth == 16 ? 4 : 2;

// scores[r][first + c] for kKeys keys at k (rows `stride` apart), r < kQueryTile.
template <int kKeys>
inline void dot_tile_keys(const float* const* q, const float* k, int64_t stride, int64_t d, float* const* scores,
                          int64_t first) {
  constexpr int64_t kW = VecF::kWidth;
  VecF acc[kQueryTile][kKeys];
  for (auto& row : acc) {
    for (VecF& a : row) a = VecF::splat(0.0f);
  }
  const auto step = [&](int64_t i, int64_t width) {
    const bool full = width == kW;
    VecF kv[kKeys];
    for (int c = 0; c < kKeys; ++c) kv[c] = full ? VecF::load(k + c * stride + i) : VecF::load_partial(k + c * stride + i, width, 0.0f);
    for (int r = 0; r < kQueryTile; ++r) {
      const VecF qv = full ? VecF::load(q[r] + i) : VecF::load_partial(q[r] + i, width, 0.0f);
      for (int c = 0; c < kKeys; ++c) acc[r][c] = fmadd(qv, kv[c], acc[r][c]);
    }
  };
  int64_t i = 0;
  for (; i + kW <= d; i += kW) step(i, kW);
  if (i < d) step(i, d - i);
  for (int r = 0; r < kQueryTile; ++r) {
    if constexpr (kKeys == 4) {
      store_lane_sums4(acc[r], scores[r] + first);
    } else {
      for (int c = 0; c < kKeys; ++c) scores[r][first + c] = lane_sum(acc[r][c]);
    }
  }
}

void attention_dot_rows_tile(const float* const* q, const float* k, int64_t stride, int64_t n, int64_t d,
                             float* const* scores) {
  int64_t j = 0;
  for (; j + kTileKeys <= n; j += kTileKeys) dot_tile_keys<kTileKeys>(q, k + j * stride, stride, d, scores, j);
  for (; j < n; ++j) dot_tile_keys<1>(q, k + j * stride, stride, d, scores, j);
}

// kVectors vectors (from `off`) of all kQueryTile outputs; `tail` > 0 makes it one masked
// vector of `tail` floats.
template <int kVectors>
inline void accumulate_tile_vectors(const float* const* p, const float* v, int64_t stride, int64_t n,
                                    const float* correction, float* const* acc, int64_t off, int64_t tail) {
  constexpr int64_t kW = VecF::kWidth;
  const auto load = [&](const float* at) { return tail > 0 ? VecF::load_partial(at, tail, 0.0f) : VecF::load(at); };
  VecF a[kQueryTile][kVectors];
  for (int r = 0; r < kQueryTile; ++r) {
    const VecF c = VecF::splat(correction[r]);
    for (int x = 0; x < kVectors; ++x) a[r][x] = load(acc[r] + off + x * kW) * c;
  }
  for (int64_t j = 0; j < n; ++j) {
    const float* row = v + j * stride + off;
    VecF vv[kVectors];
    for (int x = 0; x < kVectors; ++x) vv[x] = load(row + x * kW);
    for (int r = 0; r < kQueryTile; ++r) {
      const VecF pj = VecF::splat(p[r][j]);
      for (int x = 0; x < kVectors; ++x) a[r][x] = fmadd(pj, vv[x], a[r][x]);
    }
  }
  for (int r = 0; r < kQueryTile; ++r) {
    for (int x = 0; x < kVectors; ++x) {
      if (tail > 0) {
        a[r][x].store_partial(acc[r] + off + x * kW, tail);
      } else {
        a[r][x].store(acc[r] + off + x * kW);
      }
    }
  }
}

void attention_accumulate_rows_tile(const float* const* p, const float* v, int64_t stride, int64_t n, int64_t d,
                                    const float* correction, float* const* acc) {
  constexpr int64_t kW = VecF::kWidth;
  int64_t off = 0;
  for (; off + kTileVectors * kW <= d; off += kTileVectors * kW) {
    accumulate_tile_vectors<kTileVectors>(p, v, stride, n, correction, acc, off, 0);
  }
  for (; off + kW <= d; off += kW) accumulate_tile_vectors<1>(p, v, stride, n, correction, acc, off, 0);
  if (off < d) accumulate_tile_vectors<1>(p, v, stride, n, correction, acc, off, d - off);
}

void attention_stream_copy(const void* src, void* dst, int64_t bytes) {
  constexpr int64_t kLine = 64;
  const auto* from = static_cast<const char*>(src);
  auto* to = static_cast<char*>(dst);
  // Streaming stores want 64-byte aligned destinations: plain copies before and after.
  const int64_t head = std::min<int64_t>((kLine - static_cast<int64_t>(reinterpret_cast<uintptr_t>(to) % kLine)) % kLine, bytes);
  std::memcpy(to, from, static_cast<size_t>(head));
  from += head;
  to += head;
  bytes -= head;
  for (; bytes >= kLine; bytes -= kLine, from += kLine, to += kLine) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(to), _mm512_loadu_si512(from));
#else
    _mm256_stream_si256(reinterpret_cast<__m256i*>(to), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(to + 32), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 32)));
#endif
  }
  std::memcpy(to, from, static_cast<size_t>(bytes));
  _mm_sfence();
}

const AttentionRowKernels kAttentionRowKernels{attention_dot_rows,      attention_accumulate_rows,
                                               attention_row_max,       attention_exp_sum,
                                               attention_dot_rows_tile, attention_accumulate_rows_tile,
                                               attention_stream_copy};

}  // namespace
}  // namespace onnx_genai::simd
