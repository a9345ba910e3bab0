// The distribution-shaping steps that run only when sampling (transformers calls them warpers):
// temperature, then the truncation filters. Each filter is O(candidates); none sorts the
// vocabulary.
#include <algorithm>
#include <cmath>
#include <functional>

#include "sampling/mass_prefix.h"
#include "sampling/processors.h"
#include "sampling/softmax.h"

namespace onnx_genai::sampling {

Status Temperature::apply(const TokenHistory&, Candidates& candidates) {
  const float temperature = temperature_;
  candidates.transform([temperature](float logit) { return logit / temperature; });
  return Status::ok();
}

Status TopK::apply(const TokenHistory&, Candidates& candidates) {
  const std::span<const int32_t> ids = candidates.ids();
  if (k_ == 0 || k_ >= ids.size()) return Status::ok();
  values_.clear();
  for (const int32_t id : ids) values_.push_back(candidates.logit(id));
  const auto kth = values_.begin() + static_cast<std::ptrdiff_t>(k_ - 1);
  // partial_sort selects with a heap of k: one comparison for most of the row when k is small.
  // For large k, nth_element's linear selection wins.
  constexpr size_t kHeapSelectLimit = 1024;
  if (k_ <= kHeapSelectLimit) {
    std::partial_sort(values_.begin(), kth + 1, values_.end(), std::greater<float>());
  } else {
    std::nth_element(values_.begin(), kth, values_.end(), std::greater<float>());
  }
  const float threshold = *kth;
  candidates.keep_if([threshold](int32_t, float logit) { return logit >= threshold; });
  return Status::ok();
}

Status TopP::apply(const TokenHistory&, Candidates& candidates) {
  const std::span<const float> logits = candidates.logits();
  const std::span<const int32_t> ids = candidates.ids();
  exp_weights(logits, ids, weights_);
  const uint64_t total = fixed_total(weights_);
  if (total == 0) return Status::ok();
  items_.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    items_[i] = {rank_key(logits[static_cast<size_t>(ids[i])], ids[i]), to_fixed(weights_[i])};
  }
  // A token stays while the mass ranked before it is < p * total.
  const size_t keep = select_mass_prefix(
      items_, [](const Item& a, const Item& b) { return a.rank < b.rank; },
      [](const Item& item) { return item.weight; }, mass_threshold(p_, total));
  if (keep == items_.size()) return Status::ok();
  // The prefix is exactly the tokens ranked at or before its last one.
  uint64_t last = 0;
  for (size_t i = 0; i < keep; ++i) last = std::max(last, items_[i].rank);
  candidates.keep_if([last](int32_t id, float logit) { return rank_key(logit, id) <= last; });
  return Status::ok();
}

Status MinP::apply(const TokenHistory&, Candidates& candidates) {
  const float max = max_logit(candidates.logits(), candidates.ids());
  if (max == -std::numeric_limits<float>::infinity()) return Status::ok();
  const float min_p = min_p_;
  // p / p_max = exp(logit - max) >= min_p (the softmax normalizer cancels). Decided in log space
  // except near the threshold, where the exp comparison runs: the margin dwarfs both exp's error
  // and std::log's last bit, so the result is the exp comparison's everywhere.
  const float log_min_p = std::log(min_p);
  constexpr float kMargin = 1e-4f;
  candidates.keep_if([max, min_p, log_min_p](int32_t, float logit) {
    const float gap = logit - max;
    if (gap > log_min_p + kMargin) return true;
    if (gap < log_min_p - kMargin) return false;
    return exp_nonpositive(gap) >= min_p;
  });
  return Status::ok();
}

Status TypicalP::apply(const TokenHistory&, Candidates& candidates) {
  const std::span<const float> logits = candidates.logits();
  const std::span<const int32_t> ids = candidates.ids();
  const float max = exp_weights(logits, ids, weights_);
  const uint64_t total = fixed_total(weights_);
  if (total == 0) return Status::ok();
  const double log_normalizer =
      static_cast<double>(max) + std::log(static_cast<double>(total) / kWeightScale);
  double entropy = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint64_t weight = to_fixed(weights_[i]);
    if (weight == 0) continue;  // 0 * log 0 counts as 0
    const double probability = static_cast<double>(weight) / static_cast<double>(total);
    entropy -= probability * (static_cast<double>(logits[static_cast<size_t>(ids[i])]) - log_normalizer);
  }
  // One function for the ranking and the final comparison, so both see the same bits.
  const auto distance = [log_normalizer, entropy](float logit) {
    return std::abs(-(static_cast<double>(logit) - log_normalizer) - entropy);
  };
  entries_.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    const float logit = logits[static_cast<size_t>(ids[i])];
    if (logit != -std::numeric_limits<float>::infinity()) entries_.push_back({distance(logit), to_fixed(weights_[i]), ids[i]});
  }
  // transformers: last_ind = #(inclusive running mass < mass), clamped to the last entry; that is
  // the last entry of the shortest prefix reaching the mass, whose distance is the prefix maximum.
  const size_t prefix = select_mass_prefix(
      entries_,
      [](const Entry& a, const Entry& b) {
        return a.distance < b.distance || (a.distance == b.distance && a.token < b.token);
      },
      [](const Entry& entry) { return entry.weight; }, mass_threshold(mass_, total));
  double threshold = 0.0;
  for (size_t i = 0; i < prefix; ++i) threshold = std::max(threshold, entries_[i].distance);
  candidates.keep_if([&distance, threshold](int32_t, float logit) { return distance(logit) <= threshold; });
  return Status::ok();
}

}  // namespace onnx_genai::sampling
