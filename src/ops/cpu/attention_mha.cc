// com.microsoft MultiHeadAttention on the CPU (semantics in ops/schema/attention.h).
//
// Keys and values are first laid out per head ([B, N, T, D]: past rows, then the new rows with
// the projection bias added) in present_key / present_value, or in the workspace when those
// outputs are omitted; per-head (4-D) key / value inputs without present outputs are read in
// place. The attention core then runs with one query head per KV head. ORT's masks are additive
// (padding adds mask_filter_value) and go through the core's score-bias hook together with
// attention_bias; the causal mask drops keys. When the keys outnumber the queries the causal
// rule (the last query row sees every key) is not a plain diagonal, so the hook applies it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/thread_pool.h"
#include "ops/cpu/attention_cache.h"
#include "ops/cpu/attention_core.h"
#include "ops/cpu/attention_kernels.h"
#include "ops/schema/attention.h"
#include "ops/cpu/dispatch.h"

namespace onnx_genai {

namespace {


// Where the per-head K (or V) rows come from: an output, the workspace, or the input itself.
enum class Store { kOutput, kWorkspace, kInput };

class MhaKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(p_, MhaParams::make(ctx.node, ctx.inputs));
    const int64_t n = p_.num_heads, t = p_.total_len;
    const auto store_for = [&](int output) {
      if (ctx.has_output(output)) return Store::kOutput;
      return p_.kv_per_head ? Store::kInput : Store::kWorkspace;
    };
    k_store_ = store_for(MhaParams::kPresentKey);
    v_store_ = store_for(MhaParams::kPresentValue);
    // The causal diagonal fits the core's key ranges unless keys outnumber queries.
    causal_ = p_.unidirectional && p_.q_len > 1;
    causal_in_hook_ = causal_ && p_.kv_len > p_.q_len;

    AttentionConfig c;
    c.dtype = p_.dtype;
    c.batch = p_.batch;
    c.q_heads = c.kv_heads = n;
    c.q_len = p_.q_len;
    c.head_size = p_.head_size;
    c.v_head_size = p_.v_head_size;
    c.max_keys = t;
    c.k = AttentionStrides{n * t * p_.head_size, t * p_.head_size, p_.head_size};
    c.v = AttentionStrides{n * t * p_.v_head_size, t * p_.v_head_size, p_.v_head_size};
    c.out = AttentionStrides{p_.q_len * n * p_.v_head_size, p_.v_head_size, n * p_.v_head_size};
    c.causal = causal_ && !causal_in_hook_;
    core_.plan(c, ctx.pool != nullptr ? ctx.pool->num_threads() : 1);

    const int64_t k_elems = p_.batch * n * t * p_.head_size, v_elems = p_.batch * n * t * p_.v_head_size;
    core_offset_ = align_workspace(static_cast<size_t>(p_.batch) * sizeof(BatchKeys));
    k_offset_ = core_offset_ + align_workspace(core_.workspace_bytes());
    v_offset_ = k_offset_ + align_workspace(k_store_ == Store::kWorkspace ? static_cast<size_t>(dtype_storage_bytes(p_.dtype, k_elems)) : 0);
    ctx.workspace_bytes = v_offset_ + (v_store_ == Store::kWorkspace ? static_cast<size_t>(dtype_storage_bytes(p_.dtype, v_elems)) : 0);
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch_dtype<float, Float16, BFloat16>(p_.dtype, [&]<typename T>() {
      run_typed<T>(ctx);
      return Status::ok();
    });
  }

 private:
  template <typename T>
  T* storage(const KernelContext& ctx, Store store, int output, size_t offset) const {
    return store == Store::kOutput ? ctx.output(output).ptr<T>() : reinterpret_cast<T*>(static_cast<char*>(ctx.workspace) + offset);
  }

  // The per-head cache of input `input` (key or value): its new rows written after the past
  // rows' place (the core copies those as it reads them), unless read in place.
  template <typename T>
  const T* cache(const KernelContext& ctx, Store store, int input, int output, size_t offset, int64_t d,
                 int64_t bias_offset) const {
    const KernelTensor& in = ctx.input(input);
    if (store == Store::kInput) return in.ptr<const T>();
    T* out = storage<T>(ctx, store, output, offset);
    CacheRows rows;
    rows.past_len = p_.past_len;
    rows.fresh = in.data;
    rows.fresh_len = p_.kv_len;
    const int64_t n = p_.num_heads;
    rows.fresh_strides = p_.kv_per_head ? AttentionStrides{n * p_.kv_len * d, p_.kv_len * d, d}
                                        : AttentionStrides{p_.kv_len * n * d, d, n * d};
    rows.bias = p_.has_bias ? ctx.input(MhaParams::kBias).ptr<const T>() + bias_offset : nullptr;
    concat_cache(rows, p_.batch, n, d, out, ctx.pool);
    return out;
  }

  // attention_bias + padding (mask_filter_value) + the hook's causal mask, for keys [first, first + n).
  template <typename T>
  void add_masks(const KernelContext& ctx, int64_t b, int64_t h, int64_t s, int64_t first, int64_t n, float* scores) const {
    const int64_t t = p_.total_len;
    if (p_.has_attention_bias) {
      const T* row = ctx.input(MhaParams::kAttentionBias).ptr<const T>() +
                     (((p_.bias_batch == 1 ? 0 : b) * p_.bias_heads + (p_.bias_heads == 1 ? 0 : h)) * p_.q_len + s) * t + first;
      for (int64_t j = 0; j < n; ++j) scores[j] += static_cast<float>(load(row[j]));
    }
    if (p_.mask != MhaParams::Mask::kNone) {
      const int32_t* mask = ctx.input(MhaParams::kKeyPaddingMask).ptr<const int32_t>();
      for (int64_t j = 0; j < n; ++j) {
        const int64_t key = first + j;
        bool padding = false;
        switch (p_.mask) {
          case MhaParams::Mask::kKeyLengths: padding = key >= mask[b]; break;
          case MhaParams::Mask::kPerKey: padding = mask[b * t + key] == 0; break;
          case MhaParams::Mask::kPerQueryKey: padding = mask[(b * p_.q_len + s) * t + key] == 0; break;
          case MhaParams::Mask::kNone: break;
        }
        if (padding) scores[j] += p_.mask_filter_value;
      }
    }
    if (causal_in_hook_ && s < p_.q_len - 1) {
      for (int64_t j = std::max<int64_t>(p_.past_len + s + 1 - first, 0); j < n; ++j) {
        scores[j] = -std::numeric_limits<float>::infinity();
      }
    }
  }

  template <typename T>
  void run_typed(const KernelContext& ctx) const {
    const int64_t n = p_.num_heads, d = p_.head_size;
    const T* k = cache<T>(ctx, k_store_, MhaParams::kKey, MhaParams::kPresentKey, k_offset_, d, n * d);
    const T* v = cache<T>(ctx, v_store_, MhaParams::kValue, MhaParams::kPresentValue, v_offset_, p_.v_head_size, 2 * n * d);
    auto* keys = static_cast<BatchKeys*>(ctx.workspace);
    for (int64_t b = 0; b < p_.batch; ++b) keys[b] = BatchKeys{p_.total_len, p_.past_len, p_.past_len};
    PastRows<T> past;
    if (p_.has_past) {
      const int64_t len = p_.past_len, dv = p_.v_head_size;
      past.k = ctx.input(MhaParams::kPastKey).ptr<const T>();
      past.v = ctx.input(MhaParams::kPastValue).ptr<const T>();
      past.k_strides = AttentionStrides{n * len * d, len * d, d};
      past.v_strides = AttentionStrides{n * len * dv, len * dv, dv};
      past.k_dst = storage<T>(ctx, k_store_, MhaParams::kPresentKey, k_offset_);
      past.v_dst = storage<T>(ctx, v_store_, MhaParams::kPresentValue, v_offset_);
    }

    const T* query = ctx.input(MhaParams::kQuery).ptr<const T>();
    const T* bias = p_.has_bias ? ctx.input(MhaParams::kBias).ptr<const T>() : nullptr;
    const float scale = p_.effective_scale();
    const auto query_rows = [&](int64_t b, int64_t h, int64_t s, float* q) {
      const T* src = query + (b * p_.q_len + s) * n * d + h * d;
      for (int64_t i = 0; i < d; ++i) {
        // The biased query is rounded to T first, as a T-typed projection would leave it.
        const T biased = bias != nullptr ? store<T>(load(src[i]) + load(bias[h * d + i])) : src[i];
        q[i] = static_cast<float>(load(biased)) * scale;
      }
    };
    const auto mask_rows = [&](int64_t b, int64_t h, int64_t s, int64_t first, int64_t count, float* scores) {
      add_masks<T>(ctx, b, h, s, first, count, scores);
    };
    const QueryLoader load_query = query_rows;
    const ScoreBias add_bias = mask_rows;
    AttentionRun<T> run;
    run.past = p_.has_past ? &past : nullptr;
    run.k = k;
    run.v = v;
    run.out = ctx.output(MhaParams::kOutput).ptr<T>();
    run.keys = keys;
    run.load_query = &load_query;
    const bool masked = p_.has_attention_bias || p_.mask != MhaParams::Mask::kNone || causal_in_hook_;
    run.add_bias = masked ? &add_bias : nullptr;
    core_.run(run, static_cast<char*>(ctx.workspace) + core_offset_, ctx.pool);
  }

  MhaParams p_;
  Store k_store_ = Store::kWorkspace, v_store_ = Store::kWorkspace;
  bool causal_ = false, causal_in_hook_ = false;
  AttentionCore core_;
  size_t core_offset_ = 0, k_offset_ = 0, v_offset_ = 0;
};

}  // namespace

std::unique_ptr<OpKernel> make_multi_head_attention_kernel(const Node&) { return std::make_unique<MhaKernel>(); }

}  // namespace onnx_genai
