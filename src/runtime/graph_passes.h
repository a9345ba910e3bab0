// Load-time passes over the graph IR, run once when a Session is created.
#pragma once

#include <set>

#include "graph/graph.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

class ThreadPool;

// Fills Value::dtype for every node output (recursing into subgraphs) and checks that every
// node has a schema and a CPU kernel for its input dtypes. The error lists every unsupported
// node, not just the first.
Status infer_types_and_check_support(Graph& graph);

// Evaluates nodes whose inputs are all constants and replaces them by their values. Returns
// the number of nodes folded.
Result<int> fold_constants(Graph& graph, ThreadPool* pool);

// Values that some node needs while planning (they decide shapes), traced back to the graph
// inputs they come from; values derived only from Shape/Size are not traced further.
struct PlanTimeValues {
  std::set<const Value*> values;
  std::set<const Value*> graph_inputs;
};
PlanTimeValues find_plan_time_values(const Graph& graph);

}  // namespace onnx_genai
