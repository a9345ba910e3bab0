// Sorting as Array.prototype.sort does it: stable, with a comparator that may fail (comparing a
// string with a number is an error in the reference). A merge sort never reads out of bounds,
// even when the comparator is inconsistent.
#pragma once

#include <string_view>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai::chat_template {

// Sorts `items` ascending by `compare(a, b)` (< 0 when a sorts first).
template <typename T, typename Compare>
Status stable_sort(std::vector<T>& items, Compare compare) {
  std::vector<T> buffer(items.size());
  for (size_t width = 1; width < items.size(); width *= 2) {
    for (size_t lo = 0; lo < items.size(); lo += 2 * width) {
      const size_t mid = std::min(lo + width, items.size()), hi = std::min(lo + 2 * width, items.size());
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        Result<int> order = compare(items[j], items[i]);
        if (!order.is_ok()) return order.status();
        buffer[k++] = *order < 0 ? items[j++] : items[i++];
      }
      while (i < mid) buffer[k++] = items[i++];
      while (j < hi) buffer[k++] = items[j++];
    }
    items.swap(buffer);
  }
  return Status::ok();
}

// String.prototype.localeCompare for ASCII keys, approximating ICU's root collation: punctuation
// before digits before letters, letters compared case-insensitively with lowercase first on ties.
int locale_compare(std::string_view a, std::string_view b);

}  // namespace onnx_genai::chat_template
