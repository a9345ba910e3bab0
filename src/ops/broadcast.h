// Numpy-style broadcasting without materialising: the output is walked as a few coalesced
// dimensions, and each input advances by its own stride (0 along broadcast dimensions).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "onnx_genai/shape.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

// The broadcast of all `shapes`, or an error naming the first incompatible pair.
Result<Shape> broadcast_shapes(std::span<const Shape> shapes);

// Output dims merged where every input is either contiguous or broadcast across the merge, so
// `[2,3,4] + [4]` becomes two dims ([6,4]) and `[2,3,4] + [2,3,4]` one ([24]).
struct BroadcastPlan {
  static constexpr int kMaxInputs = 4;
  std::vector<int64_t> dims;                                  // coalesced output dims
  std::array<std::vector<int64_t>, kMaxInputs> strides;        // element strides per input per dim
  int num_inputs = 0;

  static BroadcastPlan make(const Shape& output, std::span<const Shape> inputs);
  int64_t inner() const { return dims.empty() ? 1 : dims.back(); }
  // Calls fn(output_offset, offsets) for each row: a run of inner() output elements, where
  // offsets[i] is input i's element offset at the row start. Along a row every input's stride
  // is strides[i].back(), which is 1 (contiguous) or 0 (broadcast). `begin_row`/`end_row`
  // select rows (for splitting across threads); rows() = numel / inner().
  int64_t rows() const;
  template <typename Fn>
  void for_each_row(int64_t begin_row, int64_t end_row, Fn&& fn) const;
};

template <typename Fn>
void BroadcastPlan::for_each_row(int64_t begin_row, int64_t end_row, Fn&& fn) const {
  const int outer_rank = static_cast<int>(dims.size()) - 1;
  std::array<int64_t, kMaxInputs> offsets{};
  for (int64_t row = begin_row; row < end_row; ++row) {
    // Decompose the row index over the outer dims (small rank: this is cheap next to the row).
    int64_t rem = row;
    offsets.fill(0);
    for (int d = outer_rank - 1; d >= 0; --d) {
      const int64_t idx = rem % dims[static_cast<size_t>(d)];
      rem /= dims[static_cast<size_t>(d)];
      for (int i = 0; i < num_inputs; ++i) offsets[static_cast<size_t>(i)] += idx * strides[static_cast<size_t>(i)][static_cast<size_t>(d)];
    }
    fn(row * inner(), offsets);
  }
}

}  // namespace onnx_genai
