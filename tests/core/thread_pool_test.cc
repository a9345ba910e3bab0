#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <vector>

namespace onnx_genai {
namespace {

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {1, 7, 64, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, UsesSeveralThreads) {
  ThreadPool pool(3);
  std::mutex m;
  std::set<std::thread::id> ids;
  // Enough slow chunks that every worker wakes and takes some.
  pool.parallel_for(64, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard lock(m);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GE(ids.size(), 2u);
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.num_threads(), 1);
  std::thread::id seen;
  pool.parallel_for(100, 1, [&](int64_t, int64_t) { seen = std::this_thread::get_id(); });
  EXPECT_EQ(seen, std::this_thread::get_id());
}

TEST(ThreadPool, IdleWorkersSleepInsteadOfSpinning) {
  ThreadPool pool(3);
  pool.parallel_for(1000, 1, [](int64_t, int64_t) {});
  // Both workers go to sleep on the condition variable after the spin window (allow a loaded
  // machine up to two seconds to schedule them).
  for (int waited_ms = 0; pool.sleeps() < 2 && waited_ms < 2000; waited_ms += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(pool.sleeps(), 2);
  // And the process used little CPU while idle: measure this thread-group's CPU time over 100 ms.
  timespec before{}, after{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &before);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &after);
  const double cpu_ms = (after.tv_sec - before.tv_sec) * 1e3 + (after.tv_nsec - before.tv_nsec) / 1e6;
  EXPECT_LT(cpu_ms, 20.0);
}

TEST(ThreadPool, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.parallel_for(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.parallel_for(10, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
    }
  });
  EXPECT_EQ(total.load(), 80);
}

}  // namespace
}  // namespace onnx_genai
