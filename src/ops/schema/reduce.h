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

// TopK: K from the attribute (opset < 10) or the K input.
Result<int64_t> topk_k(const Node& node, const Tensor* k_input);

// CumSum: the normalised axis from the axis input.
Result<int> cumsum_axis(const Node& node, const Tensor* axis_input, int rank);

}  // namespace onnx_genai
