#include "graph/graph.h"

#include <gtest/gtest.h>

namespace onnx_genai {
namespace {

// x -> A -> a -> B -> b (output), with nodes added in reverse order, plus a dead node.
struct Fixture {
  Graph g;
  Node* add(const std::string& name, std::vector<Value*> in, std::vector<Value*> out) {
    auto n = std::make_unique<Node>();
    n->name = name;
    n->op_type = "Op";
    n->inputs = std::move(in);
    n->outputs = std::move(out);
    return g.add_node(std::move(n));
  }
};

TEST(Graph, FinalizeSortsTopologically) {
  Fixture f;
  Value* x = f.g.add_value("x");
  x->is_graph_input = true;
  f.g.inputs.push_back(x);
  Value* a = f.g.add_value("a");
  Value* b = f.g.add_value("b");
  f.add("B", {a}, {b});
  f.add("A", {x}, {a});
  f.g.outputs.push_back(b);
  ASSERT_TRUE(f.g.finalize().is_ok());
  ASSERT_EQ(f.g.nodes().size(), 2u);
  EXPECT_EQ(f.g.nodes()[0]->name, "A");
  EXPECT_EQ(f.g.nodes()[1]->name, "B");
  EXPECT_EQ(a->producer->name, "A");
  ASSERT_EQ(a->consumers.size(), 1u);
  EXPECT_EQ(a->consumers[0]->name, "B");
}

TEST(Graph, DeadNodesAreRemoved) {
  Fixture f;
  Value* x = f.g.add_value("x");
  x->is_graph_input = true;
  f.g.inputs.push_back(x);
  Value* y = f.g.add_value("y");
  Value* unused = f.g.add_value("unused");
  f.add("live", {x}, {y});
  f.add("dead", {x}, {unused});
  f.g.outputs.push_back(y);
  ASSERT_TRUE(f.g.finalize().is_ok());
  EXPECT_EQ(f.g.eliminate_dead_nodes(), 1);
  ASSERT_EQ(f.g.nodes().size(), 1u);
  EXPECT_EQ(f.g.nodes()[0]->name, "live");
  EXPECT_EQ(x->consumers.size(), 1u);
}

TEST(Graph, ErrorsNameTheNode) {
  Fixture f;
  Value* a = f.g.add_value("a");
  Value* b = f.g.add_value("b");
  f.add("first", {b}, {a});
  f.add("second", {a}, {b});
  f.g.outputs.push_back(b);
  Status s = f.g.finalize();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("cycle"), std::string::npos) << s.message();

  Fixture twice;
  Value* v = twice.g.add_value("v");
  Value* in = twice.g.add_value("in");
  in->is_graph_input = true;
  twice.add("p1", {in}, {v});
  twice.add("p2", {in}, {v});
  twice.g.outputs.push_back(v);
  Status s2 = twice.g.finalize();
  ASSERT_FALSE(s2.is_ok());
  EXPECT_NE(s2.message().find("produced twice"), std::string::npos) << s2.message();
}

TEST(Graph, ReplaceWithConstants) {
  Fixture f;
  Value* c = f.g.add_value("c");
  Node* n = f.add("make", {}, {c});
  f.g.outputs.push_back(c);
  ASSERT_TRUE(f.g.finalize().is_ok());
  f.g.replace_with_constants(n, {Tensor::scalar_i64(7)});
  EXPECT_TRUE(f.g.nodes().empty());
  ASSERT_TRUE(c->is_constant());
  EXPECT_EQ(c->initializer.data<int64_t>()[0], 7);
}

}  // namespace
}  // namespace onnx_genai
