#include "runtime/memory_planner.h"

#include <gtest/gtest.h>

namespace onnx_genai {
namespace {

// Two buffers overlap when both their lifetimes and their byte ranges overlap.
void expect_no_conflicts(const std::vector<BufferRequest>& r, const MemoryPlan& plan) {
  for (size_t a = 0; a < r.size(); ++a) {
    for (size_t b = a + 1; b < r.size(); ++b) {
      const bool time = r[a].first_step <= r[b].last_step && r[b].first_step <= r[a].last_step;
      const bool space = plan.offsets[a] < plan.offsets[b] + r[b].bytes && plan.offsets[b] < plan.offsets[a] + r[a].bytes;
      EXPECT_FALSE(time && space) << "buffers " << a << " and " << b << " collide";
    }
  }
  for (size_t a = 0; a < r.size(); ++a) {
    EXPECT_EQ(plan.offsets[a] % 64, 0);
    EXPECT_LE(plan.offsets[a] + r[a].bytes, plan.arena_bytes);
  }
}

TEST(MemoryPlanner, ChainReusesBuffers) {
  // A chain a -> b -> c -> d: each buffer dies once the next is written, so two slots suffice.
  std::vector<BufferRequest> r{{1024, 0, 1}, {1024, 1, 2}, {1024, 2, 3}, {1024, 3, 4}};
  MemoryPlan plan = plan_memory(r);
  expect_no_conflicts(r, plan);
  EXPECT_EQ(plan.requested_bytes, 4096);
  EXPECT_EQ(plan.arena_bytes, 2048);
  EXPECT_EQ(plan.live_lower_bound, 2048);
}

TEST(MemoryPlanner, OverlappingLifetimesGetDistinctBytes) {
  std::vector<BufferRequest> r{{100, 0, 5}, {200, 1, 3}, {300, 2, 4}, {50, 4, 6}, {400, 6, 7}};
  MemoryPlan plan = plan_memory(r);
  expect_no_conflicts(r, plan);
  EXPECT_GE(plan.arena_bytes, plan.live_lower_bound);
  EXPECT_LT(plan.arena_bytes, plan.requested_bytes);
}

TEST(MemoryPlanner, RandomGraphsStayValidAndNearTheBound) {
  uint64_t state = 42;
  auto next = [&](int n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((state >> 33) % static_cast<uint64_t>(n));
  };
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferRequest> r;
    for (int i = 0; i < 200; ++i) {
      const int first = next(100);
      r.push_back({64 * (1 + next(64)), first, first + next(8)});
    }
    MemoryPlan plan = plan_memory(r);
    expect_no_conflicts(r, plan);
    // Greedy-by-size stays within 1.5x of the lower bound on these workloads.
    EXPECT_LE(plan.arena_bytes, plan.live_lower_bound * 3 / 2) << "trial " << trial;
    std::printf("trial %d: requested %lld, arena %lld, lower bound %lld\n", trial,
                static_cast<long long>(plan.requested_bytes), static_cast<long long>(plan.arena_bytes),
                static_cast<long long>(plan.live_lower_bound));
  }
}

}  // namespace
}  // namespace onnx_genai
