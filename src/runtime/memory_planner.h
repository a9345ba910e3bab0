// Static memory plan: every intermediate tensor of a plan gets a fixed offset in one arena.
// Two tensors may share bytes when their lifetimes (in step indices) do not overlap. Greedy by
// size, largest first, each placed at the lowest offset that fits between the tensors already
// placed that overlap it in time — the classic offset-assignment heuristic that stays close to
// the lower bound (the largest sum of sizes live at one step) on inference graphs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace onnx_genai {

struct BufferRequest {
  int64_t bytes = 0;
  int first_step = 0;  // step that writes it
  int last_step = 0;   // last step that reads it (inclusive)
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request
  int64_t arena_bytes = 0;       // size of the arena the offsets index into
  int64_t requested_bytes = 0;   // sum of all requests (what allocating each separately costs)
  int64_t live_lower_bound = 0;  // most bytes live at any one step: no plan can beat this
};

MemoryPlan plan_memory(std::span<const BufferRequest> requests, int64_t alignment = 64);

}  // namespace onnx_genai
