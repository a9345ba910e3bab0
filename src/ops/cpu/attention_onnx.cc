// ONNX Attention (opset 23, 24) on the CPU (semantics in ops/schema/attention.h).
//
// With a past, or when present outputs are requested, keys and values are laid out per head
// ([B, Nkv, T, D]: past rows, then the new rows) in present_key / present_value or in the
// workspace; otherwise the core reads K and V in place, 3-D or 4-D. is_causal and
// nonpad_kv_seqlen become the core's per-batch key ranges; attn_mask goes through the
// score-bias hook (false -> -inf). qk_matmul_output is a separate, plain pass over every
// (batch, head, row): it exists for inspection, not speed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/thread_pool.h"
#include "ops/cpu/attention_cache.h"
#include "ops/cpu/attention_core.h"
#include "ops/cpu/attention_kernels.h"
#include "ops/schema/attention.h"
#include "ops/cpu/dispatch.h"

namespace onnx_genai {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

class OnnxAttentionKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const bool qk = ctx.has_output(OnnxAttentionParams::kQkMatmulOutput);
    OG_ASSIGN_OR_RETURN(p_, OnnxAttentionParams::make(ctx.node, ctx.inputs, qk));
    const int64_t t = p_.total_len;
    k_cached_ = p_.has_past || ctx.has_output(OnnxAttentionParams::kPresentKey);
    v_cached_ = p_.has_past || ctx.has_output(OnnxAttentionParams::kPresentValue);
    k_to_output_ = ctx.has_output(OnnxAttentionParams::kPresentKey);
    v_to_output_ = ctx.has_output(OnnxAttentionParams::kPresentValue);

    AttentionConfig c;
    c.dtype = p_.dtype;
    c.batch = p_.batch;
    c.q_heads = p_.q_heads;
    c.kv_heads = p_.kv_heads;
    c.q_len = p_.q_len;
    c.head_size = p_.head_size;
    c.v_head_size = p_.v_head_size;
    c.max_keys = t;
    c.k = k_cached_ ? per_head(p_.head_size, t) : input_strides(p_.head_size);
    c.v = v_cached_ ? per_head(p_.v_head_size, t) : input_strides(p_.v_head_size);
    const int64_t dv = p_.v_head_size;
    c.out = p_.four_d ? AttentionStrides{p_.q_heads * p_.q_len * dv, p_.q_len * dv, dv}
                      : AttentionStrides{p_.q_len * p_.q_heads * dv, dv, p_.q_heads * dv};
    c.softcap = p_.softcap;
    c.causal = p_.is_causal;
    config_ = c;
    core_.plan(c, ctx.pool != nullptr ? ctx.pool->num_threads() : 1);

    core_offset_ = align_workspace(static_cast<size_t>(p_.batch) * sizeof(BatchKeys));
    k_offset_ = core_offset_ + align_workspace(core_.workspace_bytes());
    const auto cache_bytes = [&](bool in_workspace, int64_t d) {
      return in_workspace ? align_workspace(static_cast<size_t>(dtype_storage_bytes(p_.dtype, p_.batch * p_.kv_heads * t * d))) : 0;
    };
    v_offset_ = k_offset_ + cache_bytes(k_cached_ && !k_to_output_, p_.head_size);
    qk_offset_ = v_offset_ + cache_bytes(v_cached_ && !v_to_output_, dv);
    // The qk pass needs one query vector and one score row per thread.
    qk_slots_ = ctx.pool != nullptr ? ctx.pool->num_threads() : 1;
    const size_t qk_bytes = p_.qk_mode >= 0 ? static_cast<size_t>(qk_slots_ * (p_.head_size + t)) * sizeof(float) : 0;
    ctx.workspace_bytes = qk_offset_ + qk_bytes;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch_dtype<float, Float16, BFloat16>(p_.dtype, [&]<typename T>() {
      run_typed<T>(ctx);
      return Status::ok();
    });
  }

 private:
  AttentionStrides per_head(int64_t d, int64_t len) const { return {p_.kv_heads * len * d, len * d, d}; }
  // K or V as given: [B, Nkv, L, d] or [B, L, Nkv*d].
  AttentionStrides input_strides(int64_t d) const {
    return p_.four_d ? per_head(d, p_.kv_len) : AttentionStrides{p_.kv_len * p_.kv_heads * d, d, p_.kv_heads * d};
  }

  template <typename T>
  T* storage(const KernelContext& ctx, bool to_output, int output, size_t offset) const {
    return to_output ? ctx.output(output).ptr<T>() : reinterpret_cast<T*>(static_cast<char*>(ctx.workspace) + offset);
  }

  // K or V as the core reads it: per head with the new rows after the past rows' place (the
  // core copies those as it reads them), or the input in place.
  template <typename T>
  const T* cache(const KernelContext& ctx, bool cached, bool to_output, int input, int output, size_t offset, int64_t d) const {
    if (!cached) return ctx.input(input).ptr<const T>();
    T* out = storage<T>(ctx, to_output, output, offset);
    CacheRows rows;
    rows.past_len = p_.past_len;
    rows.fresh = ctx.input(input).data;
    rows.fresh_strides = input_strides(d);
    rows.fresh_len = p_.kv_len;
    concat_cache(rows, p_.batch, p_.kv_heads, d, out, ctx.pool);
    return out;
  }

  // Keys of each batch entry: nonpad_kv_seqlen cuts them; without a past it also moves the causal diagonal.
  void batch_keys(const KernelContext& ctx, BatchKeys* keys) const {
    const int64_t* nonpad = p_.has_nonpad ? ctx.input(OnnxAttentionParams::kNonpadKvSeqlen).ptr<const int64_t>() : nullptr;
    for (int64_t b = 0; b < p_.batch; ++b) {
      const int64_t valid = nonpad != nullptr ? std::clamp<int64_t>(nonpad[b], 0, p_.total_len) : p_.total_len;
      // Clamped so that no arithmetic on the data overflows; beyond T + S every row sees every key anyway.
      const int64_t offset = p_.has_past || nonpad == nullptr ? p_.past_len
                                                              : std::clamp<int64_t>(nonpad[b], 0, p_.total_len + p_.q_len) - p_.q_len;
      keys[b] = BatchKeys{valid, offset, p_.past_len};
    }
  }

  // Adds attn_mask to scores of keys [first, first + n); a false bool entry sets `removed`.
  template <typename T>
  void add_mask(const KernelContext& ctx, int64_t b, int64_t h, int64_t s, int64_t first, int64_t n, float* scores,
                float removed = kNegInf) const {
    const int64_t at = b * p_.mask_batch_stride + h * p_.mask_head_stride + s * p_.mask_row_stride + first;
    if (p_.mask_bool) {
      const bool* row = ctx.input(OnnxAttentionParams::kAttnMask).ptr<const bool>() + at;
      for (int64_t j = 0; j < n; ++j) scores[j] = row[j] ? scores[j] : removed;
    } else {
      const T* row = ctx.input(OnnxAttentionParams::kAttnMask).ptr<const T>() + at;
      for (int64_t j = 0; j < n; ++j) scores[j] += static_cast<float>(load(row[j]));
    }
  }

  template <typename T>
  void write_qk(const KernelContext& ctx, const T* k, const BatchKeys* keys, const QueryLoader& load_query) const;
  template <typename T>
  void run_typed(const KernelContext& ctx) const;

  OnnxAttentionParams p_;
  AttentionConfig config_;
  bool k_cached_ = false, v_cached_ = false, k_to_output_ = false, v_to_output_ = false;
  AttentionCore core_;
  size_t core_offset_ = 0, k_offset_ = 0, v_offset_ = 0, qk_offset_ = 0;
  int64_t qk_slots_ = 1;
};

// The most negative finite T: what ORT's qk_matmul_output shows for a key that a bool mask, the
// causal rule or nonpad_kv_seqlen removes (a float mask's -inf stays -inf).
template <typename T>
float lowest_finite() {
  if constexpr (std::is_same_v<T, Float16>) return -65504.0f;
  if constexpr (std::is_same_v<T, BFloat16>) return -3.38953139e38f;
  return std::numeric_limits<float>::lowest();
}

// qk_matmul_output [B, Nq, S, T] in mode 0 (scaled q.k), 1 (softcapped), 2 (+ masks) or 3
// (softmax; 0 for a row with every key removed).
template <typename T>
void OnnxAttentionKernel::write_qk(const KernelContext& ctx, const T* k, const BatchKeys* keys,
                                   const QueryLoader& load_query) const {
  const int64_t t = p_.total_len, d = p_.head_size, group = p_.q_heads / p_.kv_heads;
  const float removed = lowest_finite<T>();
  const AttentionStrides& st = config_.k;
  T* out = ctx.output(OnnxAttentionParams::kQkMatmulOutput).ptr<T>();
  float* scratch = reinterpret_cast<float*>(static_cast<char*>(ctx.workspace) + qk_offset_);
  const int64_t vectors = p_.batch * p_.q_heads * p_.q_len;
  parallel_for(ctx.pool, qk_slots_, 1, [&](int64_t slot_begin, int64_t slot_end) {
    for (int64_t slot = slot_begin; slot < slot_end; ++slot) {
      float* q = scratch + slot * (d + t);
      float* score = q + d;
      for (int64_t i = slot * vectors / qk_slots_; i < (slot + 1) * vectors / qk_slots_; ++i) {
        const int64_t s = i % p_.q_len, h = (i / p_.q_len) % p_.q_heads, b = i / (p_.q_len * p_.q_heads);
        load_query(b, h, s, q);
        const T* key_rows = k + b * st.batch + (h / group) * st.head;
        for (int64_t j = 0; j < t; ++j) {
          float dot = 0.0f;
          for (int64_t e = 0; e < d; ++e) dot += q[e] * static_cast<float>(load(key_rows[j * st.row + e]));
          score[j] = dot;
        }
        if (p_.qk_mode >= 1 && p_.softcap > 0.0f) apply_softcap(score, t, p_.softcap);
        if (p_.qk_mode >= 2) {
          if (p_.has_mask) add_mask<T>(ctx, b, h, s, 0, t, score, removed);
          const int64_t hi = p_.is_causal ? std::min(keys[b].causal_offset + s + 1, keys[b].total) : keys[b].total;
          for (int64_t j = std::max<int64_t>(hi, 0); j < t; ++j) score[j] = removed;
        }
        if (p_.qk_mode == 3) {
          const float top = *std::max_element(score, score + t);
          float sum = 0.0f;
          for (int64_t j = 0; j < t; ++j) sum += (score[j] = top <= removed ? 0.0f : std::exp(score[j] - top));
          for (int64_t j = 0; j < t; ++j) score[j] = sum > 0.0f ? score[j] / sum : 0.0f;
        }
        T* dst = out + i * t;
        for (int64_t j = 0; j < t; ++j) dst[j] = store<T>(score[j]);
      }
    }
  });
}

template <typename T>
void OnnxAttentionKernel::run_typed(const KernelContext& ctx) const {
  const T* k = cache<T>(ctx, k_cached_, k_to_output_, OnnxAttentionParams::kK, OnnxAttentionParams::kPresentKey, k_offset_,
                        p_.head_size);
  const T* v = cache<T>(ctx, v_cached_, v_to_output_, OnnxAttentionParams::kV, OnnxAttentionParams::kPresentValue, v_offset_,
                        p_.v_head_size);
  auto* keys = static_cast<BatchKeys*>(ctx.workspace);
  batch_keys(ctx, keys);
  PastRows<T> past;
  if (p_.has_past) {
    past.k = ctx.input(OnnxAttentionParams::kPastKey).ptr<const T>();
    past.v = ctx.input(OnnxAttentionParams::kPastValue).ptr<const T>();
    past.k_strides = per_head(p_.head_size, p_.past_len);
    past.v_strides = per_head(p_.v_head_size, p_.past_len);
    past.k_dst = storage<T>(ctx, k_to_output_, OnnxAttentionParams::kPresentKey, k_offset_);
    past.v_dst = storage<T>(ctx, v_to_output_, OnnxAttentionParams::kPresentValue, v_offset_);
  }

  const T* query = ctx.input(OnnxAttentionParams::kQ).ptr<const T>();
  const int64_t d = p_.head_size;
  const float scale = p_.effective_scale();
  const auto query_rows = [&](int64_t b, int64_t h, int64_t s, float* q) {
    const T* src = query + (p_.four_d ? ((b * p_.q_heads + h) * p_.q_len + s) * d : (b * p_.q_len + s) * p_.q_heads * d + h * d);
    for (int64_t i = 0; i < d; ++i) q[i] = static_cast<float>(load(src[i])) * scale;
  };
  const auto mask_rows = [&](int64_t b, int64_t h, int64_t s, int64_t first, int64_t n, float* scores) {
    add_mask<T>(ctx, b, h, s, first, n, scores);
  };
  const QueryLoader load_query = query_rows;
  const ScoreBias add_bias = mask_rows;
  AttentionRun<T> run;
  run.past = p_.has_past ? &past : nullptr;
  run.k = k;
  run.v = v;
  run.out = ctx.output(OnnxAttentionParams::kY).ptr<T>();
  run.keys = keys;
  run.load_query = &load_query;
  run.add_bias = p_.has_mask ? &add_bias : nullptr;
  core_.run(run, static_cast<char*>(ctx.workspace) + core_offset_, ctx.pool);
  // After the core: every past row is in the cache by then.
  if (p_.qk_mode >= 0) write_qk(ctx, k, keys, load_query);
}

}  // namespace

std::unique_ptr<OpKernel> make_onnx_attention_kernel(const Node&) { return std::make_unique<OnnxAttentionKernel>(); }

}  // namespace onnx_genai
