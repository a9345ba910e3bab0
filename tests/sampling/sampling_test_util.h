// Helpers for the sampling tests: run a chain over a row, and double-precision references that
// follow transformers' own formulas (generation/logits_process.py) step by step, with full sorts
// and the ascending cumulative sums they use, independent of the library's partial selection.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "onnx_genai/sampling.h"

namespace onnx_genai::testing_sampling {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The row after the chain `params` builds (the Sampler's own processing, without the pick).
inline std::vector<float> process(const SamplingParams& params, const std::vector<float>& logits,
                                  const TokenHistory& history = {}) {
  auto chain = make_logit_processors(params);
  EXPECT_TRUE(chain.is_ok()) << chain.status().message();
  Candidates candidates;
  candidates.assign(logits);
  for (auto& processor : *chain) {
    const Status status = processor->apply(history, candidates);
    EXPECT_TRUE(status.is_ok()) << status.message();
  }
  return {candidates.logits().begin(), candidates.logits().end()};
}

// Which tokens are still in play (logit > -inf).
inline std::vector<bool> kept(const std::vector<float>& logits) {
  std::vector<bool> mask;
  for (const float logit : logits) mask.push_back(logit != kNegInf);
  return mask;
}

inline std::vector<double> softmax(const std::vector<double>& logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (const double l : logits) max = std::max(max, l);
  std::vector<double> probs;
  double total = 0;
  for (const double l : logits) {
    probs.push_back(std::exp(l - max));
    total += probs.back();
  }
  for (double& p : probs) p /= total;
  return probs;
}

// Ids sorted by logit ascending as torch.sort(descending=False) would; equal logits put the higher
// id first so that the kept end of the order prefers the lower id, as the library documents.
inline std::vector<size_t> ascending_order(const std::vector<double>& logits) {
  std::vector<size_t> order(logits.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return logits[a] < logits[b] || (logits[a] == logits[b] && a > b);
  });
  return order;
}

// TopKLogitsWarper: scores < topk(scores, k)[-1] are removed.
inline std::vector<bool> hf_top_k(const std::vector<double>& logits, size_t k) {
  std::vector<double> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  const double kth = sorted[std::min(k, sorted.size()) - 1];
  std::vector<bool> keep;
  for (const double l : logits) keep.push_back(!(l < kth));
  return keep;
}

// TopPLogitsWarper: sort ascending, cumulative softmax, remove where cumsum <= 1 - top_p, never
// the last (most likely) entry.
inline std::vector<bool> hf_top_p(const std::vector<double>& logits, double top_p) {
  const std::vector<size_t> order = ascending_order(logits);
  const std::vector<double> probs = softmax(logits);
  std::vector<bool> keep(logits.size(), true);
  double cumulative = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    cumulative += probs[order[i]];
    if (cumulative <= 1.0 - top_p && i + 1 < order.size()) keep[order[i]] = false;
  }
  return keep;
}

// MinPLogitsWarper: probs < min_p * max(probs) are removed.
inline std::vector<bool> hf_min_p(const std::vector<double>& logits, double min_p) {
  const std::vector<double> probs = softmax(logits);
  const double top = *std::max_element(probs.begin(), probs.end());
  std::vector<bool> keep;
  for (const double p : probs) keep.push_back(!(p < min_p * top));
  return keep;
}

// TypicalLogitsWarper: normalized = log_softmax; ent = -sum(normalized * p); shifted =
// |-normalized - ent| sorted ascending; cumulative softmax in that order; last_ind =
// sum(cumulative < mass) clamped; remove sorted_scores > sorted_scores[last_ind].
inline std::vector<bool> hf_typical_p(const std::vector<double>& logits, double mass) {
  const std::vector<double> probs = softmax(logits);
  double entropy = 0;
  for (const double p : probs) {
    if (p > 0) entropy -= p * std::log(p);
  }
  std::vector<double> shifted;
  for (const double p : probs) shifted.push_back(std::abs(-std::log(p) - entropy));
  std::vector<size_t> order(logits.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return shifted[a] < shifted[b] || (shifted[a] == shifted[b] && a < b);
  });
  size_t last_ind = 0;
  double cumulative = 0;
  for (const size_t id : order) {
    cumulative += probs[id];
    if (cumulative < mass) ++last_ind;
  }
  last_ind = std::min(last_ind, order.size() - 1);
  const double threshold = shifted[order[last_ind]];
  std::vector<bool> keep;
  for (const double s : shifted) keep.push_back(!(s > threshold));
  return keep;
}

}  // namespace onnx_genai::testing_sampling
