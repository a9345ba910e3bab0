#include "onnx_genai/shape.h"

#include <string>

namespace onnx_genai {

int64_t Shape::numel() const { return numel(0, rank()); }

int64_t Shape::numel(int begin, int end) const {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims_.size(), 1);
  for (int i = rank() - 2; i >= 0; --i) s[static_cast<size_t>(i)] = s[static_cast<size_t>(i) + 1] * dims_[static_cast<size_t>(i) + 1];
  return s;
}

std::string Shape::to_string() const {
  std::string out = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(dims_[i]);
  }
  return out + "]";
}

int normalize_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) return -1;
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace onnx_genai
