// Building a per-head (BNSH) key or value cache [batch, heads, past + fresh, d]: each (batch,
// head) gets its past rows (unless the attention core copies them), then its new rows, read through any (batch, head, row) strides (the
// [batch, seq, heads*d] layout of attention inputs, or per-head inputs) with an optional per-head
// bias [heads * d] added (MultiHeadAttention's projection bias). Used by MultiHeadAttention and
// the ONNX Attention for their present outputs; parallel over (batch, head).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/thread_pool.h"
#include "ops/cpu/attention_core.h"
#include "ops/cpu/dispatch.h"

namespace onnx_genai {

struct CacheRows {
  // [batch, heads, past_len, d]; null leaves rows [0, past_len) alone (the attention core copies
  // them while it reads them: AttentionRun::past).
  const void* past = nullptr;
  int64_t past_len = 0;
  const void* fresh = nullptr;  // new rows, element (b, h, s, i) at b*batch + h*head + s*row + i
  AttentionStrides fresh_strides;
  int64_t fresh_len = 0;
  const void* bias = nullptr;  // [heads * d] added to the new rows, or null
};

template <typename T>
void concat_cache(const CacheRows& rows, int64_t batch, int64_t heads, int64_t d, T* cache, ThreadPool* pool) {
  const auto* past = static_cast<const T*>(rows.past);
  const auto* fresh = static_cast<const T*>(rows.fresh);
  const auto* bias = static_cast<const T*>(rows.bias);
  const int64_t len = rows.past_len + rows.fresh_len;
  const AttentionStrides& st = rows.fresh_strides;
  parallel_for(pool, batch * heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / heads, h = bh % heads;
      T* out = cache + bh * len * d;
      if (past != nullptr && rows.past_len > 0) {
        std::memcpy(out, past + bh * rows.past_len * d, static_cast<size_t>(rows.past_len * d) * sizeof(T));
      }
      for (int64_t s = 0; s < rows.fresh_len; ++s) {
        const T* src = fresh + b * st.batch + h * st.head + s * st.row;
        T* dst = out + (rows.past_len + s) * d;
        if (bias == nullptr) {
          std::memcpy(dst, src, static_cast<size_t>(d) * sizeof(T));
        } else {
          for (int64_t i = 0; i < d; ++i) dst[i] = store<T>(load(src[i]) + load(bias[h * d + i]));
        }
      }
    }
  });
}

}  // namespace onnx_genai
