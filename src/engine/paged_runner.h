// One decoder run of the serving engine over the paged graph (runtime/paged_attention_pass.h):
// the scheduled runs' tokens packed back to back into input_ids [1, T], with their positions,
// block tables, token offsets and lengths, and the logits rows of the requests that sample.
//
// Shapes are bucketed so that few execution plans exist (each compiles once and replays): T is
// padded to the next power of two (padding tokens belong to no sequence and compute nothing that
// is read), the sequence slots and block tables are always [max_num_seqs, max_blocks_per_seq],
// and the logit rows are min(T, max_num_seqs). Every plan then depends on T's bucket alone.
//
// The block pools (one key and one value tensor per layer, [blocks, block_size, kv_heads,
// head_size]) are allocated here on the session's device, and bound as both the cache inputs
// and the outputs the kernel writes in place.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "engine/scheduler.h"
#include "genai/model_parts.h"

namespace onnx_genai::engine {

struct PagedRunnerLimits {
  int64_t num_blocks = 0, block_size = 16;
  int64_t max_num_seqs = 64, max_num_batched_tokens = 256, max_blocks_per_seq = 0;
};

class PagedRunner {
 public:
  static Result<std::unique_ptr<PagedRunner>> create(const genai::ModelParts& model, const PagedRunnerLimits& limits);

  // Feeds `runs`; for the i-th position a run samples at (in order: each sampling run's last
  // position, after its drafted ones with a speculative draft), logits[i] receives its vocab
  // floats, or, with `argmax` (every such run takes the plain argmax) on a device session,
  // tokens[i] its argmax computed there: the logits stay on the device and only the ids cross
  // (greedy_output.h). Returns whether it gave tokens.
  Result<bool> run(std::span<const ScheduledRun> runs, bool argmax, std::vector<std::vector<float>>& logits,
             std::vector<int32_t>& tokens);
  // Bytes one block takes over all layers, keys and values.
  static int64_t block_bytes(const genai::DecoderIo& io, int64_t block_size);

 private:
  PagedRunner(const genai::ModelParts& model, const PagedRunnerLimits& limits);
  // One bucket's tensors: every run of a bucket binds the same buffers, so its plan's recorded
  // CUDA graph replays instead of being recorded again when steps alternate between buckets.
  struct BucketIo {
    std::vector<Tensor> inputs, outputs;
  };
  BucketIo& bucket_io(int64_t tokens);
  Status fill_inputs(std::span<const ScheduledRun> runs, int64_t tokens, int64_t logit_rows, std::vector<Tensor>& inputs);
  Status bind_logits(BucketIo& io, int64_t rows, bool on_device);

  const genai::ModelParts& model_;
  PagedRunnerLimits limits_;
  std::vector<Tensor> pools_;  // per io.kv binding
  std::map<int64_t, BucketIo> buckets_;
};

}  // namespace onnx_genai::engine
