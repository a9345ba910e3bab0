#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#include <sched.h>

namespace onnx_genai {

namespace {
thread_local bool t_inside_pool = false;
// How long an idle worker polls for new work before sleeping: long enough to bridge the gap
// between two ops of one decode step, short enough to be invisible when the process is idle.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(200);
}  // namespace

int hardware_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = hardware_threads();
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    const int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= num_chunks_) return;
    const int64_t begin = c * chunk_;
    const int64_t end = std::min(job_size_, begin + chunk_);
    (*job_)(begin, end);
    done_chunks_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::worker_loop() {
  t_inside_pool = true;
  uint64_t seen = 0;
  for (;;) {
    // Spin, then sleep, until a new generation is published.
    auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    while (generation_.load(std::memory_order_acquire) == seen) {
      if (std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock lock(mutex_);
        if (stop_) return;
        if (generation_.load(std::memory_order_acquire) != seen) break;
        sleeps_.fetch_add(1, std::memory_order_relaxed);
        wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
        if (stop_) return;
        break;
      }
      std::this_thread::yield();
    }
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
      seen = generation_.load(std::memory_order_acquire);
      if (job_ == nullptr) continue;
      active_workers_.fetch_add(1, std::memory_order_acq_rel);
    }
    run_chunks();
    active_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk, FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t threads = num_threads();
  if (threads == 1 || t_inside_pool || n <= min_chunk) {
    fn(0, n);
    return;
  }
  std::lock_guard call_lock(call_mutex_);
  // A few chunks per thread balance uneven work without much atomic traffic.
  const int64_t target_chunks = threads * 4;
  const int64_t chunk = std::max(min_chunk, (n + target_chunks - 1) / target_chunks);
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_size_ = n;
    chunk_ = chunk;
    num_chunks_ = (n + chunk - 1) / chunk;
    next_chunk_.store(0, std::memory_order_relaxed);
    done_chunks_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  t_inside_pool = true;
  run_chunks();
  t_inside_pool = false;
  while (done_chunks_.load(std::memory_order_acquire) < num_chunks_) std::this_thread::yield();
  {
    // Retire the job before returning so no late worker touches `fn` after it goes out of scope.
    std::lock_guard lock(mutex_);
    job_ = nullptr;
  }
  while (active_workers_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
}

}  // namespace onnx_genai
