// Penalties and biases: they edit only the tokens named by the history or the parameters, so a step
// costs O(history), never O(vocabulary).
#include "sampling/processors.h"

namespace onnx_genai::sampling {
namespace {

bool in_vocabulary(int32_t token, const Candidates& candidates) {
  return token >= 0 && token < candidates.vocab_size();
}

template <typename T>
void size_scratch(std::vector<T>& scratch, const Candidates& candidates) {
  if (scratch.size() != static_cast<size_t>(candidates.vocab_size())) {
    scratch.assign(static_cast<size_t>(candidates.vocab_size()), T{0});
  }
}

}  // namespace

Status LogitBias::apply(const TokenHistory&, Candidates& candidates) {
  for (const auto& [token, bias] : bias_) candidates.set_logit(token, candidates.logit(token) + bias);
  return Status::ok();
}

Status RepetitionPenalty::apply(const TokenHistory& history, Candidates& candidates) {
  size_scratch(seen_, candidates);
  for (const int32_t token : history.tokens) {
    if (!in_vocabulary(token, candidates) || seen_[static_cast<size_t>(token)]) continue;
    seen_[static_cast<size_t>(token)] = 1;
    const float logit = candidates.logit(token);
    candidates.set_logit(token, logit < 0.0f ? logit * penalty_ : logit / penalty_);
  }
  for (const int32_t token : history.tokens) {
    if (in_vocabulary(token, candidates)) seen_[static_cast<size_t>(token)] = 0;
  }
  return Status::ok();
}

Status FrequencyPresencePenalty::apply(const TokenHistory& history, Candidates& candidates) {
  size_scratch(counts_, candidates);
  const std::span<const int32_t> generated = history.generated();
  for (const int32_t token : generated) {
    if (in_vocabulary(token, candidates)) ++counts_[static_cast<size_t>(token)];
  }
  // The second pass applies each distinct token once and leaves the counts at zero for next time.
  for (const int32_t token : generated) {
    if (!in_vocabulary(token, candidates)) continue;
    uint32_t& count = counts_[static_cast<size_t>(token)];
    if (count == 0) continue;
    candidates.set_logit(token, candidates.logit(token) - frequency_ * static_cast<float>(count) - presence_);
    count = 0;
  }
  return Status::ok();
}

}  // namespace onnx_genai::sampling
