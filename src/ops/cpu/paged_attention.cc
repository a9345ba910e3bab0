// onnx_genai PagedAttention on the CPU (semantics in ops/schema/paged_attention.h); the reference
// the CUDA kernel is held to.
//
// A run has three phases:
//   1. metadata, bounds-checked (it is data): each token's sequence, each sequence's block ids;
//   2. the new rows: keys rotated at their positions and written, with the values, into their
//      slots; parallel over tokens (a cache given as a separate output is copied over first);
//   3. attention, one unit per (token, KV head): the query heads of the group are loaded (rotated,
//      rounded to the storage type as GroupQueryAttention does, scaled), then the sequence's keys
//      are taken in spans of attention_key_block rows from the first (the contiguous kernel's
//      blocks), each span scored through its KV blocks against all of them and folded into a
//      running max, sum and output per head (online softmax), span by span in position order. A
//      query's result depends only on its own sequence's keys and that fixed order, never on
//      which other sequences share the call or how its blocks lie: batching leaves every row's
//      numbers unchanged, and they equal GroupQueryAttention's over a contiguous cache.
//
// Threads pull units from a shared counter; each owns a scratch slot of the workspace.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/thread_pool.h"
#include "ops/cpu/attention_core.h"
#include "ops/cpu/avx2/attention_rows.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/rotary_rows.h"
#include "ops/schema/paged_attention.h"

namespace onnx_genai {

namespace {

using P = PagedAttentionParams;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Scratch of one thread, in floats.
struct SlotLayout {
  int64_t query = 0, scores = 0, acc = 0, stats = 0, k_rows = 0, v_rows = 0, rotated = 0, total = 0;
};

class PagedAttentionKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(p_, P::make(ctx.node, ctx.inputs));
    node_ = ctx.node.describe();
    rows_ = &best_attention_row_kernels();
    group_ = p_.num_heads / p_.kv_heads;
    span_ = attention_key_block(p_.head_size, p_.head_size);
    const int64_t d = p_.head_size, bs = p_.block_size;
    SlotLayout& s = slot_;
    s.query = 0;
    s.scores = s.query + group_ * d;
    s.acc = s.scores + group_ * span_;
    s.stats = s.acc + group_ * d;  // running max, sum and a span's correction per head
    s.k_rows = s.stats + 3 * group_;
    s.v_rows = s.k_rows + (p_.dtype == DType::kF32 ? 0 : bs * d);
    s.rotated = s.v_rows + (p_.dtype == DType::kF32 ? 0 : bs * d);
    s.total = s.rotated + d;  // a rotated query head (T elements fit in as many floats)
    slots_ = ctx.pool != nullptr ? ctx.pool->num_threads() : 1;
    token_seq_offset_ = 0;
    slots_offset_ = align_workspace(static_cast<size_t>(p_.tokens) * sizeof(int32_t));
    ctx.workspace_bytes = slots_offset_ + static_cast<size_t>(slots_) * align_workspace(static_cast<size_t>(s.total) * sizeof(float));
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch_dtype<float, Float16, BFloat16>(p_.dtype, [&]<typename T>() { return run_typed<T>(ctx); });
  }

 private:
  template <typename T>
  Status run_typed(const KernelContext& ctx) const;
  Status map_tokens(const KernelContext& ctx, int32_t* token_seq) const;
  template <typename T>
  void write_new_rows(const KernelContext& ctx, const int32_t* token_seq, T* key_cache, T* value_cache) const;
  template <typename T>
  void attend(const KernelContext& ctx, int64_t token, int64_t seq, int64_t g, const T* key_cache, const T* value_cache,
              float* scratch) const;

  // Position of packed token `t` of sequence `s`.
  int64_t position(const int32_t* starts, const int32_t* lens, int64_t s, int64_t t) const {
    return lens[s] - (starts[s + 1] - starts[s]) + (t - starts[s]);
  }
  // Element offset of (position, KV head g) of sequence s in a cache.
  int64_t slot_offset(const int32_t* tables, int64_t s, int64_t pos, int64_t g) const {
    const int64_t block = tables[s * p_.max_blocks + pos / p_.block_size];
    return ((block * p_.block_size + pos % p_.block_size) * p_.kv_heads + g) * p_.head_size;
  }

  P p_;
  std::string node_;
  const AttentionRowKernels* rows_ = nullptr;
  int64_t group_ = 1;
  int64_t span_ = 64;  // keys per online-softmax step (attention_key_block)
  SlotLayout slot_;
  int64_t slots_ = 1;
  size_t token_seq_offset_ = 0, slots_offset_ = 0;
};

Status PagedAttentionKernel::map_tokens(const KernelContext& ctx, int32_t* token_seq) const {
  const int32_t* tables = ctx.input(P::kBlockTables).ptr<const int32_t>();
  const int32_t* starts = ctx.input(P::kQueryStarts).ptr<const int32_t>();
  const int32_t* lens = ctx.input(P::kSeqLens).ptr<const int32_t>();
  std::fill(token_seq, token_seq + p_.tokens, -1);
  if (starts[0] < 0) return OG_ERROR(node_, ": query_starts[0] = ", starts[0], " is negative");
  for (int64_t s = 0; s < p_.sequences; ++s) {
    const int64_t begin = starts[s], end = starts[s + 1], len = lens[s];
    if (end < begin || end > p_.tokens) {
      return OG_ERROR(node_, ": sequence ", s, " has tokens [", begin, ", ", end, "), outside [", begin, ", ", p_.tokens, "]");
    }
    if (len < end - begin || len > p_.max_blocks * p_.block_size) {
      return OG_ERROR(node_, ": seq_lens[", s, "] = ", len, " must hold its ", end - begin, " new tokens and fit ",
                      p_.max_blocks, " blocks of ", p_.block_size);
    }
    if (p_.do_rotary && len > p_.rotary_rows) {
      return OG_ERROR(node_, ": sequence ", s, " reaches position ", len - 1, ", beyond cos_cache's ", p_.rotary_rows, " rows");
    }
    for (int64_t b = 0; b < (len + p_.block_size - 1) / p_.block_size; ++b) {
      const int32_t block = tables[s * p_.max_blocks + b];
      if (block < 0 || block >= p_.num_blocks) {
        return OG_ERROR(node_, ": block_tables[", s, "][", b, "] = ", block, " is outside the cache's ", p_.num_blocks, " blocks");
      }
    }
    for (int64_t t = begin; t < end; ++t) token_seq[t] = static_cast<int32_t>(s);
  }
  return Status::ok();
}

template <typename T>
void PagedAttentionKernel::write_new_rows(const KernelContext& ctx, const int32_t* token_seq, T* key_cache,
                                          T* value_cache) const {
  const int32_t* tables = ctx.input(P::kBlockTables).ptr<const int32_t>();
  const int32_t* starts = ctx.input(P::kQueryStarts).ptr<const int32_t>();
  const int32_t* lens = ctx.input(P::kSeqLens).ptr<const int32_t>();
  const int64_t d = p_.head_size, q_row = p_.query_row_elems(), half = p_.rotary_dim / 2;
  const T* query = ctx.input(P::kQuery).ptr<const T>();
  const T* new_k = p_.packed_qkv ? query + p_.num_heads * d : ctx.input(P::kKey).ptr<const T>();
  const T* new_v = p_.packed_qkv ? query + (p_.num_heads + p_.kv_heads) * d : ctx.input(P::kValue).ptr<const T>();
  const int64_t new_row = p_.packed_qkv ? q_row : p_.kv_heads * d;
  const T* cos = p_.do_rotary ? ctx.input(P::kCosCache).ptr<const T>() : nullptr;
  const T* sin = p_.do_rotary ? ctx.input(P::kSinCache).ptr<const T>() : nullptr;
  parallel_for(ctx.pool, p_.tokens, 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int32_t s = token_seq[t];
      if (s < 0) continue;
      const int64_t pos = position(starts, lens, s, t);
      for (int64_t g = 0; g < p_.kv_heads; ++g) {
        const int64_t dst = slot_offset(tables, s, pos, g);
        const T* k = new_k + t * new_row + g * d;
        if (p_.do_rotary) {
          rotate_head(k, key_cache + dst, cos + pos * half, sin + pos * half, p_.rotary_dim, d, p_.rotary_interleaved);
        } else {
          std::memcpy(key_cache + dst, k, static_cast<size_t>(d) * sizeof(T));
        }
        std::memcpy(value_cache + dst, new_v + t * new_row + g * d, static_cast<size_t>(d) * sizeof(T));
      }
    }
  });
}

// `n` rows of `d` elements, `stride` apart, as f32 rows: the cache itself for f32, else widened
// into `widened`.
template <typename T>
const float* f32_rows(const T* rows, int64_t stride, int64_t n, int64_t d, float* widened, int64_t& f32_stride) {
  if constexpr (std::is_same_v<T, float>) {
    f32_stride = stride;
    return rows;
  } else {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < d; ++i) widened[j * d + i] = static_cast<float>(load(rows[j * stride + i]));
    }
    f32_stride = d;
    return widened;
  }
}

template <typename T>
void PagedAttentionKernel::attend(const KernelContext& ctx, int64_t token, int64_t seq, int64_t g, const T* key_cache,
                                  const T* value_cache, float* scratch) const {
  const int32_t* tables = ctx.input(P::kBlockTables).ptr<const int32_t>();
  const int32_t* starts = ctx.input(P::kQueryStarts).ptr<const int32_t>();
  const int32_t* lens = ctx.input(P::kSeqLens).ptr<const int32_t>();
  const int64_t d = p_.head_size, bs = p_.block_size, row_stride = p_.kv_heads * d, half = p_.rotary_dim / 2;
  const int64_t pos = position(starts, lens, seq, token);
  const int64_t first_key = p_.window >= 0 ? std::max<int64_t>(0, pos + 1 - p_.window) : 0;
  float* q = scratch + slot_.query;
  float* scores = scratch + slot_.scores;
  float* acc = scratch + slot_.acc;
  float* max = scratch + slot_.stats;
  float* sum = max + group_;
  const float scale = p_.effective_scale();
  const T* query = ctx.input(P::kQuery).ptr<const T>() + token * p_.query_row_elems();
  for (int64_t j = 0; j < group_; ++j) {
    const T* head = query + (g * group_ + j) * d;
    if (p_.do_rotary) {
      T* rotated = reinterpret_cast<T*>(scratch + slot_.rotated);
      const T* cos = ctx.input(P::kCosCache).ptr<const T>() + pos * half;
      const T* sin = ctx.input(P::kSinCache).ptr<const T>() + pos * half;
      rotate_head(head, rotated, cos, sin, p_.rotary_dim, d, p_.rotary_interleaved);
      head = rotated;
    }
    for (int64_t i = 0; i < d; ++i) q[j * d + i] = static_cast<float>(load(head[i])) * scale;
    max[j] = kNegInf;
    sum[j] = 0.0f;
  }
  std::fill(acc, acc + group_ * d, 0.0f);
  float* correction = sum + group_;
  // Calls f(lo, n, rows, stride) for the pieces of [span_lo, span_hi) that lie in one KV block,
  // with those rows of `cache` as f32 (widened into `widened` where T is narrower).
  const auto for_each_piece = [&](int64_t span_lo, int64_t span_hi, const T* cache, float* widened, auto&& f) {
    for (int64_t lo = span_lo; lo < span_hi;) {
      const int64_t hi = std::min(span_hi, (lo / bs + 1) * bs);
      int64_t stride = 0;
      const float* rows = f32_rows(cache + slot_offset(tables, seq, lo, g), row_stride, hi - lo, d, widened, stride);
      f(lo - span_lo, hi - lo, rows, stride);
      lo = hi;
    }
  };
  // Heads in tiles of kQueryTile (each key / value row loaded serves them all) and the rest one by
  // one, as the contiguous kernel groups a decode's heads: the tile and single forms round alike.
  const int64_t tiled = group_ / kQueryTile * kQueryTile;
  for (int64_t span_lo = first_key; span_lo <= pos; span_lo += span_) {
    const int64_t span_hi = std::min(pos + 1, span_lo + span_), n = span_hi - span_lo;
    for_each_piece(span_lo, span_hi, key_cache, scratch + slot_.k_rows, [&](int64_t at, int64_t m, const float* k, int64_t stride) {
      for (int64_t j = 0; j < tiled; j += kQueryTile) {
        const float* qs[kQueryTile];
        float* out[kQueryTile];
        for (int r = 0; r < kQueryTile; ++r) {
          qs[r] = q + (j + r) * d;
          out[r] = scores + (j + r) * span_ + at;
        }
        rows_->dot_rows_tile(qs, k, stride, m, d, out);
      }
      for (int64_t j = tiled; j < group_; ++j) rows_->dot_rows(q + j * d, k, stride, m, d, scores + j * span_ + at);
    });
    for (int64_t j = 0; j < group_; ++j) {
      float* s = scores + j * span_;
      if (p_.softcap > 0.0f) apply_softcap(s, n, p_.softcap);
      const float new_max = std::max(max[j], rows_->row_max(s, n));
      correction[j] = max[j] == kNegInf ? 0.0f : std::exp(max[j] - new_max);
      sum[j] = sum[j] * correction[j] + rows_->exp_sum(s, n, new_max);
      max[j] = new_max;
    }
    // The correction scales the output once, with the span's first piece; the later pieces add on.
    for_each_piece(span_lo, span_hi, value_cache, scratch + slot_.v_rows, [&](int64_t at, int64_t m, const float* v, int64_t stride) {
      for (int64_t j = 0; j < tiled; j += kQueryTile) {
        const float* p[kQueryTile];
        float* out[kQueryTile];
        float scale_by[kQueryTile];
        for (int r = 0; r < kQueryTile; ++r) {
          p[r] = scores + (j + r) * span_ + at;
          out[r] = acc + (j + r) * d;
          scale_by[r] = at == 0 ? correction[j + r] : 1.0f;
        }
        rows_->accumulate_rows_tile(p, v, stride, m, d, scale_by, out);
      }
      for (int64_t j = tiled; j < group_; ++j) {
        rows_->accumulate_rows(scores + j * span_ + at, v, stride, m, d, at == 0 ? correction[j] : 1.0f, acc + j * d);
      }
    });
  }
  T* out = ctx.output(P::kOutput).ptr<T>() + token * p_.num_heads * d;
  const T* sinks = p_.has_head_sink ? ctx.input(P::kHeadSink).ptr<const T>() : nullptr;
  for (int64_t j = 0; j < group_; ++j) {
    float inv = 1.0f / sum[j];
    if (sinks != nullptr) {  // e^sink joins the denominator; rescaled to the larger of it and the max
      const float sink = static_cast<float>(load(sinks[g * group_ + j]));
      const float top = std::max(max[j], sink), kept = std::exp(max[j] - top);
      inv = kept / (sum[j] * kept + std::exp(sink - top));
    }
    T* o = out + (g * group_ + j) * d;
    for (int64_t i = 0; i < d; ++i) o[i] = store<T>(static_cast<compute_t<T>>(acc[j * d + i] * inv));
  }
}

template <typename T>
Status PagedAttentionKernel::run_typed(const KernelContext& ctx) const {
  auto* token_seq = reinterpret_cast<int32_t*>(static_cast<char*>(ctx.workspace) + token_seq_offset_);
  OG_RETURN_IF_ERROR(map_tokens(ctx, token_seq));
  const T* key_in = ctx.input(P::kKeyCache).ptr<const T>();
  const T* value_in = ctx.input(P::kValueCache).ptr<const T>();
  const auto bound_output = [&](int i) {
    return i < static_cast<int>(ctx.outputs.size()) ? ctx.output(i).ptr<T>() : nullptr;
  };
  T* key_cache = bound_output(P::kKeyCacheOut);
  T* value_cache = bound_output(P::kValueCacheOut);
  // Without outputs bound, the new rows go into the inputs' storage (the caller's cache).
  if (key_cache == nullptr) key_cache = const_cast<T*>(key_in);
  if (value_cache == nullptr) value_cache = const_cast<T*>(value_in);
  const auto cache_bytes = static_cast<size_t>(p_.num_blocks * p_.block_size * p_.kv_heads * p_.head_size) * sizeof(T);
  if (key_cache != key_in) std::memcpy(key_cache, key_in, cache_bytes);
  if (value_cache != value_in) std::memcpy(value_cache, value_in, cache_bytes);
  write_new_rows<T>(ctx, token_seq, key_cache, value_cache);

  const auto zero_padding = [&](int64_t t) {
    T* out = ctx.output(P::kOutput).ptr<T>() + t * p_.num_heads * p_.head_size;
    std::memset(static_cast<void*>(out), 0, static_cast<size_t>(p_.num_heads * p_.head_size) * sizeof(T));
  };
  const int64_t units = p_.tokens * p_.kv_heads;
  const size_t slot_bytes = align_workspace(static_cast<size_t>(slot_.total) * sizeof(float));
  char* slots = static_cast<char*>(ctx.workspace) + slots_offset_;
  std::atomic<int64_t> next{0};
  parallel_for(ctx.pool, slots_, 1, [&](int64_t begin, int64_t end) {
    for (int64_t slot = begin; slot < end; ++slot) {
      auto* scratch = reinterpret_cast<float*>(slots + static_cast<size_t>(slot) * slot_bytes);
      for (int64_t u = next.fetch_add(1); u < units; u = next.fetch_add(1)) {
        const int64_t t = u / p_.kv_heads, g = u % p_.kv_heads;
        if (token_seq[t] < 0) {
          if (g == 0) zero_padding(t);
          continue;
        }
        attend<T>(ctx, t, token_seq[t], g, key_cache, value_cache, scratch);
      }
    }
  });
  return Status::ok();
}

}  // namespace

void register_paged_attention_cpu_kernels(OpRegistry& registry) {
  KernelDef def;
  def.domain = P::kDomain;
  def.op_type = P::kOpType;
  def.dtypes = {DType::kF32, DType::kF16, DType::kBF16};
  def.create = [](const Node&) { return std::make_unique<PagedAttentionKernel>(); };
  registry.add_kernel(std::move(def));
}

}  // namespace onnx_genai
