// One decoder call: builds input_ids / attention_mask / position_ids / use_cache_branch for some
// batch rows, binds the KV cache's past and present tensors, runs the session into them, and keeps
// each row's last-position logits (as float) for sampling, or, when told to take the graph's
// tokens, each row's greedy token (greedy_output.h) or sampled token (device_sampling.h) while the
// logits stay on the device.
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
#include <optional>
#include <span>
#include <vector>

#include "genai/decoder_io.h"
#include "genai/device_sampling.h"
#include "genai/kv_cache.h"
#include "onnx_genai/sampling.h"
#include "onnx_genai/session.h"

namespace onnx_genai::genai {

inline constexpr int32_t kPadSlot = -1;
// The widest step (tokens per row) fed with a capacity-wide mask (see above).
inline constexpr int64_t kMaxStepWidthAtCapacity = 16;

// What runs leave for each batch row at its last fed positions (the last RunRow::logit_positions
// of them; one but for speculative verification).
struct LastPositions {
  // Vocab floats per position, positions in order, per row: for the host sampler.
  std::vector<std::vector<float>> logits;
  // The graph's token per row (its argmax, or its draw) at the last position when the row's last
  // run took one; else the row's logits are in `logits`.
  std::vector<std::optional<int32_t>> tokens;
  // With the graph's argmax and several positions: the argmax at each, in order.
  std::vector<std::vector<int32_t>> position_tokens;
};

struct RunRow {
  std::span<const int32_t> slots;  // the row's slots so far
  int64_t lead_pads = 0;           // leading kPadSlot entries
  int64_t cached = 0;              // slots already in the cache
  int64_t fresh = 0;               // slots this run feeds: [cached, cached + fresh)
  // The row's Sampler when a token is sampled from this run's last position: with sampled tokens,
  // the run draws its uniform (Sampler::next_uniform) for the graph.
  Sampler* sampler = nullptr;
  // Positions whose logits the run keeps, the last fed ones: a speculative verify's draft + 1.
  int64_t logit_positions = 1;
  // With the graph's draws: the tokens the row's draw may pick (its constraint's mask,
  // device_sampling.h), or empty: any.
  std::span<const uint64_t> mask;
};

class DecoderRunner {
 public:
  DecoderRunner(Session& session, const DecoderIo& io, int32_t pad_token_id, bool mask_at_capacity);

  // Whether runs take each row's greedy token from the graph instead of its logits: possible when
  // the session runs on a device and the graph has greedy_output.h's output (a CPU session's never
  // does). Returns whether they will.
  bool take_greedy_tokens(bool wanted);
  // Whether runs take the token of each row with a sampler from the graph's draw (device_sampling.h)
  // under `params` instead of its logits: possible likewise, when the graph has that output. A run
  // does when each such row's token follows the last position the graph computes (always with one
  // position of logits per row; else when the row is as wide as the run). Greedy `params` take
  // the graph's argmax among the tokens of each row's mask (RunRow::mask). Returns whether they may.
  bool take_sampled_tokens(bool wanted, const SamplingParams& params);
  // Whether a run can keep logits for several positions of a row (RunRow::logit_positions > 1):
  // the graph selects logit rows or returns every position.
  bool keeps_several_positions() const;

  // Runs batch rows [first, first + rows.size()) and stores what row i has at its last fed slot in
  // last.tokens[first + i] when the run takes the graph's tokens, else in last.logits[first + i]
  // (vocab floats). Grows the cache first; advances it after.
  Status run(std::span<const RunRow> rows, size_t first, KvCache& cache, LastPositions& last);

 private:
  enum class TokenSource { kLogits, kGreedy, kSampled };

  TokenSource token_source(std::span<const RunRow> rows, int64_t width) const;
  bool one_position() const;
  Status fill_inputs(std::span<const RunRow> rows, int64_t width, int64_t mask_width);
  void bind_cache(const KvCache& cache, size_t first, int64_t rows, int64_t width);
  Status bind_logits(int64_t rows, int64_t positions, TokenSource source);
  Status check_presents(const KvCache& cache) const;
  Status collect(std::span<const RunRow> rows, size_t first, int64_t width, int64_t kept, TokenSource source,
                 LastPositions& last) const;

  Session& session_;
  const DecoderIo& io_;
  int32_t pad_token_id_;
  bool mask_at_capacity_;
  bool greedy_tokens_ = false;
  bool sampled_tokens_ = false;
  DeviceSamplingParams sampling_params_ = device_sampling_params(SamplingParams{});
  std::vector<double> uniforms_;  // the run's, per row (kNoDraw: no token from the graph's draw)
  std::vector<std::span<const uint64_t>> masks_;  // the run's, per row (empty: none)
  std::vector<Tensor> inputs_;   // reused between runs of the same shapes
  std::vector<Tensor> outputs_;  // logits reused (on the device with the graph's tokens); presents rebound every run
  std::vector<const void*> present_data_;  // where each KvBinding's present must land
};

}  // namespace onnx_genai::genai
