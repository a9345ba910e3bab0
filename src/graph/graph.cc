#include "graph/graph.h"

#include <algorithm>
#include <set>

namespace onnx_genai {

std::string canonical_domain(const std::string& domain) { return domain == "ai.onnx" ? "" : domain; }

std::string Node::describe() const {
  return op_type + " (node '" + name + "')";
}

std::vector<Value*> Node::all_inputs() const {
  std::vector<Value*> all = inputs;
  all.insert(all.end(), implicit_inputs.begin(), implicit_inputs.end());
  return all;
}

Value* Graph::add_value(std::string value_name) {
  auto it = by_name_.find(value_name);
  if (it != by_name_.end()) return it->second;
  auto v = std::make_unique<Value>();
  v->name = std::move(value_name);
  Value* raw = v.get();
  by_name_[raw->name] = raw;
  values_.push_back(std::move(v));
  return raw;
}

Value* Graph::find_value(const std::string& value_name) const {
  auto it = by_name_.find(value_name);
  return it == by_name_.end() ? nullptr : it->second;
}

Value* Graph::resolve(const std::string& value_name) const {
  for (const Graph* g = this; g != nullptr; g = g->outer_) {
    if (Value* v = g->find_value(value_name)) return v;
  }
  return nullptr;
}

Node* Graph::add_node(std::unique_ptr<Node> node) {
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

Status Graph::finalize(const Graph* outer) {
  outer_ = outer;
  for (auto& v : values_) {
    v->producer = nullptr;
    v->consumers.clear();
  }
  for (auto& n : nodes_) {
    for (Value* out : n->outputs) {
      if (out == nullptr) continue;
      if (out->producer != nullptr) {
        return OG_ERROR("value '", out->name, "' is produced twice, by ", out->producer->describe(), " and ",
                        n->describe());
      }
      if (out->is_graph_input || out->is_constant()) {
        return OG_ERROR(n->describe(), " writes '", out->name, "', which is a graph input or initializer");
      }
      out->producer = n.get();
    }
  }
  for (auto& n : nodes_) {
    for (Value* in : n->all_inputs()) {
      if (in != nullptr) in->consumers.push_back(n.get());
    }
  }
  // Kahn's algorithm; ties keep file order so plans are stable run to run.
  std::vector<int> pending(nodes_.size(), 0);
  std::map<const Node*, size_t> index;
  for (size_t i = 0; i < nodes_.size(); ++i) index[nodes_[i].get()] = i;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (Value* in : nodes_[i]->all_inputs()) {
      if (in == nullptr) continue;
      if (in->producer != nullptr && index.count(in->producer)) {
        ++pending[i];
      } else if (in->producer == nullptr && !in->is_graph_input && !in->is_constant() && find_value(in->name) == in &&
                 (outer == nullptr || outer->resolve(in->name) == nullptr)) {
        return OG_ERROR(nodes_[i]->describe(), " reads '", in->name, "', which no node, input or initializer provides");
      }
    }
  }
  std::set<size_t> ready;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (pending[i] == 0) ready.insert(i);
  }
  std::vector<std::unique_ptr<Node>> sorted;
  sorted.reserve(nodes_.size());
  while (!ready.empty()) {
    const size_t i = *ready.begin();
    ready.erase(ready.begin());
    for (Value* out : nodes_[i]->outputs) {
      if (out == nullptr) continue;
      for (Node* c : out->consumers) {
        auto ci = index.find(c);  // consumers inside nested subgraphs are not ours to order
        // A node reading the same value twice was counted twice, and is decremented twice.
        if (ci != index.end() && --pending[ci->second] == 0) ready.insert(ci->second);
      }
    }
    sorted.push_back(std::move(nodes_[i]));
  }
  if (sorted.size() != nodes_.size()) {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]) return OG_ERROR("graph '", name, "' has a cycle through ", nodes_[i]->describe());
    }
  }
  nodes_ = std::move(sorted);
  for (Value* out : outputs) {
    if (out->producer == nullptr && !out->is_graph_input && !out->is_constant() &&
        (outer == nullptr || outer->resolve(out->name) == nullptr)) {
      return OG_ERROR("graph output '", out->name, "' is not produced by any node");
    }
  }
  return Status::ok();
}

Value* Graph::add_input(std::string name, DType dtype, std::vector<Dim> dims) {
  Value* v = add_value(std::move(name));
  v->dtype = dtype;
  v->dims = std::move(dims);
  v->is_graph_input = true;
  inputs.push_back(v);
  return v;
}

bool Graph::is_output(const Value* value) const {
  return std::find(outputs.begin(), outputs.end(), value) != outputs.end();
}

int Graph::eliminate_dead_nodes() {
  std::set<const Node*> live;
  std::vector<const Value*> stack(outputs.begin(), outputs.end());
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (v->producer == nullptr || !live.insert(v->producer).second) continue;
    for (const Value* in : v->producer->all_inputs()) {
      if (in != nullptr) stack.push_back(in);
    }
  }
  const size_t before = nodes_.size();
  std::erase_if(nodes_, [&](const std::unique_ptr<Node>& n) { return live.count(n.get()) == 0; });
  // Consumers of surviving values may point at removed nodes; rebuild the links.
  for (auto& v : values_) {
    std::erase_if(v->consumers, [&](Node* n) { return live.count(n) == 0; });
  }
  return static_cast<int>(before - nodes_.size());
}

void Graph::replace_with_constants(Node* n, std::vector<Tensor> constant_values) {
  for (size_t i = 0; i < n->outputs.size(); ++i) {
    if (Value* out = n->outputs[i]) {
      out->initializer = std::move(constant_values[i]);
      out->producer = nullptr;
    }
  }
  for (Value* in : n->all_inputs()) {
    if (in != nullptr) std::erase(in->consumers, n);
  }
  std::erase_if(nodes_, [&](const std::unique_ptr<Node>& p) { return p.get() == n; });
}

}  // namespace onnx_genai
