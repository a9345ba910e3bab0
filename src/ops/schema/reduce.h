// Plan-time parameters of the reduce family, read the same way by the schemas (shapes) and the
// CPU kernels (loop bounds). Each returns an error naming the node on a bad value.
#pragma once

#include <vector>

#include "graph/graph.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

// Reduce*: which of the `rank` input axes are reduced, from the `axes` attribute or input
// (`axes_input`, null when absent) as the node's opset dictates. Empty axes reduce every axis,
// or none with noop_with_empty_axes.
Result<std::vector<bool>> reduce_axes_mask(const Node& node, const Tensor* axes_input, int rank);

// A tensor seen around the axes one reduction pass reduces: `len` elements `inner` apart, for
// each of outer * inner outputs.
struct ReducePass {
  int64_t outer = 1, len = 1, inner = 1;
};

// The reduced axes of `shape` (not empty) as passes, innermost run first: the shape is coalesced
// into alternating runs of kept and reduced axes (size-1 axes dropped), one pass per reduced run,
// each reading the previous one's output. Nothing left to reduce (noop_with_empty_axes, or only
// size-1 axes): one element-wise pass of len 1.
std::vector<ReducePass> plan_reduce_passes(const Shape& shape, const std::vector<bool>& reduced);

// TopK: K from the attribute (opset < 10) or the K input.
Result<int64_t> topk_k(const Node& node, const Tensor* k_input);

// CumSum: the normalised axis from the axis input.
Result<int> cumsum_axis(const Node& node, const Tensor* axis_input, int rank);

}  // namespace onnx_genai
