// No-repeat n-gram ban: O(history * n) per step, never O(vocabulary).
#include <algorithm>
#include <limits>

#include "sampling/processors.h"

namespace onnx_genai::sampling {

Status NoRepeatNGram::apply(const TokenHistory& history, Candidates& candidates) {
  const std::span<const int32_t> tokens = history.tokens;
  if (n_ == 0 || tokens.size() + 1 < n_) return Status::ok();
  // The last n-1 tokens would start the next n-gram; every earlier n-gram with that start bans its
  // last token.
  const std::span<const int32_t> prefix = tokens.last(n_ - 1);
  for (size_t start = 0; start + n_ <= tokens.size(); ++start) {
    if (std::equal(prefix.begin(), prefix.end(), tokens.begin() + static_cast<std::ptrdiff_t>(start))) {
      candidates.set_logit(tokens[start + n_ - 1], -std::numeric_limits<float>::infinity());
    }
  }
  return Status::ok();
}

}  // namespace onnx_genai::sampling
