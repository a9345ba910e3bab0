#include "runtime/memory_planner.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace onnx_genai {

MemoryPlan plan_memory(std::span<const BufferRequest> requests, int64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  auto aligned = [&](int64_t n) { return (n + alignment - 1) / alignment * alignment; };

  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });

  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, end) of placed buffers overlapping in time
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    const int64_t size = aligned(std::max<int64_t>(r.bytes, 1));
    busy.clear();
    for (size_t p : placed) {
      const BufferRequest& q = requests[p];
      if (q.first_step <= r.last_step && r.first_step <= q.last_step) {
        busy.emplace_back(plan.offsets[p], plan.offsets[p] + aligned(std::max<int64_t>(q.bytes, 1)));
      }
    }
    std::sort(busy.begin(), busy.end());
    // Smallest gap that fits (best fit), else after the last busy range.
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (const auto& [begin, end] : busy) {
      if (begin - cursor >= size && begin - cursor < best_gap) {
        best = cursor;
        best_gap = begin - cursor;
      }
      cursor = std::max(cursor, end);
    }
    if (best < 0) best = cursor;
    plan.offsets[idx] = best;
    plan.arena_bytes = std::max(plan.arena_bytes, best + size);
    plan.requested_bytes += size;
    placed.push_back(idx);
  }

  // Lower bound: sweep steps, summing sizes live at each.
  std::map<int, int64_t> delta;
  for (const BufferRequest& r : requests) {
    const int64_t size = aligned(std::max<int64_t>(r.bytes, 1));
    delta[r.first_step] += size;
    delta[r.last_step + 1] -= size;
  }
  int64_t live = 0;
  for (const auto& [step, d] : delta) {
    live += d;
    plan.live_lower_bound = std::max(plan.live_lower_bound, live);
  }
  return plan;
}

}  // namespace onnx_genai
