// The decoder as the Generator drives it: a DecoderRunner and a KvCache per tensor-parallel rank
// (ModelOptions::tensor_parallel; one of each without it). Every rank builds the same inputs,
// binds its own cache (kv_heads / N heads of each layer) and runs its sharded session; the ranks
// run at once, one thread each (TensorParallelSessions::run_ranks), because their collectives
// wait for one another. The logits are all-gathered in the graph, so rank 0's are the model's:
// only rank 0 hands them (and the rows' samplers) to the caller. The caches see the same
// reserve / advance / rewind / reorder calls, so they keep one capacity and length.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "genai/decoder_runner.h"
#include "genai/kv_cache.h"
#include "genai/model_parts.h"

namespace onnx_genai::genai {

class DecoderRanks {
 public:
  // `layout` with the whole batch and limits; each rank's heads and memory come from its session.
  static Result<DecoderRanks> create(const ModelParts& parts, KvCacheLayout layout);

  bool take_greedy_tokens(bool wanted) { return ranks_[0].runner.take_greedy_tokens(wanted); }
  bool take_sampled_tokens(bool wanted, const SamplingParams& params) {
    return ranks_[0].runner.take_sampled_tokens(wanted, params);
  }
  bool keeps_several_positions() const { return ranks_[0].runner.keeps_several_positions(); }

  // DecoderRunner::run on every rank.
  Status run(std::span<const RunRow> rows, size_t first, LastPositions& last);
  // KvCache::rewind / gather_rows on every rank's cache.
  Status rewind(int64_t length);
  Status gather_rows(std::span<const int64_t> sources);
  int64_t capacity() const { return ranks_[0].cache.capacity(); }
  int64_t growths() const { return ranks_[0].cache.growths(); }

 private:
  struct Rank {
    KvCache cache;
    DecoderRunner runner;
    LastPositions discarded;  // ranks past 0: the copy of the logits nobody reads
  };

  DecoderRanks(TensorParallelSessions* group, std::vector<Rank> ranks) : group_(group), ranks_(std::move(ranks)) {}
  Status each_cache(const std::function<Status(KvCache&)>& fn);

  TensorParallelSessions* group_;  // null without tensor parallelism
  std::vector<Rank> ranks_;
  std::vector<RunRow> rank_rows_;  // a run's rows without their samplers, for ranks past 0
};

}  // namespace onnx_genai::genai
