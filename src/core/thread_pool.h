// Intra-op thread pool. The calling thread takes part in every parallel_for, so a pool of size 1
// runs everything inline with no threads at all. Idle workers spin briefly (a decode step issues
// parallel loops microseconds apart) and then sleep on a condition variable, so an idle process
// burns no CPU.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/function_ref.h"

namespace onnx_genai {

class ThreadPool {
 public:
  // `num_threads` counts the caller; 0 means one per hardware thread.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n). Chunks hold at least `min_chunk`
  // items so tiny loops stay on one thread. Blocks until every chunk has run. Not reentrant:
  // a nested call from inside fn runs inline.
  void parallel_for(int64_t n, int64_t min_chunk, FunctionRef<void(int64_t, int64_t)> fn);

  // Number of times a worker went to sleep (tests use it to prove idle workers block).
  int64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  // The current job; `generation_` changes each time a new job is published.
  std::atomic<uint64_t> generation_{0};
  const FunctionRef<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_size_ = 0;
  int64_t chunk_ = 1;
  int64_t num_chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<int64_t> done_chunks_{0};
  std::atomic<int> active_workers_{0};
  std::atomic<int64_t> sleeps_{0};
  std::mutex call_mutex_;  // one parallel_for at a time
};

// parallel_for on `pool`, or inline when `pool` is null (single-node evaluation, tests).
inline void parallel_for(ThreadPool* pool, int64_t n, int64_t min_chunk,
                         FunctionRef<void(int64_t, int64_t)> fn) {
  if (pool != nullptr) {
    pool->parallel_for(n, min_chunk, fn);
  } else if (n > 0) {
    fn(0, n);
  }
}

// Number of hardware threads this process may use.
int hardware_threads();

}  // namespace onnx_genai
