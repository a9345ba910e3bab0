// Softmax pieces shared by the processors and the Sampler, computed the same way everywhere so that
// a filter's cut and the final draw come out identical on every platform.
//
// Probability mass is summed in fixed point (kWeightScale): integer sums are exact, so they do not
// depend on the order in which a partial selection happens to leave the candidates, and the
// running sum of a draw ends exactly at the total. Weights below 2^-44 of the most likely token's
// round to 0: over a 152k vocabulary that is at most 9e-9 of the probability mass.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "sampling/softmax_constants.h"

namespace onnx_genai::sampling {

// exp(x) for x <= 0 in float from IEEE-754 basic operations only (libm's exp may differ in the
// last bit between C libraries). Cody-Waite reduction x = k*ln2 + r with |r| <= ln2/2, a degree-7
// Taylor polynomial (truncation < 1e-8 relative; rounding leaves < 4e-7), and 2^k assembled from
// bits. Below -87 the result would be subnormal: 0 instead. Float precision is what transformers'
// float32 softmax has; it keeps the loops over a row branch-free and vectorizable. The constants
// live in softmax_constants.h, shared with the CUDA sampler's twin of this function.
inline float exp_nonpositive(float x) {
  const bool representable = x > kExpLowest;  // false for NaN too
  const float clamped = representable ? x : kExpLowest;
  const float shifted = clamped * kExpLog2e + kExpRoundingShift;
  const float k = shifted - kExpRoundingShift;
  const float r = (clamped - k * kExpLn2Hi) - k * kExpLn2Lo;
  // Horner's form (constants rather than a table keep the loop vectorizable).
  float poly = kExpPoly7;
  poly = poly * r + kExpPoly6;
  poly = poly * r + kExpPoly5;
  poly = poly * r + kExpPoly4;
  poly = poly * r + kExpPoly3;
  poly = poly * r + kExpPoly2;
  poly = poly * r + 1.0f;
  poly = poly * r + 1.0f;
  // The low 9 bits of `shifted` hold k mod 512; k + 127 in [1, 127] is 2^k's biased exponent.
  const float two_to_k = std::bit_cast<float>((std::bit_cast<uint32_t>(shifted) + 127u) << 23);
  // Zeroing through a bit mask rather than a conditional keeps the loop free of control flow.
  const uint32_t keep_mask = 0u - static_cast<uint32_t>(representable);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(poly * two_to_k) & keep_mask);
}

// A float weight in [0, 1] in fixed point: the scaling is exact, the conversion truncates. (Through
// int64, which the value always fits: a direct unsigned conversion costs a branch on x86.)
inline uint64_t to_fixed(float weight) {
  return static_cast<uint64_t>(static_cast<int64_t>(static_cast<double>(weight) * kWeightScale));
}

// The smallest integer mass >= fraction * total: "mass < fraction * total" is "mass < this".
inline uint64_t mass_threshold(double fraction, uint64_t total) {
  return static_cast<uint64_t>(std::ceil(fraction * static_cast<double>(total)));
}

template <typename Ids>
float max_logit(std::span<const float> logits, const Ids& ids) {
  float max = -std::numeric_limits<float>::infinity();
  for (const int32_t id : ids) {
    const float logit = logits[static_cast<size_t>(id)];
    max = logit > max ? logit : max;
  }
  return max;
}

// weights[i] = exp(logit of ids[i] - max) where max is the largest of those logits, which is
// returned (-inf when none is in play; every weight is then 0). The gather pass also finds the
// maximum and leaves the logits contiguous, so that the exp pass vectorizes.
template <typename Ids>
float exp_weights(std::span<const float> logits, const Ids& ids, std::vector<float>& weights) {
  weights.resize(ids.size());
  float max = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < ids.size(); ++i) {
    weights[i] = logits[static_cast<size_t>(ids[i])];
    max = weights[i] > max ? weights[i] : max;
  }
  for (float& weight : weights) weight = exp_nonpositive(weight - max);  // -inf - -inf is NaN: 0
  return max;
}

inline uint64_t fixed_total(std::span<const float> weights) {
  uint64_t total = 0;
  for (const float weight : weights) total += to_fixed(weight);
  return total;
}

// log(sum(exp(logit))) over ids, summed in double: for reported logprobs, accurate to ~4e-7
// (exp_nonpositive's error), where the fixed-point truncation of a flat tail would show.
template <typename Ids>
double log_sum_exp(std::span<const float> logits, const Ids& ids, std::vector<float>& scratch) {
  const float max = exp_weights(logits, ids, scratch);
  double total = 0.0;
  for (const float weight : scratch) total += weight;
  return static_cast<double>(max) + std::log(total);
}

// Ranks tokens by logit, highest first, ties to the lower id: a strict total order, so what a filter
// keeps never depends on how the standard library's selection moves ties. Ascending key order is
// that ranking: the logit's bits made monotone and inverted above the id; comparing plain integers
// also avoids indirect loads.
inline uint64_t rank_key(float logit, int32_t id) {
  const uint32_t bits = std::bit_cast<uint32_t>(logit + 0.0f);  // -0 becomes +0: == treats them alike
  const uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(~ascending) << 32) | static_cast<uint32_t>(id);
}
inline int32_t rank_key_token(uint64_t key) { return static_cast<int32_t>(key & 0xffffffffu); }

}  // namespace onnx_genai::sampling
