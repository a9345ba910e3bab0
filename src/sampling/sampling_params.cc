// SamplingParams validation and the default processor chain.
#include <cmath>
#include <limits>

#include "sampling/processors.h"
#include "onnx_genai/sampling.h"

namespace onnx_genai {
namespace {

// "sampling parameter top_p must be in (0, 1], got 1.5"
template <typename T>
Status invalid(const char* name, const char* expected, T value) {
  return OG_ERROR("sampling parameter ", name, " must be ", expected, ", got ", value);
}

}  // namespace

Status SamplingParams::validate() const {
  // Each test is written so that NaN fails it.
  if (!(std::isfinite(temperature) && temperature >= 0.0f)) {
    return invalid("temperature", "a finite number >= 0", temperature);
  }
  if (top_k < 0) return invalid("top_k", ">= 0 (0 disables it)", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return invalid("top_p", "in (0, 1]", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return invalid("min_p", "in [0, 1]", min_p);
  if (!(typical_p > 0.0f && typical_p <= 1.0f)) return invalid("typical_p", "in (0, 1]", typical_p);
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f)) {
    return invalid("repetition_penalty", "a finite number > 0", repetition_penalty);
  }
  if (!std::isfinite(frequency_penalty)) return invalid("frequency_penalty", "finite", frequency_penalty);
  if (!std::isfinite(presence_penalty)) return invalid("presence_penalty", "finite", presence_penalty);
  if (no_repeat_ngram_size < 0) return invalid("no_repeat_ngram_size", ">= 0 (0 disables it)", no_repeat_ngram_size);
  for (const auto& [token, bias] : logit_bias) {
    if (!(std::isfinite(bias) || bias == -std::numeric_limits<float>::infinity())) {
      return OG_ERROR("sampling parameter logit_bias for token ", token, " must be finite or -inf, got ", bias);
    }
  }
  if (top_logprobs < 0) return invalid("top_logprobs", ">= 0", top_logprobs);
  if (top_logprobs > 0 && !logprobs) {
    return OG_ERROR("sampling parameter top_logprobs=", top_logprobs, " needs logprobs=true");
  }
  return Status::ok();
}

Result<LogitProcessorChain> make_logit_processors(const SamplingParams& params) {
  OG_RETURN_IF_ERROR(params.validate());
  using namespace sampling;
  LogitProcessorChain chain;
  if (params.first_processor) {
    std::unique_ptr<LogitProcessor> first = params.first_processor();
    if (!first) return OG_ERROR("sampling: first_processor made no processor");
    chain.push_back(std::move(first));
  }
  if (!params.logit_bias.empty()) chain.push_back(std::make_unique<LogitBias>(params.logit_bias));
  if (params.repetition_penalty != 1.0f) chain.push_back(std::make_unique<RepetitionPenalty>(params.repetition_penalty));
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    chain.push_back(std::make_unique<FrequencyPresencePenalty>(params.frequency_penalty, params.presence_penalty));
  }
  if (params.no_repeat_ngram_size > 0) {
    chain.push_back(std::make_unique<NoRepeatNGram>(static_cast<size_t>(params.no_repeat_ngram_size)));
  }
  if (!params.is_greedy()) {
    if (params.temperature != 1.0f) chain.push_back(std::make_unique<Temperature>(params.temperature));
    if (params.top_k > 0) chain.push_back(std::make_unique<TopK>(static_cast<size_t>(params.top_k)));
    if (params.top_p < 1.0f) chain.push_back(std::make_unique<TopP>(params.top_p));
    if (params.min_p > 0.0f) chain.push_back(std::make_unique<MinP>(params.min_p));
    if (params.typical_p < 1.0f) chain.push_back(std::make_unique<TypicalP>(params.typical_p));
  }
  if (params.last_processor) {
    std::unique_ptr<LogitProcessor> last = params.last_processor();
    if (!last) return OG_ERROR("sampling: last_processor made no processor");
    chain.push_back(std::move(last));
  }
  return chain;
}

}  // namespace onnx_genai
