// The attention engine (plan and work split described in ops/cpu/attention_core.h).
#include "ops/cpu/attention_core.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/cpu/dispatch.h"

namespace onnx_genai {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// A KV split aims at this many units per thread so that uneven units still balance.
constexpr int64_t kUnitsPerThread = 4;
// Below this many keys per chunk the partial-merge costs more than the extra thread saves.
constexpr int64_t kMinChunkKeys = 256;
// Past copies larger than this (about a core's share of L3) bypass the caches: the present rows
// will not be read again before the next step, and streaming stores skip their read-for-ownership.
// Smaller caches stay cache-resident across steps, so plain copies win there.
constexpr int64_t kStreamCopyBytes = int64_t{8} << 20;
// One K block holds about this many floats (32 KiB: it stays in L1 while every vector of the
// unit reads it).
constexpr int64_t kBlockFloats = 8192;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t x, int64_t m) { return ceil_div(x, m) * m; }

// ---- Scalar reference row kernels (CPUs without AVX2, OG_CPU_ISA=scalar) --------------------

void scalar_dot_rows(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float* scores) {
  for (int64_t j = 0; j < n; ++j) {
    float s = 0.0f;
    for (int64_t i = 0; i < d; ++i) s += q[i] * k[j * stride + i];
    scores[j] = s;
  }
}

void scalar_accumulate_rows(const float* p, const float* v, int64_t stride, int64_t n, int64_t d, float correction,
                            float* acc) {
  for (int64_t i = 0; i < d; ++i) acc[i] *= correction;
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < d; ++i) acc[i] += p[j] * v[j * stride + i];
  }
}

float scalar_row_max(const float* x, int64_t n) {
  float m = kNegInf;
  for (int64_t j = 0; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

float scalar_exp_sum(float* x, int64_t n, float shift) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - shift);
    sum += x[j];
  }
  return sum;
}

void scalar_dot_rows_tile(const float* const* q, const float* k, int64_t stride, int64_t n, int64_t d,
                          float* const* scores) {
  for (int r = 0; r < kQueryTile; ++r) scalar_dot_rows(q[r], k, stride, n, d, scores[r]);
}

void scalar_accumulate_rows_tile(const float* const* p, const float* v, int64_t stride, int64_t n, int64_t d,
                                 const float* correction, float* const* acc) {
  for (int r = 0; r < kQueryTile; ++r) scalar_accumulate_rows(p[r], v, stride, n, d, correction[r], acc[r]);
}

void plain_copy(const void* src, void* dst, int64_t bytes) { std::memcpy(dst, src, static_cast<size_t>(bytes)); }

const AttentionRowKernels kScalarAttentionRows{scalar_dot_rows,      scalar_accumulate_rows,
                                               scalar_row_max,       scalar_exp_sum,
                                               scalar_dot_rows_tile, scalar_accumulate_rows_tile,
                                               plain_copy};

// `n` rows of `d` elements, `stride` apart, widened to contiguous f32 rows.
template <typename T>
void widen_rows(const T* src, int64_t stride, int64_t n, int64_t d, float* dst) {
  for (int64_t j = 0; j < n; ++j) {
    const T* row = src + j * stride;
    float* out = dst + j * d;
    if constexpr (std::is_same_v<T, Float16>) {
      convert_f16_to_f32(row, out, d);
    } else {
      for (int64_t i = 0; i < d; ++i) out[i] = load(row[i]);
    }
  }
}

template <typename T>
void narrow_row(const float* src, int64_t d, T* dst) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(dst, src, static_cast<size_t>(d) * sizeof(float));
  } else if constexpr (std::is_same_v<T, Float16>) {
    convert_f32_to_f16(src, dst, d);
  } else {
    for (int64_t i = 0; i < d; ++i) dst[i] = T(src[i]);
  }
}

}  // namespace

const AttentionRowKernels& scalar_attention_row_kernels() { return kScalarAttentionRows; }

void apply_softcap(float* x, int64_t n, float cap) {
  static const VecMathFn simd_tanh = vec_math(VecMathOp::kTanh);  // null without AVX2
  for (int64_t j = 0; j < n; ++j) x[j] /= cap;
  if (simd_tanh != nullptr) {
    simd_tanh(x, x, n);
  } else {
    for (int64_t j = 0; j < n; ++j) x[j] = std::tanh(x[j]);
  }
  for (int64_t j = 0; j < n; ++j) x[j] *= cap;
}

const AttentionRowKernels& best_attention_row_kernels() {
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx512) return avx512::attention_row_kernels();
  if (cpu.avx2) return avx2::attention_row_kernels();
  return kScalarAttentionRows;
}

int64_t attention_key_block(int64_t head_size, int64_t v_head_size) {
  const int64_t widest = std::max<int64_t>({head_size, v_head_size, 1});
  int64_t block = 16;
  while (block < 128 && block * 2 * widest <= kBlockFloats) block *= 2;
  return block;
}

void AttentionCore::plan(const AttentionConfig& config, int threads) {
  c_ = config;
  rows_ = &best_attention_row_kernels();
  threads = std::max(threads, 1);
  group_ = c_.q_heads / c_.kv_heads;
  heads_per_unit_ = std::min(group_, kMaxVectors);
  head_slices_ = ceil_div(group_, heads_per_unit_);
  rows_per_tile_ = std::clamp<int64_t>(kMaxVectors / heads_per_unit_, 1, std::max<int64_t>(c_.q_len, 1));
  tiles_ = ceil_div(std::max<int64_t>(c_.q_len, 1), rows_per_tile_);
  const int64_t base_units = c_.batch * c_.kv_heads * head_slices_ * tiles_;
  max_chunks_ = 1;
  if (c_.q_len == 1 && threads > 1 && base_units < kUnitsPerThread * threads) {
    max_chunks_ = std::clamp<int64_t>(ceil_div(kUnitsPerThread * threads, std::max<int64_t>(base_units, 1)), 1,
                                      std::max<int64_t>(c_.max_keys / kMinChunkKeys, 1));
  }
  block_ = attention_key_block(c_.head_size, c_.v_head_size);
  q_stride_ = round_up(c_.head_size, 16);
  acc_stride_ = round_up(c_.v_head_size, 16);
  const int64_t vectors = heads_per_unit_ * rows_per_tile_;
  int64_t floats = vectors * (q_stride_ + acc_stride_ + block_);
  if (c_.dtype != DType::kF32) floats += block_ * (q_stride_ + acc_stride_);  // widened K and V blocks
  slot_floats_ = align_workspace(static_cast<size_t>(floats) * sizeof(float)) / sizeof(float);
  slots_ = std::clamp<int64_t>(threads, 1, std::max<int64_t>(base_units * max_chunks_, 1));
  partials_offset_ = static_cast<size_t>(slots_) * slot_floats_ * sizeof(float);
  const size_t partial_bytes =
      max_chunks_ > 1 ? static_cast<size_t>(c_.batch * c_.q_heads * max_chunks_ * (2 + c_.v_head_size)) * sizeof(float) : 0;
  workspace_bytes_ = partials_offset_ + partial_bytes;
}

// Runs the units of one AttentionCore::run (see attention_core.h for what a unit is).
template <typename T>
class AttentionUnitRunner {
 public:
  AttentionUnitRunner(const AttentionCore& core, const AttentionRun<T>& run, float* workspace)
      : k_(core), c_(core.c_), rows_(*core.rows_), run_(run), workspace_(workspace) {}

  // Chooses this run's KV chunking from the actual key counts; returns the number of units.
  int64_t start() {
    chunk_len_ = std::numeric_limits<int64_t>::max();
    chunks_ = 1;
    if (k_.max_chunks_ > 1) {
      int64_t longest = 0;
      for (int64_t b = 0; b < c_.batch; ++b) {
        const auto [lo, hi] = key_range(b, 0);
        longest = std::max(longest, hi - lo);
      }
      chunk_len_ = std::max(kMinChunkKeys, ceil_div(longest, k_.max_chunks_));
      chunks_ = std::max<int64_t>(ceil_div(longest, chunk_len_), 1);
    }
    if (run_.past != nullptr) {
      int64_t rows = 0;
      for (int64_t b = 0; b < c_.batch; ++b) rows += run_.keys[b].past_rows;
      stream_past_ = rows * c_.kv_heads * (c_.head_size + c_.v_head_size) * static_cast<int64_t>(sizeof(T)) > kStreamCopyBytes;
    }
    return c_.batch * c_.kv_heads * k_.head_slices_ * k_.tiles_ * chunks_;
  }
  bool split() const { return chunks_ > 1; }

  void process(int64_t unit, float* scratch) const;
  void merge(int64_t b, int64_t h) const;
  // Copies past rows [first, end) (cut at past_rows) of (b, g) into the K / V storage; `stream`
  // bypasses the caches (the rows are then read from the past copy, which the copy just cached).
  void copy_past(int64_t b, int64_t g, int64_t first, int64_t end, bool stream) const;
  bool lazy_past() const { return run_.past != nullptr && k_.copies_past_lazily(); }

 private:
  struct Vector {
    int64_t h, s, lo, hi;
    float m, l;
    float* q;       // scaled query [head_size]
    float* acc;     // output accumulator [v_head_size]
    float* scores;  // one block of scores, then of probabilities
  };

  // The key rows of one block, f32.
  struct Block {
    int64_t first, n;
    const float* keys;
    int64_t key_stride;
    const float* values;
    int64_t value_stride;
  };

  std::pair<int64_t, int64_t> key_range(int64_t b, int64_t s) const {
    const BatchKeys& keys = run_.keys[b];
    int64_t hi = c_.causal ? std::min(keys.causal_offset + s + 1, keys.total) : keys.total;
    hi = std::max<int64_t>(hi, 0);
    const int64_t lo = c_.window >= 0 && hi > c_.window ? hi - c_.window : 0;
    return {lo, hi};
  }

  // Rows [first, first + n) of K or V for (b, g) as f32 rows; `stride` receives their spacing.
  const float* block_rows(const T* base, const AttentionStrides& st, int64_t b, int64_t g, int64_t first, int64_t n,
                          int64_t d, float* widened, int64_t& stride) const {
    const T* rows = base + b * st.batch + g * st.head + first * st.row;
    if constexpr (std::is_same_v<T, float>) {
      stride = st.row;
      return rows;
    } else {
      widen_rows(rows, st.row, n, d, widened);
      stride = d;
      return widened;
    }
  }

  // Softcap and bias on scores[0..n) of keys [first, first + n).
  void adjust_scores(const Vector& vec, int64_t b, int64_t first, int64_t n, float* scores) const;
  // The online-softmax update over vec.scores[0..n): probabilities in place, new (m, l); returns
  // the correction for the accumulator, or a negative value when every key is masked.
  float update_softmax(Vector& vec, int64_t n) const;
  void score_single(Vector& vec, int64_t b, const Block& block) const;
  void score_tile(Vector* vecs, int64_t b, const Block& block) const;
  // Sets up the unit's query vectors; returns the span of keys any of them sees.
  std::pair<int64_t, int64_t> setup_vectors(int64_t b, int64_t g, int64_t slice, int64_t tile, int64_t chunk,
                                            float* scratch, Vector* vecs, int64_t& count) const;
  // out = acc / denominator (with the sink or smooth-softmax term), or partial (m, l, acc).
  void finish(int64_t b, int64_t h, int64_t s, float m, float l, float* acc) const;
  float* partial(int64_t b, int64_t h, int64_t chunk) const {
    return workspace_ + k_.partials_offset_ / sizeof(float) +
           ((b * c_.q_heads + h) * k_.max_chunks_ + chunk) * (2 + c_.v_head_size);
  }

  const AttentionCore& k_;
  const AttentionConfig& c_;
  const AttentionRowKernels& rows_;
  const AttentionRun<T>& run_;
  float* workspace_;
  int64_t chunk_len_ = 0, chunks_ = 1;
  bool stream_past_ = false;  // past rows copied with streaming stores (big caches)
};

template <typename T>
void AttentionUnitRunner<T>::copy_past(int64_t b, int64_t g, int64_t first, int64_t end, bool stream) const {
  end = std::min(end, run_.keys[b].past_rows);
  if (first >= end) return;
  const PastRows<T>& past = *run_.past;
  const auto copy = [&](const T* src, const AttentionStrides& from, T* dst, const AttentionStrides& to, int64_t d) {
    src += b * from.batch + g * from.head;
    dst += b * to.batch + g * to.head;
    const auto row_bytes = static_cast<int64_t>(sizeof(T)) * d;
    if (from.row == d && to.row == d) {  // one contiguous range in both
      if (stream) {
        rows_.stream_copy(src + first * d, dst + first * d, (end - first) * row_bytes);
      } else {
        std::memcpy(dst + first * d, src + first * d, static_cast<size_t>((end - first) * row_bytes));
      }
      return;
    }
    for (int64_t j = first; j < end; ++j) std::memcpy(dst + j * to.row, src + j * from.row, static_cast<size_t>(row_bytes));
  };
  copy(past.k, past.k_strides, past.k_dst, c_.k, c_.head_size);
  copy(past.v, past.v_strides, past.v_dst, c_.v, c_.v_head_size);
}

template <typename T>
void AttentionUnitRunner<T>::adjust_scores(const Vector& vec, int64_t b, int64_t first, int64_t n, float* scores) const {
  if (c_.softcap > 0.0f) apply_softcap(scores, n, c_.softcap);
  if (run_.add_bias != nullptr) (*run_.add_bias)(b, vec.h, vec.s, first, n, scores);
}

template <typename T>
float AttentionUnitRunner<T>::update_softmax(Vector& vec, int64_t n) const {
  float* scores = vec.scores;
  const float block_max = rows_.row_max(scores, n);
  if (block_max == kNegInf) return -1.0f;  // every key masked
  const float m = std::max(vec.m, block_max);
  const float correction = vec.m == kNegInf ? 0.0f : std::exp(vec.m - m);
  const float sum = rows_.exp_sum(scores, n, m);
  vec.l = vec.l * correction + sum;
  vec.m = m;
  return correction;
}

template <typename T>
void AttentionUnitRunner<T>::score_single(Vector& vec, int64_t b, const Block& block) const {
  const int64_t lo = std::max(vec.lo, block.first), hi = std::min(vec.hi, block.first + block.n);
  if (lo >= hi) return;
  const float* keys = block.keys + (lo - block.first) * block.key_stride;
  rows_.dot_rows(vec.q, keys, block.key_stride, hi - lo, c_.head_size, vec.scores);
  adjust_scores(vec, b, lo, hi - lo, vec.scores);
  const float correction = update_softmax(vec, hi - lo);
  if (correction < 0.0f) return;
  rows_.accumulate_rows(vec.scores, block.values + (lo - block.first) * block.value_stride, block.value_stride, hi - lo,
                        c_.v_head_size, correction, vec.acc);
}

// kQueryTile vectors over the union of their key ranges in the block; keys outside a vector's
// own range score -inf (probability 0), so one pass over the rows serves all of them.
template <typename T>
void AttentionUnitRunner<T>::score_tile(Vector* vecs, int64_t b, const Block& block) const {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
  for (int r = 0; r < kQueryTile; ++r) {
    const int64_t a = std::max(vecs[r].lo, block.first), e = std::min(vecs[r].hi, block.first + block.n);
    if (a < e) {
      lo = std::min(lo, a);
      hi = std::max(hi, e);
    }
  }
  if (lo >= hi) return;
  const int64_t n = hi - lo;
  const float* q[kQueryTile];
  float* scores[kQueryTile];
  float* acc[kQueryTile];
  float correction[kQueryTile];
  for (int r = 0; r < kQueryTile; ++r) {
    q[r] = vecs[r].q;
    scores[r] = vecs[r].scores;
    acc[r] = vecs[r].acc;
  }
  rows_.dot_rows_tile(q, block.keys + (lo - block.first) * block.key_stride, block.key_stride, n, c_.head_size, scores);
  for (int r = 0; r < kQueryTile; ++r) {
    Vector& vec = vecs[r];
    const int64_t a = std::clamp(vec.lo, lo, hi), e = std::clamp(vec.hi, a, hi);
    if (a < e) adjust_scores(vec, b, a, e - a, vec.scores + (a - lo));
    std::fill(vec.scores, vec.scores + (a - lo), kNegInf);
    std::fill(vec.scores + (e - lo), vec.scores + n, kNegInf);
    correction[r] = a < e ? update_softmax(vec, n) : -1.0f;
    if (correction[r] < 0.0f) {
      // Nothing seen in this block: probabilities 0, accumulator unchanged.
      std::fill(vec.scores, vec.scores + n, 0.0f);
      correction[r] = 1.0f;
    }
  }
  rows_.accumulate_rows_tile(scores, block.values + (lo - block.first) * block.value_stride, block.value_stride, n,
                             c_.v_head_size, correction, acc);
}

template <typename T>
std::pair<int64_t, int64_t> AttentionUnitRunner<T>::setup_vectors(int64_t b, int64_t g, int64_t slice, int64_t tile,
                                                                  int64_t chunk, float* scratch, Vector* vecs,
                                                                  int64_t& count) const {
  const int64_t h0 = g * k_.group_ + slice * k_.heads_per_unit_;
  const int64_t nh = std::min(k_.heads_per_unit_, k_.group_ - slice * k_.heads_per_unit_);
  const int64_t s0 = tile * k_.rows_per_tile_;
  const int64_t ns = std::min(k_.rows_per_tile_, c_.q_len - s0);
  count = nh * ns;
  float* q = scratch;
  float* acc = q + k_.q_stride_ * count;
  float* scores = acc + k_.acc_stride_ * count;
  int64_t span_lo = std::numeric_limits<int64_t>::max(), span_hi = 0;
  for (int64_t i = 0; i < count; ++i) {
    Vector& vec = vecs[i];
    vec.h = h0 + i % nh;
    vec.s = s0 + i / nh;
    auto [lo, hi] = key_range(b, vec.s);
    if (chunks_ > 1) {
      hi = std::min(hi, lo + (chunk + 1) * chunk_len_);
      lo = std::min(hi, lo + chunk * chunk_len_);
    }
    vec.lo = lo;
    vec.hi = hi;
    vec.m = kNegInf;
    vec.l = 0.0f;
    vec.q = q + i * k_.q_stride_;
    vec.acc = acc + i * k_.acc_stride_;
    vec.scores = scores + i * k_.block_;
    (*run_.load_query)(b, vec.h, vec.s, vec.q);
    std::fill_n(vec.acc, c_.v_head_size, 0.0f);
    if (lo < hi) {
      span_lo = std::min(span_lo, lo);
      span_hi = std::max(span_hi, hi);
    }
  }
  return {span_lo, span_hi};
}

template <typename T>
void AttentionUnitRunner<T>::process(int64_t unit, float* scratch) const {
  // unit = (((b * kv_heads + g) * head_slices + slice) * tiles + tile) * chunks + chunk
  const int64_t chunk = unit % chunks_;
  int64_t rest = unit / chunks_;
  const int64_t tile = rest % k_.tiles_;
  rest /= k_.tiles_;
  const int64_t slice = rest % k_.head_slices_;
  rest /= k_.head_slices_;
  const int64_t g = rest % c_.kv_heads;
  const int64_t b = rest / c_.kv_heads;

  Vector vecs[AttentionCore::kMaxVectors];
  int64_t count = 0;
  const auto [span_lo, span_hi] = setup_vectors(b, g, slice, tile, chunk, scratch, vecs, count);
  float* wide_k = scratch + (k_.q_stride_ + k_.acc_stride_ + k_.block_) * count;
  float* wide_v = wide_k + k_.block_ * k_.q_stride_;
  if (lazy_past() && chunk == 0) {
    // Past rows no unit reads (before a window, or past the last key) still belong in present.
    const auto [lo, hi] = key_range(b, 0);
    copy_past(b, g, 0, lo, stream_past_);
    copy_past(b, g, std::max(lo, hi), run_.keys[b].past_rows, stream_past_);
  }
  const int64_t past_rows = lazy_past() ? run_.keys[b].past_rows : 0;
  for (int64_t first = span_lo; first < span_hi;) {
    Block block;
    block.first = first;
    block.n = std::min(k_.block_, span_hi - first);
    // A block of past rows is copied to present and computed from the past copy, just cached.
    const bool from_past = first < past_rows;
    if (from_past) {
      block.n = std::min(block.n, past_rows - first);
      copy_past(b, g, first, first + block.n, stream_past_);
    }
    const T* k_rows = from_past ? run_.past->k : run_.k;
    const T* v_rows = from_past ? run_.past->v : run_.v;
    block.keys = block_rows(k_rows, from_past ? run_.past->k_strides : c_.k, b, g, first, block.n, c_.head_size, wide_k,
                            block.key_stride);
    block.values = block_rows(v_rows, from_past ? run_.past->v_strides : c_.v, b, g, first, block.n, c_.v_head_size,
                              wide_v, block.value_stride);
    first += block.n;
    int64_t i = 0;
    for (; i + kQueryTile <= count; i += kQueryTile) score_tile(vecs + i, b, block);
    for (; i < count; ++i) score_single(vecs[i], b, block);
  }
  for (int64_t i = 0; i < count; ++i) {
    const Vector& vec = vecs[i];
    if (chunks_ > 1) {
      float* p = partial(b, vec.h, chunk);
      p[0] = vec.m;
      p[1] = vec.l;
      std::copy_n(vec.acc, c_.v_head_size, p + 2);
    } else {
      finish(b, vec.h, vec.s, vec.m, vec.l, vec.acc);
    }
  }
}

template <typename T>
void AttentionUnitRunner<T>::finish(int64_t b, int64_t h, int64_t s, float m, float l, float* acc) const {
  float factor = l > 0.0f ? 1.0f / l : 0.0f;
  if (c_.smooth_softmax || run_.head_sink != nullptr) {
    const float sink = run_.head_sink != nullptr ? static_cast<float>(load(run_.head_sink[h])) : 0.0f;
    const float top = std::max(m, sink);
    const float kept = std::exp(m - top);  // 0 when m is -inf (no key seen)
    factor = kept / (l * kept + std::exp(sink - top));
  }
  for (int64_t i = 0; i < c_.v_head_size; ++i) acc[i] *= factor;
  narrow_row(acc, c_.v_head_size, run_.out + b * c_.out.batch + h * c_.out.head + s * c_.out.row);
}

template <typename T>
void AttentionUnitRunner<T>::merge(int64_t b, int64_t h) const {
  float top = kNegInf;
  for (int64_t chunk = 0; chunk < chunks_; ++chunk) {
    const float* p = partial(b, h, chunk);
    if (p[1] > 0.0f) top = std::max(top, p[0]);
  }
  // Chunk 0's accumulator becomes the merged one.
  float* merged = partial(b, h, 0);
  float l = 0.0f;
  for (int64_t chunk = 0; chunk < chunks_; ++chunk) {
    float* p = partial(b, h, chunk);
    const float weight = p[1] > 0.0f ? std::exp(p[0] - top) : 0.0f;
    l += p[1] * weight;
    if (chunk == 0) {
      for (int64_t i = 0; i < c_.v_head_size; ++i) merged[2 + i] *= weight;
    } else {
      for (int64_t i = 0; i < c_.v_head_size; ++i) merged[2 + i] += weight * p[2 + i];
    }
  }
  finish(b, h, 0, top, l, merged + 2);
}

template <typename T>
void AttentionCore::run(const AttentionRun<T>& run, void* workspace, ThreadPool* pool) const {
  float* ws = static_cast<float*>(workspace);
  AttentionUnitRunner<T> runner(*this, run, ws);
  if (run.past != nullptr && !copies_past_lazily()) {
    parallel_for(pool, c_.batch * c_.kv_heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        runner.copy_past(i / c_.kv_heads, i % c_.kv_heads, 0, run.keys[i / c_.kv_heads].past_rows, false);
      }
    });
  }
  const int64_t units = runner.start();
  std::atomic<int64_t> next{0};
  parallel_for(pool, std::min(slots_, units), 1, [&](int64_t first_slot, int64_t end_slot) {
    for (int64_t slot = first_slot; slot < end_slot; ++slot) {
      float* scratch = ws + static_cast<size_t>(slot) * slot_floats_;
      for (int64_t unit = next.fetch_add(1, std::memory_order_relaxed); unit < units;
           unit = next.fetch_add(1, std::memory_order_relaxed)) {
        runner.process(unit, scratch);
      }
    }
  });
  if (!runner.split()) return;
  parallel_for(pool, c_.batch * c_.q_heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) runner.merge(i / c_.q_heads, i % c_.q_heads);
  });
}

template void AttentionCore::run<float>(const AttentionRun<float>&, void*, ThreadPool*) const;
template void AttentionCore::run<Float16>(const AttentionRun<Float16>&, void*, ThreadPool*) const;
template void AttentionCore::run<BFloat16>(const AttentionRun<BFloat16>&, void*, ThreadPool*) const;

}  // namespace onnx_genai
