#include "genai/greedy_output.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace onnx_genai::genai {

Result<bool> add_greedy_tokens_output(Graph& graph, const std::string& logits_name) {
  Value* logits = graph.find_value(logits_name);
  if (logits == nullptr || std::find(graph.outputs.begin(), graph.outputs.end(), logits) == graph.outputs.end()) {
    return false;
  }
  if (graph.find_value(kGreedyTokensOutput) != nullptr) {
    return OG_ERROR("the decoder already has a value named '", kGreedyTokensOutput, "'");
  }
  Value* tokens = graph.add_value(kGreedyTokensOutput);
  tokens->dtype = DType::kI64;
  if (logits->dims && !logits->dims->empty()) {
    tokens->dims = std::vector<Dim>(logits->dims->begin(), logits->dims->end() - 1);  // [B, positions]
  }
  graph.outputs.push_back(tokens);

  auto argmax = std::make_unique<Node>();
  argmax->name = std::string(kGreedyTokensOutput) + "/ArgMax";
  argmax->op_type = "ArgMax";
  argmax->opset = graph.opset_imports.count("") ? graph.opset_imports.at("") : 13;
  argmax->inputs = {logits};
  argmax->outputs = {tokens};
  Attribute axis, keepdims;
  axis.i = -1;
  keepdims.i = 0;
  argmax->attrs.set("axis", axis);
  argmax->attrs.set("keepdims", keepdims);
  graph.add_node(std::move(argmax));
  OG_RETURN_IF_ERROR(graph.finalize().with_context("adding the greedy tokens output"));
  return true;
}

bool takes_plain_argmax(const SamplingParams& params, const LogitProcessorChain& chain) {
  return params.is_greedy() && chain.empty() && !params.logprobs;
}

Result<int32_t> greedy_token(const Tensor& tokens, int64_t row, int64_t position, int64_t vocab) {
  const int64_t token = tokens.data<int64_t>()[row * tokens.shape()[1] + position];
  if (token < 0 || token >= vocab) {
    return OG_ERROR("decoder output '", kGreedyTokensOutput, "' gave token ", token, " for batch row ", row,
                    ", outside the vocabulary [0, ", vocab, ")");
  }
  return static_cast<int32_t>(token);
}

}  // namespace onnx_genai::genai
