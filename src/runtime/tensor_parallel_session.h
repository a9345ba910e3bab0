// A decoder run by N tensor-parallel ranks in one process: N sessions of the same ONNX file, each
// sharded at load for its rank (tensor_parallel_pass.h) and bound to its end of one in-process
// communicator group (parallel/communicator.h), run in lockstep, one thread per rank.
//
// Why one process with a thread per rank: the ranks share the file mapping and the caller's
// host-side state (tokenizer, sampler, scheduler), one scheduling decision drives every rank, and
// a rank's collectives are calls into the same address space. On GPUs the same shape holds with
// one CUDA device and stream per rank thread and NCCL behind the Communicator interface.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "onnx_genai/session.h"
#include "runtime/tensor_parallel_pass.h"

namespace onnx_genai {

class InProcessGroup;

class TensorParallelSessions {
 public:
  // `options` apply to every rank (num_threads is each rank's pool); its communicator must be unset.
  // `prepare`, when given, rewrites each rank's graph before it is sharded (the generator's
  // load-time passes, runtime/generation_passes.h), and `after_shard` after (the paged-attention
  // rewrite, which needs the rank's own kv_num_heads); each must rewrite every rank's alike.
  using PrepareGraph = std::function<Status(Graph& graph)>;
  static Result<std::unique_ptr<TensorParallelSessions>> load(const std::string& path, const std::string& logits,
                                                              int world_size, SessionOptions options = {},
                                                              const PrepareGraph& prepare = {},
                                                              const PrepareGraph& after_shard = {});
  ~TensorParallelSessions();
  TensorParallelSessions(const TensorParallelSessions&) = delete;
  TensorParallelSessions& operator=(const TensorParallelSessions&) = delete;

  int world_size() const { return static_cast<int>(ranks_.size()); }
  Session& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }
  const TensorParallelShards& shards() const { return shards_; }

  // Runs rank r on inputs[r] into outputs[r] (Session::run_into), every rank at once: ranks 1..N-1
  // on their threads, rank 0 on the caller's. Returns when all have finished, with the first
  // rank's error. A failed run aborts the group (its other ranks would wait forever in a
  // collective), so every later run fails too: load again.
  Status run_into(const std::vector<std::vector<Tensor>>& inputs, std::vector<std::vector<Tensor>>& outputs);
  // The same for any per-rank work that runs each rank's session once (the generator's decoder
  // runners: host-side input building, the run, the rank's own KV cache bookkeeping): fn(r) for
  // every rank at once, with run_into's error and abort rules.
  Status run_ranks(const std::function<Status(int rank)>& fn);

 private:
  struct Workers;
  TensorParallelSessions() = default;

  std::shared_ptr<InProcessGroup> group_;
  std::vector<std::unique_ptr<Session>> ranks_;
  TensorParallelShards shards_;
  std::unique_ptr<Workers> workers_;  // last: stopped before the sessions go
};

}  // namespace onnx_genai
