// A concrete tensor shape. Symbolic dimensions live in the graph IR (graph/value.h) and are
// resolved to a Shape when inputs are bound.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace onnx_genai {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t>& dims() { return dims_; }
  int64_t numel() const;
  // Product of dims in [begin, end).
  int64_t numel(int begin, int end) const;
  // Row-major element strides.
  std::vector<int64_t> strides() const;
  std::string to_string() const;  // "[2,3,4]"
  bool operator==(const Shape&) const = default;

 private:
  std::vector<int64_t> dims_;
};

// Normalises a possibly negative axis against `rank`; returns -1 when out of range.
int normalize_axis(int64_t axis, int rank);

}  // namespace onnx_genai
