// Runs a single node on the CPU outside any plan, allocating its outputs. Used where a value is
// needed before or outside execution: constant folding, plan-time shape values, op unit tests.
#pragma once

#include <vector>

#include "graph/graph.h"
#include "onnx_genai/tensor.h"

namespace onnx_genai {

class ThreadPool;

// `inputs[i]` undefined marks an omitted optional input. `pool` may be null (runs inline).
Result<std::vector<Tensor>> run_node_on_cpu(const Node& node, const std::vector<Tensor>& inputs,
                                            ThreadPool* pool = nullptr);

}  // namespace onnx_genai
