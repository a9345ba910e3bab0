// The load-time rewrite that computes logits only at the rows asked for (src/genai/logit_rows.h):
// where it applies, what it leaves alone. Its results are checked end to end by the greedy locks
// (GreedyLock.*, incl. the softcapped Gemma fixtures) and the perplexity tests, against ONNX Runtime.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/generation_passes.h"
#include "genai_test_util.h"
#include "onnx/model.h"

namespace onnx_genai {
namespace {

Node* producer_of(Graph& graph, const std::string& name) {
  Value* v = graph.find_value(name);
  return v != nullptr ? v->producer : nullptr;
}

bool has_input(const Graph& graph, const std::string& name) {
  return std::any_of(graph.inputs.begin(), graph.inputs.end(), [&](const Value* v) { return v->name == name; });
}

class LogitRows : public ::testing::Test {
 protected:
  std::shared_ptr<Model> load(const testing::ParityFixture& fixture) {
    const auto dir = testing::build_model_or_fail(fixture, scratch_.path());
    auto model = load_onnx_model((dir / "model.onnx").string());
    EXPECT_TRUE(model.is_ok()) << model.status().message();
    return model.is_ok() ? *model : nullptr;
  }
  testing::ScopedTempDir scratch_;
};

// The LM head is found through the softcap's Div, Tanh and Mul, and reads the gathered rows.
TEST_F(LogitRows, ReachesTheHeadThroughASoftcap) {
  for (const char* style : {"genai", "standard"}) {
    SCOPED_TRACE(style);
    auto model = load({std::string("rows_gemma_") + style,
                       {"--preset", "gemma", "--style", style, "--set", "final_logit_softcapping=30.0"}, {}, 0, ""});
    ASSERT_NE(model, nullptr);
    Graph& graph = *model->graph;
    ASSERT_EQ(producer_of(graph, "logits")->op_type, "Mul");
    auto applied = select_logit_rows(graph, "logits");
    ASSERT_TRUE(applied.is_ok()) << applied.status().message();
    EXPECT_TRUE(*applied);
    EXPECT_TRUE(has_input(graph, kLogitRowsInput));
    const Value* rows = graph.find_value(kLogitRowsInput);
    ASSERT_EQ(rows->consumers.size(), 1u);
    const Node* gather = rows->consumers[0];
    EXPECT_EQ(gather->op_type, "GatherElements");
    const Node* head = gather->outputs[0]->consumers.at(0);
    EXPECT_TRUE(head->op_type == "MatMul" || head->op_type == "MatMulNBits") << head->op_type;
  }
}

// Logits that come out of something other than a position-wise chain from a MatMul (here the
// LM head's output also feeds a second graph output) are left as the graph computes them.
TEST_F(LogitRows, LeavesOtherGraphsAlone) {
  auto model = load({"rows_llama", {"--preset", "llama", "--style", "genai"}, {}, 0, ""});
  ASSERT_NE(model, nullptr);
  Graph& graph = *model->graph;
  EXPECT_FALSE(*select_logit_rows(graph, "no_such_output"));
  // A second reader of the head's output (as if the graph also returned it) pins every position.
  Value* logits = graph.find_value("logits");
  Value* extra = graph.add_value("logits_copy");
  auto identity = std::make_unique<Node>();
  identity->name = "copy";
  identity->op_type = "Identity";
  identity->opset = 17;
  identity->inputs = {logits};
  identity->outputs = {extra};
  graph.add_node(std::move(identity));
  graph.outputs.push_back(extra);
  ASSERT_TRUE(graph.finalize().is_ok());
  auto applied = select_logit_rows(graph, "logits");
  ASSERT_TRUE(applied.is_ok());
  EXPECT_FALSE(*applied);
  EXPECT_FALSE(has_input(graph, kLogitRowsInput));
}

}  // namespace
}  // namespace onnx_genai
