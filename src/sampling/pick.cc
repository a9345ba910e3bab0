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

// A point of [0, total) from a uniform in [0, 1) (the product can round up to total when total
// exceeds 2^53, hence the clamp).
uint64_t fixed_point_target(double uniform, uint64_t total) {
  return std::min(static_cast<uint64_t>(uniform * static_cast<double>(total)), total - 1);
}

// Inverse CDF in ascending id order over the fixed-point weights of `ids`, leaving out index
// `skip` (none when it is ids.size()), whose mass `total` excludes. The running sum is exact and
// ends at total, so some token always passes the target.
int32_t inverse_cdf(std::span<const int32_t> ids, const std::vector<float>& weights, uint64_t total, size_t skip,
                    double uniform) {
  const uint64_t target = fixed_point_target(uniform, total);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == skip) continue;
    cumulative += to_fixed(weights[i]);
    if (cumulative > target) return ids[i];
  }
  return ids.back();  // unreachable: cumulative ends at total > target
}

Result<int32_t> draw(const Candidates& candidates, FunctionRef<double()> next_uniform, std::vector<float>& weights) {
  const std::span<const int32_t> ids = candidates.ids();
  exp_weights(candidates.logits(), ids, weights);
  const uint64_t total = fixed_total(weights);
  if (total == 0) return nothing_left();
  return inverse_cdf(ids, weights, total, ids.size(), next_uniform());
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

Result<int32_t> pick_given_draft(const Candidates& candidates, bool greedy, int32_t draft,
                                 std::span<const float> draft_probabilities, FunctionRef<double()> next_uniform,
                                 std::vector<float>& weights) {
  if (greedy) return pick_greedy(candidates);
  const std::span<const int32_t> ids = candidates.ids();
  exp_weights(candidates.logits(), ids, weights);
  const uint64_t total = fixed_total(weights);
  if (total == 0) return nothing_left();
  const auto found = std::lower_bound(ids.begin(), ids.end(), draft);
  const size_t index = static_cast<size_t>(found - ids.begin());
  const uint64_t draft_mass = found != ids.end() && *found == draft ? to_fixed(weights[index]) : 0;
  if (draft_probabilities.empty()) {
    if (fixed_point_target(next_uniform(), total) < draft_mass) return draft;
    // Rejected: the residual max(0, p - q) of a one-point q is p without the draft, renormalised.
    return inverse_cdf(ids, weights, total - draft_mass, draft_mass > 0 ? index : ids.size(), next_uniform());
  }
  // Kept with probability p / q: u < p / q, written without the division.
  const double p_total = static_cast<double>(total);
  const double q_draft = draft_probabilities[static_cast<size_t>(draft)];
  if (next_uniform() * q_draft < static_cast<double>(draft_mass) / p_total) return draft;
  // Rejected: the residual over p's tokens (q's mass elsewhere only lowers p - q below zero).
  double residual_total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const double p = static_cast<double>(to_fixed(weights[i])) / p_total;
    weights[i] = static_cast<float>(std::max(0.0, p - draft_probabilities[static_cast<size_t>(ids[i])]));
    residual_total += weights[i];
  }
  // p <= q everywhere means p = q, where no draft is rejected: only rounding gets here.
  if (residual_total <= 0) return draw(candidates, next_uniform, weights);
  const double target = next_uniform() * residual_total;
  double cumulative = 0;
  size_t last = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (weights[i] <= 0) continue;
    cumulative += weights[i];
    last = i;
    if (cumulative > target) return ids[i];
  }
  return ids[last];  // the rounding of the running sum can leave it a hair under the target
}

}  // namespace onnx_genai::sampling
