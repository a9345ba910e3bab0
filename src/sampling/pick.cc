#include "sampling/pick.h"

#include <algorithm>
#include <limits>

#include "sampling/softmax.h"

namespace onnx_genai::sampling {

namespace {

Result<int32_t> pick_greedy(const Candidates& candidates) {
  const std::span<const float> logits = candidates.logits();
  int32_t best = -1;
  float best_logit = -std::numeric_limits<float>::infinity();
  for (const int32_t id : candidates.ids()) {  // ascending, and only a strictly larger logit wins
    const float logit = logits[static_cast<size_t>(id)];
    if (logit > best_logit) {
      best = id;
      best_logit = logit;
    }
  }
  if (best < 0) return nothing_left();
  return best;
}

Result<int32_t> draw(const Candidates& candidates, FunctionRef<double()> next_uniform, std::vector<float>& weights) {
  const std::span<const float> logits = candidates.logits();
  const std::span<const int32_t> ids = candidates.ids();
  exp_weights(logits, ids, weights);
  const uint64_t total = fixed_total(weights);
  if (total == 0) return nothing_left();
  // Inverse CDF in ascending id order. The target is uniform over [0, total) (the product can
  // round up to total when total exceeds 2^53, hence the clamp); the running sum is exact and ends
  // at total, so some token always passes it.
  const double uniform = next_uniform();
  const uint64_t target = std::min(static_cast<uint64_t>(uniform * static_cast<double>(total)), total - 1);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    cumulative += to_fixed(weights[i]);
    if (cumulative > target) return ids[i];
  }
  return ids.back();  // unreachable: cumulative ends at total > target
}

}  // namespace

Status check_logits(std::span<const float> logits) {
  // NaN and +inf have no softmax; -inf is a legitimate "never". `x < inf` is false for exactly
  // those two; the branch-free pass vectorizes, the search for the culprit runs only on failure.
  unsigned invalid = 0;
  for (const float logit : logits) invalid |= !(logit < std::numeric_limits<float>::infinity());
  if (invalid == 0) return Status::ok();
  const auto bad = std::find_if(logits.begin(), logits.end(),
                                [](float logit) { return !(logit < std::numeric_limits<float>::infinity()); });
  return OG_ERROR("sampling: logit of token ", bad - logits.begin(), " is ", *bad, " (logits must be finite or -inf)");
}

Status nothing_left() { return OG_ERROR("sampling: every token has been filtered out (all logits are -inf)"); }

Result<int32_t> pick_token(const Candidates& candidates, bool greedy, FunctionRef<double()> next_uniform,
                           std::vector<float>& weights) {
  return greedy ? pick_greedy(candidates) : draw(candidates, next_uniform, weights);
}

}  // namespace onnx_genai::sampling
