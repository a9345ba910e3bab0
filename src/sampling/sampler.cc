// Sampler: runs the processor chain over one row of logits, then takes the argmax or draws.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <ranges>

#include "sampling/pick.h"
#include "sampling/random.h"
#include "sampling/softmax.h"
#include "onnx_genai/sampling.h"

namespace onnx_genai {
namespace {

// The n highest-logit ids, best first, ties to the lower id: one pass over the row with a heap of
// n rank keys whose front is the worst kept so far.
std::vector<int32_t> highest_tokens(std::span<const float> logits, size_t n) {
  std::vector<uint64_t> heap;
  heap.reserve(n);
  for (size_t i = 0; i < logits.size() && n > 0; ++i) {
    const uint64_t key = sampling::rank_key(logits[i], static_cast<int32_t>(i));
    if (heap.size() < n) {
      heap.push_back(key);
      std::push_heap(heap.begin(), heap.end());
    } else if (key < heap.front()) {
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = key;
      std::push_heap(heap.begin(), heap.end());
    }
  }
  std::sort_heap(heap.begin(), heap.end());
  std::vector<int32_t> tokens;
  for (const uint64_t key : heap) tokens.push_back(sampling::rank_key_token(key));
  return tokens;
}

uint64_t seed_from(const SamplingParams& params) {
  if (params.seed) return *params.seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

Result<Sampler> Sampler::create(const SamplingParams& params, int32_t vocab_size) {
  OG_ASSIGN_OR_RETURN(LogitProcessorChain chain, make_logit_processors(params));
  return create(params, vocab_size, std::move(chain));
}

Result<Sampler> Sampler::create(const SamplingParams& params, int32_t vocab_size, LogitProcessorChain processors) {
  OG_RETURN_IF_ERROR(params.validate());
  if (vocab_size <= 0 || vocab_size > sampling::kMaxVocabulary) {
    return OG_ERROR("sampling: vocabulary size must be in [1, ", sampling::kMaxVocabulary, "], got ", vocab_size);
  }
  for (const auto& [token, bias] : params.logit_bias) {
    if (token < 0 || token >= vocab_size) {
      return OG_ERROR("sampling parameter logit_bias names token ", token, ", outside the vocabulary [0, ",
                      vocab_size, ")");
    }
  }
  for (size_t i = 0; i < processors.size(); ++i) {
    if (!processors[i]) return OG_ERROR("sampling: logit processor ", i, " of the chain is null");
  }
  return Sampler(params, vocab_size, std::move(processors));
}

Sampler::Sampler(const SamplingParams& params, int32_t vocab_size, LogitProcessorChain processors)
    : vocab_size_(vocab_size),
      greedy_(params.is_greedy()),
      logprobs_(params.logprobs),
      top_logprobs_(std::min(static_cast<size_t>(params.top_logprobs), static_cast<size_t>(vocab_size))),
      logprob_source_(params.logprob_source),
      processors_(std::move(processors)),
      rng_state_(sampling::sfc64_seed(seed_from(params))) {}

Status Sampler::check_inputs(std::span<const float> logits, const TokenHistory& history) const {
  if (logits.size() != static_cast<size_t>(vocab_size_)) {
    return OG_ERROR("sampling: logits row has ", logits.size(), " entries, expected the vocabulary size ",
                    vocab_size_);
  }
  OG_RETURN_IF_ERROR(sampling::check_logits(logits));
  if (history.prompt_length > history.tokens.size()) {
    return OG_ERROR("sampling: prompt_length ", history.prompt_length, " exceeds the history's ",
                    history.tokens.size(), " tokens");
  }
  for (size_t i = 0; i < history.tokens.size(); ++i) {
    const int32_t token = history.tokens[i];
    if (token < 0 || token >= vocab_size_) {
      return OG_ERROR("sampling: history token at position ", i, " is ", token, ", outside the vocabulary [0, ",
                      vocab_size_, ")");
    }
  }
  return Status::ok();
}

Status Sampler::process(std::span<const float> logits, const TokenHistory& history) {
  OG_RETURN_IF_ERROR(check_inputs(logits, history));
  candidates_.assign(logits);
  for (const auto& processor : processors_) {
    OG_RETURN_IF_ERROR(processor->apply(history, candidates_).with_context(
        detail::concat("sampling: ", processor->name())));
  }
  return Status::ok();
}

SampledToken Sampler::result_for(int32_t token, std::span<const float> raw_logits) {
  SampledToken result;
  result.token = token;
  if (logprobs_) report_logprobs(raw_logits, result);
  return result;
}

Result<SampledToken> Sampler::sample(std::span<const float> logits, const TokenHistory& history) {
  OG_RETURN_IF_ERROR(process(logits, history));
  OG_ASSIGN_OR_RETURN(const int32_t token, sampling::pick_token(candidates_, greedy_, [this] { return next_uniform(); },
                                                                weights_));
  return result_for(token, logits);
}

Result<SampledToken> Sampler::sample_given_draft(std::span<const float> logits, const TokenHistory& history,
                                                 int32_t draft, std::span<const float> draft_probabilities) {
  if (draft < 0 || draft >= vocab_size_) {
    return OG_ERROR("sampling: drafted token ", draft, " is outside the vocabulary [0, ", vocab_size_, ")");
  }
  if (!draft_probabilities.empty() && draft_probabilities.size() != static_cast<size_t>(vocab_size_)) {
    return OG_ERROR("sampling: the draft's distribution has ", draft_probabilities.size(),
                    " entries, expected the vocabulary size ", vocab_size_);
  }
  if (!draft_probabilities.empty() && !(draft_probabilities[static_cast<size_t>(draft)] > 0)) {
    return OG_ERROR("sampling: drafted token ", draft, " has no probability in the draft's distribution");
  }
  OG_RETURN_IF_ERROR(process(logits, history));
  OG_ASSIGN_OR_RETURN(const int32_t token, sampling::pick_given_draft(candidates_, greedy_, draft, draft_probabilities,
                                                                      [this] { return next_uniform(); }, weights_));
  return result_for(token, logits);
}

double Sampler::next_uniform() { return sampling::sfc64_next_double(rng_state_); }

void Sampler::report_logprobs(std::span<const float> raw_logits, SampledToken& result) {
  const bool raw = logprob_source_ == LogprobSource::kRaw;
  const std::span<const float> logits = raw ? raw_logits : candidates_.logits();
  const double log_normalizer =
      raw ? sampling::log_sum_exp(logits, std::views::iota(int32_t{0}, vocab_size_), weights_)
          : sampling::log_sum_exp(logits, candidates_.ids(), weights_);
  const auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - log_normalizer);
  };
  result.logprob = logprob(result.token);
  for (const int32_t id : highest_tokens(logits, top_logprobs_)) result.top_logprobs.push_back({id, logprob(id)});
}

}  // namespace onnx_genai
