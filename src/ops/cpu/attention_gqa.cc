// com.microsoft GroupQueryAttention on the CPU (semantics in ops/schema/attention.h).
//
// A run has three phases:
//   1. per batch entry, from seqlens_k: key count, causal offset, past rows to keep, where the new
//      rows go (all bounds-checked: seqlens_k is data);
//   2. present_key / present_value: past rows copied (skipped when past and present are one
//      buffer), new K rows rotated and written, V rows copied, the rest zeroed; parallel over
//      (batch, KV head);
//   3. the attention core over the present cache; queries are rotated, rounded to the storage
//      type (as ORT does) and scaled as the core loads them.
// Without present outputs the cache lives in the workspace.
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/thread_pool.h"
#include "ops/cpu/attention_core.h"
#include "ops/cpu/attention_kernels.h"
#include "ops/schema/attention.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/rotary_rows.h"

namespace onnx_genai {

namespace {

// A rotated query head is built in a stack buffer of this many elements.
constexpr int64_t kMaxRotaryHeadSize = 1024;

// Where one batch entry's rows go in the present cache.
struct GqaRows {
  int64_t keep = 0;      // past rows kept at [0, keep)
  int64_t write_at = 0;  // first row of the new keys / values
};

class GqaKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(p_, GqaParams::make(ctx.node, ctx.inputs, ctx.value(GqaParams::kTotalSequenceLength)));
    node_ = ctx.node.describe();
    if (p_.do_rotary && p_.head_size > kMaxRotaryHeadSize) {
      return ctx.fail("rotary supports head sizes up to ", kMaxRotaryHeadSize, ", got ", p_.head_size);
    }
    if (ctx.has_output(GqaParams::kPresentKey) != ctx.has_output(GqaParams::kPresentValue)) {
      return ctx.fail("present_key and present_value must be both requested or both omitted");
    }
    has_present_ = ctx.has_output(GqaParams::kPresentKey);

    const int64_t d = p_.head_size, len = p_.present_len;
    AttentionConfig c;
    c.dtype = p_.dtype;
    c.batch = p_.batch;
    c.q_heads = p_.num_heads;
    c.kv_heads = p_.kv_heads;
    c.q_len = p_.q_len;
    c.head_size = c.v_head_size = d;
    c.max_keys = len;
    c.k = c.v = AttentionStrides{p_.kv_heads * len * d, len * d, d};
    c.out = AttentionStrides{p_.q_len * p_.num_heads * d, d, p_.num_heads * d};
    c.softcap = p_.softcap;
    c.causal = p_.causal;
    c.window = p_.window;
    c.smooth_softmax = p_.smooth_softmax;
    core_.plan(c, ctx.pool != nullptr ? ctx.pool->num_threads() : 1);

    const size_t batch_bytes = static_cast<size_t>(p_.batch) * (sizeof(BatchKeys) + sizeof(GqaRows));
    core_offset_ = align_workspace(batch_bytes);
    cache_offset_ = core_offset_ + align_workspace(core_.workspace_bytes());
    cache_elems_ = p_.batch * p_.kv_heads * len * d;
    const size_t cache_bytes = has_present_ ? 0 : 2 * static_cast<size_t>(dtype_storage_bytes(p_.dtype, cache_elems_));
    ctx.workspace_bytes = cache_offset_ + cache_bytes;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch_dtype<float, Float16, BFloat16>(p_.dtype, [&]<typename T>() { return run_typed<T>(ctx); });
  }

 private:
  template <typename T>
  Status run_typed(const KernelContext& ctx) const;
  Status plan_batches(const KernelContext& ctx, BatchKeys* keys, GqaRows* rows) const;
  Status check_positions(const KernelContext& ctx, const BatchKeys* keys) const;
  // New rows (rotated keys, values) and the zeroed tail; past rows are the core's (AttentionRun::past)
  // unless past and present share a buffer.
  template <typename T>
  void write_present(const KernelContext& ctx, const BatchKeys* keys, const GqaRows* rows, T* present_k,
                     T* present_v) const;

  // Rotary position of new token s of batch entry b.
  int64_t position(const int64_t* position_ids, const BatchKeys* keys, int64_t b, int64_t s) const {
    if (position_ids != nullptr) return p_.first_prompt ? position_ids[0] + s : position_ids[b * p_.q_len + s];
    return p_.first_prompt ? s : keys[b].total - p_.q_len + s;
  }
  int64_t q_row_elems() const { return (p_.packed_qkv ? p_.num_heads + 2 * p_.kv_heads : p_.num_heads) * p_.head_size; }
  // ORT's buffer sharing: present and past are the same memory, already holding the past rows.
  template <typename T>
  bool shares_buffers(const KernelContext& ctx, const T* present_k, const T* present_v) const {
    return p_.has_past && ctx.input(GqaParams::kPastKey).data == present_k && ctx.input(GqaParams::kPastValue).data == present_v;
  }

  GqaParams p_;
  std::string node_;
  bool has_present_ = false;
  AttentionCore core_;
  size_t core_offset_ = 0, cache_offset_ = 0;
  int64_t cache_elems_ = 0;
};

Status GqaKernel::plan_batches(const KernelContext& ctx, BatchKeys* keys, GqaRows* rows) const {
  const int32_t* seqlens = ctx.input(GqaParams::kSeqlensK).ptr<const int32_t>();
  const int64_t s_len = p_.q_len;
  for (int64_t b = 0; b < p_.batch; ++b) {
    const int64_t last = seqlens[b];
    if (last < 0 || last >= p_.present_len) {
      return OG_ERROR(node_, ": seqlens_k[", b, "] = ", last, " is out of range [0, ", p_.present_len, ") (present length)");
    }
    const int64_t total = last + 1;
    if (!p_.first_prompt && total < s_len) {
      return OG_ERROR(node_, ": seqlens_k[", b, "] = ", last, " is too small for sequence length ", s_len);
    }
    const int64_t offset = p_.first_prompt ? 0 : total - s_len;
    const int64_t keep = p_.kv_len == 0 ? total : offset;
    if (keep > p_.past_len) {
      return OG_ERROR(node_, ": seqlens_k[", b, "] = ", last, " needs ", keep, " past rows but past_key holds ", p_.past_len);
    }
    if (p_.has_bias && total > p_.bias_keys) {
      return OG_ERROR(node_, ": seqlens_k[", b, "] = ", last, " reaches past attention_bias's ", p_.bias_keys, " key columns");
    }
    keys[b] = BatchKeys{total, offset, keep};
    rows[b] = GqaRows{keep, offset};
  }
  return p_.do_rotary ? check_positions(ctx, keys) : Status::ok();
}

Status GqaKernel::check_positions(const KernelContext& ctx, const BatchKeys* keys) const {
  const int64_t* ids = p_.has_position_ids ? ctx.input(GqaParams::kPositionIds).ptr<const int64_t>() : nullptr;
  for (int64_t b = 0; b < p_.batch; ++b) {
    for (int64_t s = 0; s < p_.q_len; ++s) {
      const int64_t pos = position(ids, keys, b, s);
      if (pos < 0 || pos >= p_.rotary_rows) {
        return OG_ERROR(node_, ": rotary position ", pos, " (batch ", b, ", token ", s, ") is out of range for cos_cache's ",
                        p_.rotary_rows, " positions");
      }
    }
  }
  return Status::ok();
}

template <typename T>
void GqaKernel::write_present(const KernelContext& ctx, const BatchKeys* keys, const GqaRows* rows, T* present_k,
                              T* present_v) const {
  const int64_t d = p_.head_size, len = p_.present_len, kv_heads = p_.kv_heads;
  const bool shared = shares_buffers(ctx, present_k, present_v);
  const T* query = ctx.input(GqaParams::kQuery).ptr<const T>();
  const T* new_k = p_.packed_qkv ? query + p_.num_heads * d : ctx.input(GqaParams::kKey).ptr<const T>();
  const T* new_v = p_.packed_qkv ? query + (p_.num_heads + kv_heads) * d : ctx.input(GqaParams::kValue).ptr<const T>();
  const int64_t new_row = p_.packed_qkv ? q_row_elems() : kv_heads * d;
  const T* cos = p_.do_rotary ? ctx.input(GqaParams::kCosCache).ptr<const T>() : nullptr;
  const T* sin = p_.do_rotary ? ctx.input(GqaParams::kSinCache).ptr<const T>() : nullptr;
  const int64_t* ids = p_.has_position_ids ? ctx.input(GqaParams::kPositionIds).ptr<const int64_t>() : nullptr;
  const int64_t half = p_.rotary_dim / 2;
  const auto row_bytes = static_cast<size_t>(d) * sizeof(T);

  parallel_for(ctx.pool, p_.batch * kv_heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bg = begin; bg < end; ++bg) {
      const int64_t b = bg / kv_heads, g = bg % kv_heads;
      const GqaRows& r = rows[b];
      T* dk = present_k + bg * len * d;
      T* dv = present_v + bg * len * d;
      for (int64_t s = 0; s < p_.kv_len; ++s) {
        const int64_t src = (b * p_.q_len + s) * new_row + g * d;
        T* k_row = dk + (r.write_at + s) * d;
        if (p_.do_rotary) {
          const int64_t pos = position(ids, keys, b, s);
          rotate_head(new_k + src, k_row, cos + pos * half, sin + pos * half, p_.rotary_dim, d, p_.rotary_interleaved);
        } else {
          std::memcpy(k_row, new_k + src, row_bytes);
        }
        std::memcpy(dv + (r.write_at + s) * d, new_v + src, row_bytes);
      }
      if (!shared) {
        const int64_t written = std::max(r.keep, r.write_at + p_.kv_len);
        std::memset(static_cast<void*>(dk + written * d), 0, static_cast<size_t>(len - written) * row_bytes);
        std::memset(static_cast<void*>(dv + written * d), 0, static_cast<size_t>(len - written) * row_bytes);
      }
    }
  });
}

template <typename T>
Status GqaKernel::run_typed(const KernelContext& ctx) const {
  auto* keys = static_cast<BatchKeys*>(ctx.workspace);
  auto* rows = reinterpret_cast<GqaRows*>(keys + p_.batch);
  OG_RETURN_IF_ERROR(plan_batches(ctx, keys, rows));
  char* ws = static_cast<char*>(ctx.workspace);
  T* present_k = has_present_ ? ctx.output(GqaParams::kPresentKey).ptr<T>() : reinterpret_cast<T*>(ws + cache_offset_);
  T* present_v = has_present_ ? ctx.output(GqaParams::kPresentValue).ptr<T>() : present_k + cache_elems_;
  write_present(ctx, keys, rows, present_k, present_v);

  const T* query = ctx.input(GqaParams::kQuery).ptr<const T>();
  const T* cos = p_.do_rotary ? ctx.input(GqaParams::kCosCache).ptr<const T>() : nullptr;
  const T* sin = p_.do_rotary ? ctx.input(GqaParams::kSinCache).ptr<const T>() : nullptr;
  const int64_t* ids = p_.has_position_ids ? ctx.input(GqaParams::kPositionIds).ptr<const int64_t>() : nullptr;
  const int64_t d = p_.head_size, q_row = q_row_elems(), half = p_.rotary_dim / 2;
  const float scale = p_.effective_scale();
  const auto query_rows = [&](int64_t b, int64_t h, int64_t s, float* q) {
    const T* src = query + (b * p_.q_len + s) * q_row + h * d;
    T rotated[kMaxRotaryHeadSize];
    if (p_.do_rotary) {
      const int64_t pos = position(ids, keys, b, s);
      rotate_head(src, rotated, cos + pos * half, sin + pos * half, p_.rotary_dim, d, p_.rotary_interleaved);
      src = rotated;
    }
    for (int64_t i = 0; i < d; ++i) q[i] = static_cast<float>(load(src[i])) * scale;
  };
  const T* bias = p_.has_bias ? ctx.input(GqaParams::kAttentionBias).ptr<const T>() : nullptr;
  const int64_t bias_rows = p_.q_len * p_.bias_keys;
  const auto bias_rows_fn = [&](int64_t b, int64_t h, int64_t s, int64_t first, int64_t n, float* scores) {
    const T* row = bias + ((p_.bias_batch == 1 ? 0 : b) * p_.bias_heads + (p_.bias_heads == 1 ? 0 : h)) * bias_rows +
                   s * p_.bias_keys + first;
    for (int64_t j = 0; j < n; ++j) scores[j] += static_cast<float>(load(row[j]));
  };

  // FunctionRefs point at the lambdas above, which outlive the call.
  const QueryLoader load_query = query_rows;
  const ScoreBias add_bias = bias_rows_fn;
  PastRows<T> past;
  past.k = p_.has_past ? ctx.input(GqaParams::kPastKey).ptr<const T>() : nullptr;
  past.v = p_.has_past ? ctx.input(GqaParams::kPastValue).ptr<const T>() : nullptr;
  past.k_strides = past.v_strides = AttentionStrides{p_.kv_heads * p_.past_len * d, p_.past_len * d, d};
  past.k_dst = present_k;
  past.v_dst = present_v;
  AttentionRun<T> run;
  run.past = p_.has_past && !shares_buffers(ctx, present_k, present_v) ? &past : nullptr;
  run.k = present_k;
  run.v = present_v;
  run.out = ctx.output(GqaParams::kOutput).ptr<T>();
  run.keys = keys;
  run.head_sink = p_.has_head_sink ? ctx.input(GqaParams::kHeadSink).ptr<const T>() : nullptr;
  run.load_query = &load_query;
  run.add_bias = bias != nullptr ? &add_bias : nullptr;
  core_.run(run, ws + core_offset_, ctx.pool);
  return Status::ok();
}

}  // namespace

std::unique_ptr<OpKernel> make_group_query_attention_kernel(const Node&) { return std::make_unique<GqaKernel>(); }

}  // namespace onnx_genai
