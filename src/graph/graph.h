// The graph IR: values (tensors flowing between nodes) and nodes, owned by a Graph.
// Subgraphs (If branches) are Graphs owned by their node's attributes; a subgraph may read
// values of enclosing graphs by name (ONNX outer-scope references).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/attribute.h"
#include "onnx_genai/status.h"
#include "onnx_genai/tensor.h"

namespace onnx_genai {

class Node;

// Normalised operator domain: "ai.onnx" -> "".
std::string canonical_domain(const std::string& domain);

// One dimension of a declared shape: a number, a symbol ("batch"), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // non-empty for named symbolic dimensions
  bool known() const { return value >= 0; }
};

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;
  std::optional<std::vector<Dim>> dims;  // nullopt: rank unknown
  Node* producer = nullptr;              // null for graph inputs and initializers
  std::vector<Node*> consumers;
  Tensor initializer;                    // defined for initializers / folded constants
  bool is_graph_input = false;
  bool is_constant() const { return initializer.defined(); }
};

class Node {
 public:
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  int opset = 0;       // opset version imported for `domain` by the model
  std::vector<Value*> inputs;   // nullptr marks an omitted optional input
  std::vector<Value*> outputs;  // nullptr marks an omitted optional output
  Attributes attrs;
  // Outer-scope values read by this node's subgraphs (If branches): they must be computed
  // before the node and kept alive until it runs, exactly like explicit inputs.
  std::vector<Value*> implicit_inputs;

  // Explicit then implicit inputs (nullptrs for omitted optional inputs included).
  std::vector<Value*> all_inputs() const;
  Value* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  // "Add (node 'add_1')" for error messages.
  std::string describe() const;
};

class Graph {
 public:
  std::string name;
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
  std::map<std::string, int> opset_imports;  // domain -> version ("" and "ai.onnx" both map to "")

  Value* add_value(std::string name);
  Value* find_value(const std::string& name) const;
  // A new graph input (appended to `inputs`) of `dtype` and declared `dims`.
  Value* add_input(std::string name, DType dtype, std::vector<Dim> dims);
  bool is_output(const Value* value) const;
  Node* add_node(std::unique_ptr<Node> node);
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<std::unique_ptr<Value>>& values() const { return values_; }

  // Rebuilds producer/consumer links from node inputs/outputs and sorts nodes topologically.
  // Fails naming a node on a cycle, or an input that nothing produces (outer-scope names are
  // allowed when `outer` knows them).
  Status finalize(const Graph* outer = nullptr);
  // Removes nodes whose outputs reach no graph output (and values nobody references).
  int eliminate_dead_nodes();
  // Replaces node `n` by binding each output to a constant tensor; the node is removed.
  void replace_with_constants(Node* n, std::vector<Tensor> values);
  // Name lookup through enclosing graphs.
  Value* resolve(const std::string& name) const;
  const Graph* outer() const { return outer_; }

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Value>> values_;
  std::map<std::string, Value*> by_name_;
  const Graph* outer_ = nullptr;
};

}  // namespace onnx_genai
