// Graph edits shared by the load-time passes (graph_edit.h).
#include "runtime/graph_edit.h"

#include <algorithm>

namespace onnx_genai {

void detach(Node* node) {
  for (Value* in : node->all_inputs()) {
    if (in != nullptr) std::erase(in->consumers, node);
  }
  for (Value* out : node->outputs) {
    if (out != nullptr && out->producer == node) out->producer = nullptr;
  }
  node->inputs.clear();
  node->implicit_inputs.clear();
  node->outputs.clear();
}

void set_input(Node* node, size_t slot, Value* v) {
  if (node->inputs.size() <= slot) node->inputs.resize(slot + 1, nullptr);
  if (Value* old = node->inputs[slot]) {
    auto it = std::find(old->consumers.begin(), old->consumers.end(), node);
    if (it != old->consumers.end()) old->consumers.erase(it);
  }
  node->inputs[slot] = v;
  if (v != nullptr) v->consumers.push_back(node);
}

Value* add_fresh_value(Graph& graph, std::string name) {
  while (graph.find_value(name) != nullptr) name += "_";
  return graph.add_value(std::move(name));
}

Value* add_constant(Graph& graph, std::string name, Tensor value) {
  Value* v = add_fresh_value(graph, std::move(name));
  v->dtype = value.dtype();
  v->initializer = std::move(value);
  return v;
}

void release_unread(const Graph& graph, const std::vector<Value*>& weights) {
  for (Value* v : weights) {
    if (v->consumers.empty() && !graph.is_output(v)) v->initializer = Tensor();
  }
}

}  // namespace onnx_genai
