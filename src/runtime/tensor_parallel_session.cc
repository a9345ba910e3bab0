// N sessions run in lockstep (tensor_parallel_session.h).
#include "runtime/tensor_parallel_session.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "onnx/model.h"
#include "parallel/communicator.h"

namespace onnx_genai {

// One thread per rank past 0, each waiting for the next job: a run hands every worker the same
// function and waits until all have run it.
struct TensorParallelSessions::Workers {
  std::mutex mutex;
  std::condition_variable wake, finished;
  std::function<void(int)> job;
  uint64_t generation = 0;
  int running = 0;
  bool stopping = false;
  std::vector<std::thread> threads;

  explicit Workers(int count) {
    for (int r = 1; r <= count; ++r) threads.emplace_back([this, r] { loop(r); });
  }
  ~Workers() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (std::thread& t : threads) t.join();
  }

  void loop(int rank) {
    uint64_t seen = 0;
    for (;;) {
      std::function<void(int)> current;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping) return;
        seen = generation;
        current = job;
      }
      current(rank);
      std::lock_guard lock(mutex);
      if (--running == 0) finished.notify_all();
    }
  }

  // Runs fn(1..count) on the workers and fn(0) here; returns when all are done.
  void run(const std::function<void(int)>& fn) {
    {
      std::lock_guard lock(mutex);
      job = fn;
      running = static_cast<int>(threads.size());
      ++generation;
    }
    wake.notify_all();
    fn(0);
    std::unique_lock lock(mutex);
    finished.wait(lock, [&] { return running == 0; });
  }
};

Result<std::unique_ptr<TensorParallelSessions>> TensorParallelSessions::load(const std::string& path,
                                                                             const std::string& logits,
                                                                             int world_size, SessionOptions options,
                                                                             const PrepareGraph& prepare,
                                                                             const PrepareGraph& after_shard) {
  if (options.communicator != nullptr) return OG_ERROR(path, ": tensor-parallel sessions make their own communicators");
  OG_ASSIGN_OR_RETURN(std::shared_ptr<InProcessGroup> group, InProcessGroup::create(world_size));
  std::unique_ptr<TensorParallelSessions> sessions(new TensorParallelSessions());
  sessions->group_ = group;
  for (int r = 0; r < world_size; ++r) {
    OG_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, load_onnx_model(path));
    if (prepare) OG_RETURN_IF_ERROR(prepare(*model->graph).with_context(path));
    Result<TensorParallelShards> shards = shard_for_tensor_parallel(*model->graph, logits, r, world_size);
    if (!shards.is_ok()) return shards.status().with_context(path);
    sessions->shards_ = *shards;
    if (after_shard) OG_RETURN_IF_ERROR(after_shard(*model->graph).with_context(path));
    OG_ASSIGN_OR_RETURN(options.communicator, group->communicator(r));
    OG_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::create(std::move(model), options));
    sessions->ranks_.push_back(std::move(session));
  }
  sessions->workers_ = std::make_unique<Workers>(world_size - 1);
  return sessions;
}

TensorParallelSessions::~TensorParallelSessions() = default;

Status TensorParallelSessions::run_into(const std::vector<std::vector<Tensor>>& inputs,
                                        std::vector<std::vector<Tensor>>& outputs) {
  const size_t n = ranks_.size();
  if (inputs.size() != n || outputs.size() != n) {
    return OG_ERROR("a tensor-parallel run takes inputs and outputs for each of its ", n, " ranks, got ", inputs.size(),
                    " and ", outputs.size());
  }
  return run_ranks([&](int r) {
    const auto i = static_cast<size_t>(r);
    return ranks_[i]->run_into(inputs[i], outputs[i]);
  });
}

Status TensorParallelSessions::run_ranks(const std::function<Status(int rank)>& fn) {
  std::vector<Status> results(ranks_.size(), Status::ok());
  std::atomic<int> first_failure{-1};  // the cause; the others then fail as aborted
  workers_->run([&](int r) {
    const auto i = static_cast<size_t>(r);
    results[i] = fn(r);
    int none = -1;
    if (!results[i].is_ok() && first_failure.compare_exchange_strong(none, r)) group_->abort();
  });
  const int failed = first_failure.load();
  if (failed < 0) return Status::ok();
  return results[static_cast<size_t>(failed)].with_context("tensor-parallel rank " + std::to_string(failed));
}

}  // namespace onnx_genai
