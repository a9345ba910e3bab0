// The serving engine's scheduler, vLLM-v1 style, in plain CPU code with no model in sight.
//
// A request knows its tokens (prompt, then what it generated) and how many of them have their
// keys and values computed. Every step packs work into one token budget:
//   1. running requests, oldest first: each gets what it lacks (one token when decoding, or the
//      next chunk of a long prompt), as far as the budget goes; a request that needs a new block
//      when the pool has none preempts the running request of lowest priority that arrived last
//      (its blocks freed, its progress forgotten: it is recomputed when readmitted);
//   2. waiting requests, by priority then arrival, while sequence slots and budget remain: the
//      prefix cache supplies what it can of the prompt, and the first chunk of the rest is
//      scheduled. Admission stops at the first request whose blocks do not fit (no overtaking).
// A scheduled request's tokens [computed, computed + count) are fed; it wants a token sampled
// when that reaches the end of its known tokens. A speculative draft (the last `draft` tokens)
// is fed whole with the token before it or not at all, never enters the prefix cache, and is
// dropped when the request is preempted; after the verify step rewind() keeps what was accepted.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "engine/kv_block_pool.h"

namespace onnx_genai::engine {

struct SchedulerLimits {
  int64_t max_num_batched_tokens = 256;  // tokens per step, all sequences together
  int64_t max_num_seqs = 64;             // sequences per step
  int64_t max_blocks_per_seq = 0;        // the context length in blocks
};

// What the scheduler tracks of a request; the engine's Request extends it.
struct ScheduledState {
  uint64_t id = 0;
  int priority = 0;  // higher first
  uint64_t arrival = 0;
  uint64_t cache_salt = 0;
  std::vector<int32_t> tokens;  // prompt then generated
  int64_t computed = 0;         // leading tokens whose KV is in the cache
  std::vector<int32_t> blocks;  // block table
  std::vector<uint64_t> block_keys;  // prefix-cache keys of the leading full blocks
  int64_t cached_prefix_tokens = 0;  // computed tokens the prefix cache supplied at admission
  int64_t preemptions = 0;
  int64_t draft = 0;                 // trailing tokens of `tokens` that are a speculative draft

  void drop_draft() {
    tokens.resize(tokens.size() - static_cast<size_t>(draft));
    draft = 0;
  }
  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - computed; }
};

struct ScheduledRun {
  ScheduledState* request = nullptr;
  int64_t first = 0;  // first token fed (= computed before the step)
  int64_t count = 0;  // tokens fed
  bool samples() const { return first + count == static_cast<int64_t>(request->tokens.size()); }
  // Positions whose logits the run needs: the last one's, and with a draft each drafted token's.
  int64_t sampled_rows() const { return samples() ? 1 + request->draft : 0; }
};

class Scheduler {
 public:
  Scheduler(SchedulerLimits limits, KvBlockPool& pool) : limits_(limits), pool_(pool) {}

  void add(ScheduledState* request);  // waiting, in priority and arrival order
  // Takes the request out wherever it is and frees its blocks.
  void remove(ScheduledState* request);
  // This step's runs, running requests first; empty when nothing can run.
  std::vector<ScheduledRun> schedule();
  // After the model ran `runs`: progress recorded, full blocks offered to the prefix cache.
  void complete(const std::vector<ScheduledRun>& runs);
  // After a verify step: `computed` tokens hold (the accepted part of the draft); blocks past what
  // the request's tokens need go back to the pool, and its full blocks to the prefix cache.
  void rewind(ScheduledState& request, int64_t computed);

  size_t waiting() const { return waiting_.size(); }
  size_t running() const { return running_.size(); }
  int64_t preemptions() const { return preemptions_; }

 private:
  bool reserve_blocks(ScheduledState& r, int64_t tokens_after);
  bool preempt_for(const ScheduledState& needing);
  void admit_waiting(int64_t& budget, std::vector<ScheduledRun>& runs);
  void free_blocks(ScheduledState& r);

  SchedulerLimits limits_;
  KvBlockPool& pool_;
  std::deque<ScheduledState*> waiting_;
  std::vector<ScheduledState*> running_;  // admission order
  int64_t preemptions_ = 0;
};

}  // namespace onnx_genai::engine
