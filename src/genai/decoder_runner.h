// One decoder call: builds input_ids / attention_mask / position_ids / use_cache_branch for some
// batch rows, binds the KV cache's past and present tensors, runs the session into them, and keeps
// each row's last-position logits (as float) for sampling, or, when told to take greedy tokens,
// each row's greedy token from the graph (greedy_output.h) while the logits stay on the device.
//
// Rows are slot sequences. A slot is a token id, or kPadSlot for left padding (concatenated caches
// only). For a run over rows feeding `fresh` slots after `cached` ones each, S = the largest fresh
// and T = the largest cached + fresh:
//   input_ids      [rows, S]  the fed slots; pads and the right-padding of shorter rows get the pad id
//   attention_mask [rows, T]  1 on every real slot up to the row's cached + fresh, 0 elsewhere
//   position_ids   [rows, S]  real tokens before the slot (pads and right-padding: 0)
// A concatenated cache needs every row at the cache's length (left padding keeps rows aligned),
// so T = length + S and present is [rows, heads, T, head_size]. A shared cache is bound whole; the
// mask's row sums tell the graph where each row's new positions go. With `mask_at_capacity`,
// steps of up to kMaxStepWidthAtCapacity tokens that continue a shared cache pass T = the cache
// capacity (zeros past each row), so every decode step of a width (one token; a speculative
// verify of K) has the same input shapes and replays one execution plan, and one recorded CUDA
// graph, until the cache grows; onnxruntime-genai feeds GroupQueryAttention models such a static
// mask under graph capture.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "genai/decoder_io.h"
#include "genai/kv_cache.h"
#include "onnx_genai/session.h"

namespace onnx_genai::genai {

inline constexpr int32_t kPadSlot = -1;
// The widest step (tokens per row) fed with a capacity-wide mask (see above).
inline constexpr int64_t kMaxStepWidthAtCapacity = 16;

// What runs leave for each batch row at its last fed position.
struct LastPositions {
  std::vector<std::vector<float>> logits;  // vocab floats per row, for the host sampler
  std::vector<int32_t> greedy_tokens;      // the graph's argmax per row, when taking greedy tokens
};

struct RunRow {
  std::span<const int32_t> slots;  // the row's slots so far
  int64_t lead_pads = 0;           // leading kPadSlot entries
  int64_t cached = 0;              // slots already in the cache
  int64_t fresh = 0;               // slots this run feeds: [cached, cached + fresh)
};

class DecoderRunner {
 public:
  DecoderRunner(Session& session, const DecoderIo& io, int32_t pad_token_id, bool mask_at_capacity);

  // Whether runs take each row's greedy token from the graph instead of its logits: possible when
  // the session runs on a device and the graph has greedy_output.h's output (a CPU session's never
  // does). Returns whether they will.
  bool take_greedy_tokens(bool wanted);
  bool takes_greedy_tokens() const { return greedy_tokens_; }

  // Runs batch rows [first, first + rows.size()) and stores what row i has at its last fed slot in
  // last.logits[first + i] (vocab floats), or with greedy tokens in last.greedy_tokens[first + i].
  // Grows the cache first; advances it after.
  Status run(std::span<const RunRow> rows, size_t first, KvCache& cache, LastPositions& last);

 private:
  Status fill_inputs(std::span<const RunRow> rows, int64_t width, int64_t mask_width);
  void bind_cache(const KvCache& cache, size_t first, int64_t rows, int64_t width);
  Status bind_logits(int64_t rows, int64_t width);
  Status check_presents(const KvCache& cache) const;
  Status collect(std::span<const RunRow> rows, size_t first, int64_t width, LastPositions& last) const;

  Session& session_;
  const DecoderIo& io_;
  int32_t pad_token_id_;
  bool mask_at_capacity_;
  bool greedy_tokens_ = false;
  std::vector<Tensor> inputs_;   // reused between runs of the same shapes
  std::vector<Tensor> outputs_;  // logits reused (on the device with greedy tokens); presents rebound every run
  std::vector<const void*> present_data_;  // where each KvBinding's present must land
};

}  // namespace onnx_genai::genai
