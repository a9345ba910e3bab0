// The attention engine shared by GroupQueryAttention, MultiHeadAttention and the opset-23
// Attention: softmax(q . K^T * scale [softcap] [+ bias]) . V for every (batch, query head, query
// row), with grouped KV heads, causal / sliding-window key ranges per batch entry, smooth
// softmax and head sinks. Each op front end lays its K and V out (a present cache or its
// inputs), says where they live, and hands the core a query loader (rotary, scale) and an
// optional score-bias hook (attention_bias, masks).
//
// Work split (plan once per plan, run many times):
//
//   unit = (batch b, KV head g, slice of g's query heads, tile of query rows, KV chunk)
//
//   All query vectors of a unit (<= kMaxVectors: the heads of one KV group times a few rows)
//   share one pass over the unit's keys: each block of K / V rows is loaded (widened to f32
//   when 16-bit) once and used by every vector while it sits in L1, four vectors at a time
//   through the register-blocked tile kernels. Scores never leave a block: an online softmax
//   keeps a running max m, sum l and output accumulator per vector.
//
//   Decode (one query row) with fewer units than threads splits the keys into chunks (flash
//   decoding): every chunk leaves (m, l, acc) partials in the workspace and a merge pass
//   rescales and sums them per (b, head). Long contexts then use every thread even at batch 1.
//
// Past rows: when the op keeps its past in a separate buffer, the core copies rows
// [0, past_rows) of each (batch, KV head) from there into the K / V storage. In decode each
// unit copies the block it is about to read and computes from the past copy it just cached, so
// those rows cross memory once (read past, write present) instead of a copy pass followed by a
// read pass; big caches are written with streaming stores, which skip the read-for-ownership.
//
// Threads pull units from a shared counter; each worker owns one scratch slot of the
// workspace, so run() allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/function_ref.h"
#include "onnx_genai/dtype.h"
#include "ops/cpu/avx2/attention_rows.h"
#include "ops/cpu/elementwise.h"

namespace onnx_genai {

class ThreadPool;

// Element offset of one (batch, head, row) slice of K, V or the output:
// batch * strides.batch + head * strides.head + row * strides.row.
struct AttentionStrides {
  int64_t batch = 0, head = 0, row = 0;
};

struct AttentionConfig {
  DType dtype = DType::kF32;  // of K, V, the output and head sinks
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0;
  int64_t head_size = 0, v_head_size = 0;
  int64_t max_keys = 0;  // most keys a batch entry can have; bounds the KV split
  AttentionStrides k, v, out;
  float softcap = 0.0f;  // > 0: scores become softcap * tanh(score / softcap) before any bias
  bool causal = true;
  int64_t window = -1;          // >= 0: only the last `window` keys up to the causal limit
  bool smooth_softmax = false;  // every softmax denominator gains e^0 (or e^sink with sinks)
};

// Keys of one batch entry, set each run: keys [0, total) exist; when causal, query row s sees
// keys up to and including causal_offset + s. With AttentionRun::past, rows [0, past_rows)
// come from the past buffer.
struct BatchKeys {
  int64_t total = 0;
  int64_t causal_offset = 0;
  int64_t past_rows = 0;
};

// Writes the scaled f32 query vector [head_size] of (batch, head, row).
using QueryLoader = FunctionRef<void(int64_t b, int64_t h, int64_t s, float* q)>;
// Adds the op's bias / mask to scores[0..n) of query (b, h, s), keys first_key.. first_key + n.
using ScoreBias = FunctionRef<void(int64_t b, int64_t h, int64_t s, int64_t first_key, int64_t n, float* scores)>;

// Past rows [0, BatchKeys::past_rows) of each (batch, KV head), still in a separate past buffer,
// and where they belong (the run's k / v storage, writable).
template <typename T>
struct PastRows {
  const T* k = nullptr;
  const T* v = nullptr;
  AttentionStrides k_strides, v_strides;
  T* k_dst = nullptr;
  T* v_dst = nullptr;
};

template <typename T>
struct AttentionRun {
  const T* k = nullptr;
  const T* v = nullptr;
  T* out = nullptr;
  const BatchKeys* keys = nullptr;   // [batch]
  const T* head_sink = nullptr;      // [q_heads]: e^sink joins each denominator; null for none
  const QueryLoader* load_query = nullptr;
  const ScoreBias* add_bias = nullptr;  // null for none
  const PastRows<T>* past = nullptr;  // null: k / v already hold every row
};

// Workspace regions of the attention kernels start on cache lines.
inline size_t align_workspace(size_t bytes) { return (bytes + 63) / 64 * 64; }

// x[j] = cap * tanh(x[j] / cap), j < n (the softcap of GroupQueryAttention and Attention).
void apply_softcap(float* x, int64_t n, float cap);

// Keys per online-softmax step (one K / V block of the attention core, about 32 KiB): every key
// of a block is scored before the running max, sum and output are updated once. PagedAttention
// steps through a sequence's keys in the same spans, so that a row's numbers equal the contiguous
// kernel's (the update is where the rounding of the two could part).
int64_t attention_key_block(int64_t head_size, int64_t v_head_size);

class AttentionCore {
 public:
  // Most query vectors one unit carries (bounds the per-thread scratch).
  static constexpr int64_t kMaxVectors = 32;

  void plan(const AttentionConfig& config, int threads);
  size_t workspace_bytes() const { return workspace_bytes_; }

  template <typename T>
  void run(const AttentionRun<T>& run, void* workspace, ThreadPool* pool) const;

 private:
  template <typename T>
  friend class AttentionUnitRunner;

  // Whether each unit can copy the past rows it reads: one unit per (batch, KV head, chunk),
  // so no two units read rows the other writes.
  bool copies_past_lazily() const { return c_.q_len == 1 && head_slices_ == 1; }

  AttentionConfig c_;
  const AttentionRowKernels* rows_ = nullptr;
  int64_t group_ = 1;           // query heads per KV head
  int64_t heads_per_unit_ = 1;  // <= group_
  int64_t head_slices_ = 1;
  int64_t rows_per_tile_ = 1;
  int64_t tiles_ = 1;
  int64_t max_chunks_ = 1;  // > 1 only for one-row decode on several threads
  int64_t block_ = 64;      // keys per K / V block
  int64_t q_stride_ = 0, acc_stride_ = 0;  // floats per vector in the scratch
  size_t slot_floats_ = 0;
  int64_t slots_ = 1;
  size_t partials_offset_ = 0;  // bytes
  size_t workspace_bytes_ = 0;
};

extern template void AttentionCore::run<float>(const AttentionRun<float>&, void*, ThreadPool*) const;
extern template void AttentionCore::run<Float16>(const AttentionRun<Float16>&, void*, ThreadPool*) const;
extern template void AttentionCore::run<BFloat16>(const AttentionRun<BFloat16>&, void*, ThreadPool*) const;

}  // namespace onnx_genai
