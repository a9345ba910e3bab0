#include "genai/greedy_output.h"

namespace onnx_genai::genai {

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
