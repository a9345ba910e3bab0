// Small edits load-time passes make to a Graph while keeping its producer/consumer links right
// (fusion_passes.cc, tensor_parallel_pass.cc).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace onnx_genai {

// Unlinks `node` from what it reads and writes and empties it: eliminate_dead_nodes removes it.
void detach(Node* node);
// Input `slot` of `node` becomes `v` (inputs grow with omitted ones), consumer lists kept right.
void set_input(Node* node, size_t slot, Value* v);
// A new value named `name` (made unique).
Value* add_fresh_value(Graph& graph, std::string name);
// A new initializer the graph owns.
Value* add_constant(Graph& graph, std::string name, Tensor value);
// Weights nothing reads any more are released (a copied model would otherwise hold them twice).
void release_unread(const Graph& graph, const std::vector<Value*>& weights);

}  // namespace onnx_genai
