// Cutting a projection's constant weights for tensor parallelism (tensor_parallel_pass.h): a
// projection is a MatMul with a constant 2-D weight [K, N] or a com.microsoft MatMulNBits (B
// [N, K/block, block*bits/8], scales and zero points per (output, block), all output-major).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

using IndexRanges = std::vector<std::pair<int64_t, int64_t>>;  // [begin, end) each, kept in order

// Whether `node` is a projection this file can cut.
bool is_projection(const Node* node);
int64_t projection_outputs(const Node& node);  // N
int64_t projection_inputs(const Node& node);   // K

// `t` with only the indices `ranges` along `axis` (whole-byte dtypes).
Result<Tensor> keep_along_axis(const Tensor& t, int axis, const IndexRanges& ranges);

// The projection computes only output columns `ranges` (joined in order).
Status keep_output_columns(Graph& graph, Node& node, const IndexRanges& ranges);
// The projection reads only input rows [begin, end) of K (its input must then be that slice).
// MatMulNBits: both ends must be multiples of block_size, and a bias is refused (every rank would
// add it before the sum).
Status keep_input_rows(Graph& graph, Node& node, int64_t begin, int64_t end);

}  // namespace onnx_genai
