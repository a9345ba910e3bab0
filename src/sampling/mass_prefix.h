// Selecting the most likely candidates up to a probability mass without sorting them all: top-p
// and typical-p need the shortest ranked prefix that reaches their mass, not a full order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace onnx_genai::sampling {

// Moves to the front of `items` the shortest prefix, in `less` order, whose summed weight reaches
// `stop_mass` (at least one item; all of them if the total falls short), and returns its length.
// The prefix is left in no particular order.
//
// Weighted quickselect: nth_element partitions the open range and only the half holding the cut is
// kept, so the cost is O(n) however long the prefix is (a flat distribution can put most of the
// vocabulary in a nucleus, where a sort would be O(n log n)). The first round probes the top
// kProbe items alone, since the prefix is usually that short. Weights are integers, so partial sums
// are exact whatever order nth_element leaves within a part.
template <typename T, typename Less, typename Weight>
size_t select_mass_prefix(std::vector<T>& items, Less less, Weight weight, uint64_t stop_mass) {
  constexpr size_t kProbe = 64;
  constexpr size_t kSortBelow = 64;
  const auto at = [&items](size_t i) { return items.begin() + static_cast<std::ptrdiff_t>(i); };
  // The answer, the first ranked position whose preceding mass reaches stop_mass, lies in
  // [lo, hi]; items[0, lo) rank before items[lo, hi) and weigh mass_before_lo.
  size_t lo = 0;
  size_t hi = items.size();
  uint64_t mass_before_lo = 0;
  for (bool first_round = true; hi - lo > kSortBelow; first_round = false) {
    const size_t mid = first_round ? kProbe : lo + (hi - lo) / 2;
    std::nth_element(at(lo), at(mid), at(hi), less);
    uint64_t mass = mass_before_lo;
    for (size_t i = lo; i < mid; ++i) mass += weight(items[i]);
    if (mass >= stop_mass) {
      hi = mid;
    } else {
      lo = mid;
      mass_before_lo = mass;
    }
  }
  std::sort(at(lo), at(hi), less);
  uint64_t mass = mass_before_lo;
  for (size_t i = lo; i < hi; ++i) {
    if (mass >= stop_mass && i > 0) return i;
    mass += weight(items[i]);
  }
  return hi;
}

}  // namespace onnx_genai::sampling
