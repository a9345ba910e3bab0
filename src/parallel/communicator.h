// Collectives between the ranks of a tensor-parallel model (runtime/tensor_parallel_pass.h shards
// the graph; ops/cpu/collective.cc's AllReduce and AllGather kernels call the communicator bound
// to their session, SessionOptions::communicator).
//
// A Communicator is one rank's end of a group: every rank calls the same collectives in the same
// order with tensors of the same shape, and each call returns once the rank's result is written.
// The in-process group below runs N ranks as N threads of one process; a NCCL communicator (one
// GPU per rank, the collective enqueued on the rank's stream so a captured step graph contains
// it) implements the same interface.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "onnx_genai/status.h"
#include "onnx_genai/tensor.h"

namespace onnx_genai {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // data[i] = sum over ranks 0..N-1, in that order, of every rank's data[i] (float32, `count`).
  virtual Status all_reduce_sum(float* data, int64_t count) = 0;
  // out = every rank's `in` joined along `axis`, rank 0 first: `in` is [outer, inner] bytes per
  // rank viewed as `outer` runs of `inner_bytes`, out holds `outer` runs of N * inner_bytes.
  virtual Status all_gather(const void* in, void* out, int64_t outer, int64_t inner_bytes) = 0;
};

// N ranks on N threads of this process. Each collective is two barrier phases: every rank
// publishes its buffer and waits for the others; then each reads all of them into its own result
// (an all-reduce sums into a private buffer first, in rank order 0..N-1, so every rank gets the
// same bits and runs repeat whatever the threads' timing) and waits again before its buffer may
// change. abort() releases every rank waiting in a collective with an error (a rank whose
// run failed would otherwise leave the others waiting forever).
class InProcessGroup : public std::enable_shared_from_this<InProcessGroup> {
 public:
  static Result<std::shared_ptr<InProcessGroup>> create(int world_size);

  int world_size() const { return world_size_; }
  // Rank `rank`'s end (0 <= rank < world_size); it keeps the group alive.
  Result<std::shared_ptr<Communicator>> communicator(int rank);
  void abort();

 private:
  friend class InProcessCommunicator;
  explicit InProcessGroup(int world_size);
  // Waits until every rank has arrived (or the group was aborted: then an error).
  Status arrive_and_wait();

  int world_size_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  int waiting_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  // Per rank: the buffer it published for the collective under way.
  std::vector<const void*> published_;
};

}  // namespace onnx_genai
