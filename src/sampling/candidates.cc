#include <algorithm>
#include <cstdint>
#include <limits>

#include "onnx_genai/sampling.h"

namespace onnx_genai {

void Candidates::assign(std::span<const float> logits) {
  // Same size every step, so after the first call this reuses the buffers.
  logits_.assign(logits.begin(), logits.end());
  collect_ids();
}

void Candidates::keep_allowed(std::span<const uint64_t> allowed) {
  const size_t n = logits_.size();
  for (size_t start = 0; start < n; start += 64) {
    const size_t w = start / 64;
    const uint64_t word = w < allowed.size() ? allowed[w] : 0;
    if (word == ~uint64_t{0}) continue;
    const size_t end = std::min(n, start + 64);
    for (size_t t = start; t < end; ++t) logits_[t] = ((word >> (t - start)) & 1) ? logits_[t] : kOut;  // a blend
  }
  collect_ids();
}

void Candidates::collect_ids() {
  ids_.resize(logits_.size());
  size_t in_play = 0;
  for (size_t id = 0; id < logits_.size(); ++id) {  // branch-free compaction
    ids_[in_play] = static_cast<int32_t>(id);
    in_play += logits_[id] != kOut;
  }
  ids_.resize(in_play);
}

}  // namespace onnx_genai
