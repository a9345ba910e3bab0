// One decoder run of the serving engine over the paged graph (runtime/paged_attention_pass.h):
// the scheduled runs' tokens packed back to back into input_ids [1, T], with their positions,
// block tables, token offsets and lengths, and the logits rows of the requests that sample.
//
// Shapes are bucketed so that few execution plans exist (each compiles once and replays): T is
// padded to the next power of two (padding tokens belong to no sequence and compute nothing that
// is read), the sequence slots and block tables are [min(T, max_num_seqs), max_blocks_per_seq]
// (no more sequences than tokens; attention plans its splits from the slots, so a one-token
// decode must not look like 64 sequences), and the logit rows are min(T, max_num_seqs). Every
// plan then depends on T's bucket alone.
//
// The block pools (one key and one value tensor per layer, [blocks, block_size, kv_heads,
// head_size]) are allocated here on the session's device, and bound as both the cache inputs
// and the outputs the kernel writes in place.
//
// A tensor-parallel model (ModelOptions::tensor_parallel = N) has N rank sessions, each paged
// after sharding: every rank gets its own pools of kv_heads / N heads, addressed by the same block
// ids (one KvBlockPool's bookkeeping serves all), and every step each rank packs the same inputs
// and runs at once on the group's threads (TensorParallelSessions::run_ranks), since the ranks'
// collectives wait for one another. The logits are all-gathered in the graph: rank 0's are read.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "engine/scheduler.h"
#include "genai/device_sampling.h"
#include "genai/model_parts.h"

namespace onnx_genai::engine {

struct PagedRunnerLimits {
  int64_t num_blocks = 0, block_size = 16;
  int64_t max_num_seqs = 64, max_num_batched_tokens = 256, max_blocks_per_seq = 0;
};

// How the device picks a sampling row's token: its SampleTokens params and uniform (what the
// request's Sampler would draw next), or with a uniform of genai::kNoDraw the plain argmax.
// With a mask (structured output), the token is picked among those it allows.
struct DeviceDraw {
  genai::DeviceSamplingParams params = genai::device_sampling_params(SamplingParams{});
  double uniform = genai::kNoDraw;
  bool masked = false;
  // genai::mask_words(vocab) words when masked, set by the time run()'s masks_ready returns.
  std::span<const uint64_t> mask;
};

class PagedRunner {
 public:
  static Result<std::unique_ptr<PagedRunner>> create(const genai::ModelParts& model, const PagedRunnerLimits& limits);

  // Whether run() can take sampling rows' tokens on the device: argmaxes (greedy_output.h), and
  // draws too (device_sampling.h). Only a device session's decoder has the outputs.
  bool device_argmax() const;
  bool device_draws() const;
  // Whether those draws may also take token masks (SampleTokens' mask input).
  bool device_masks() const;
  // Feeds `runs`; for the i-th position a run samples at (in order: each sampling run's last
  // position, after its drafted ones with a speculative draft), logits[i] receives its vocab
  // floats, or, given `draws` (one per such position), tokens[i] the token picked on the device:
  // the logits stay there and only the ids cross. Returns whether it gave tokens.
  // With masked draws, `masks_ready` is called once, after the step's forward pass is queued
  // on the device and before its sampling, to set their masks: computed on the host while the
  // device runs.
  Result<bool> run(std::span<const ScheduledRun> runs, const std::vector<DeviceDraw>* draws,
                   const std::function<Status()>& masks_ready, std::vector<std::vector<float>>& logits,
                   std::vector<int32_t>& tokens);
  // Runs each bucket of packed tokens once with no sequence in it (padding only: nothing reaches
  // the pools), with the logits left on the host and, where the device picks tokens, on the
  // device: the plans of every step shape compile and their CUDA graphs are recorded now.
  // Returns the number of shapes run.
  Result<int64_t> warm_up();
  // Rank 0's decoder session: its plans and CUDA graph counters.
  SessionStats session_stats() const { return ranks_[0].session->stats(); }
  // Bytes one block takes over all layers, keys and values, on one rank (`io` is the rank's).
  static int64_t block_bytes(const genai::DecoderIo& io, int64_t block_size);

 private:
  PagedRunner(const genai::ModelParts& model, const PagedRunnerLimits& limits);
  // One bucket's tensors: every run of a bucket binds the same buffers, so its plan's recorded
  // CUDA graph replays instead of being recorded again when steps alternate between buckets.
  struct BucketIo {
    std::vector<Tensor> inputs, outputs;
    // The token masks' storage, a row per logit row: a masked step feeds every row (rows of
    // unmasked draws unread), so each bucket has one masked plan.
    Tensor masks;
  };
  // One rank's decoder (the whole decoder without tensor parallelism).
  struct Rank {
    Session* session = nullptr;
    const genai::DecoderIo* io = nullptr;
    std::vector<Tensor> pools;  // per io->kv binding, kv_heads / N heads each
    std::map<int64_t, BucketIo> buckets;
    std::vector<size_t> late_inputs;  // SampleTokens' host inputs, filled while the forward pass runs
  };
  // The masks of a step's draws, made ready once however many ranks ask.
  struct LateMasks {
    const std::function<Status()>* compute = nullptr;
    std::once_flag once;
    Status status = Status::ok();
    Status ready();
  };
  // What every rank feeds in one run.
  struct Feed {
    std::span<const ScheduledRun> runs;
    int64_t tokens = 0, logit_rows = 0, rows = 0;  // padded T, the logit_rows input's rows, logits rows
    std::span<const int64_t> rows_at;
    const std::vector<DeviceDraw>* draws = nullptr;
    LateMasks* masks = nullptr;
    int64_t masked = 0;  // draws with a mask
  };
  static BucketIo& bucket_io(Rank& rank, int64_t tokens);
  int64_t sequence_slots(int64_t tokens) const { return std::min(tokens, limits_.max_num_seqs); }
  Status fill_inputs(const Rank& rank, const Feed& feed, std::vector<Tensor>& inputs) const;
  // SampleTokens' params and uniforms for `rows` logit rows: draws[k] at row rows_at[k], the
  // others (and all without draws) asking for no token; the masks input bound to its rows of
  // io.masks, filled later (fill_masks).
  Status fill_draws(const Rank& rank, const Feed& feed, BucketIo& io) const;
  // The masks of feed.draws' masked rows, in slot order, into `storage`.
  Status fill_masks(const Feed& feed, Tensor& storage) const;
  static Status bind_logits(const Rank& rank, BucketIo& io, int64_t rows, bool on_device);
  // Fills rank `r`'s inputs and runs its session.
  Status run_rank(size_t r, const Feed& feed);
  Status run_ranks(const Feed& feed);
  // The logit rows (and the rows of the logits output) of a step of `padded` tokens sampling at
  // `samples` positions.
  int64_t logit_rows(int64_t padded, int64_t samples) const;

  const genai::ModelParts& model_;
  PagedRunnerLimits limits_;
  std::vector<Rank> ranks_;
};

}  // namespace onnx_genai::engine
