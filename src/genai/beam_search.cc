// Beam search bookkeeping (see beam_search.h for the algorithm and where it comes from).
#include "genai/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace onnx_genai::genai {

namespace {

// transformers' stand-in for "not this one": beams 1.. at the first step, ended continuations
// among the running candidates, the worst hypothesis while fewer than num_beams have finished.
constexpr float kPushedDown = -1.0e9f;

// length ^ length_penalty as transformers computes it (a Python float), applied to float scores.
float length_divisor(int64_t length, float length_penalty) {
  return static_cast<float>(std::pow(static_cast<double>(length), static_cast<double>(length_penalty)));
}

}  // namespace

BeamSearch::BeamSearch(const BeamSearchParams& params, size_t groups, std::vector<int32_t> eos_ids, int32_t vocab)
    : params_(params),
      eos_ids_(std::move(eos_ids)),
      vocab_(vocab),
      keep_(std::max<size_t>(2, 1 + eos_ids_.size()) * static_cast<size_t>(params.num_beams)),
      groups_(groups) {
  const size_t beams = num_beams();
  for (Group& group : groups_) {
    group.scores.assign(beams, kPushedDown);
    group.scores[0] = 0;
    group.running.resize(beams);
    group.parents.resize(beams);
  }
}

bool BeamSearch::is_eos(int32_t token) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
}

void BeamSearch::top_continuations(const Group& group, std::span<const float> log_probs, int64_t limit) {
  const size_t beams = num_beams(), vocab = static_cast<size_t>(vocab_);
  totals_.resize(beams * vocab);
  for (size_t b = 0; b < beams; ++b) {
    for (size_t t = 0; t < vocab; ++t) totals_[b * vocab + t] = group.scores[b] + log_probs[b * vocab + t];
  }
  order_.resize(totals_.size());
  std::iota(order_.begin(), order_.end(), 0u);
  const size_t k = std::min(keep_, order_.size());
  std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k), order_.end(),
                    [this](uint32_t a, uint32_t b) { return totals_[a] > totals_[b] || (totals_[a] == totals_[b] && a < b); });
  const bool at_limit = limit > 0 && group.generated + 1 >= limit;
  best_.resize(k);
  for (size_t i = 0; i < k; ++i) {
    Continuation& c = best_[i];
    c.beam = static_cast<int32_t>(order_[i] / vocab);
    c.token = static_cast<int32_t>(order_[i] % vocab);
    c.score = totals_[order_[i]];
    c.ends = at_limit || is_eos(c.token);
  }
}

void BeamSearch::add_finished(Group& group, int64_t length) {
  // transformers also refuses hypotheses once kTrue has num_beams of them; such a group is done
  // here and takes no more steps.
  if (!group.can_improve) return;
  const size_t beams = num_beams();
  const float divisor = length_divisor(length, params_.length_penalty);
  // Only the best num_beams continuations may finish; the others are there to keep num_beams running.
  for (size_t i = 0; i < std::min(beams, best_.size()); ++i) {
    const Continuation& c = best_[i];
    if (!c.ends) continue;
    BeamHypothesis hypothesis;
    hypothesis.tokens = group.running[static_cast<size_t>(c.beam)];
    hypothesis.tokens.push_back(c.token);
    hypothesis.score = c.score / divisor;
    hypothesis.eos = is_eos(c.token);
    // After every earlier hypothesis of an equal score (transformers' merge puts the old ones first).
    const auto at = std::upper_bound(group.finished.begin(), group.finished.end(), hypothesis.score,
                                     [](float score, const BeamHypothesis& h) { return score > h.score; });
    group.finished.insert(at, std::move(hypothesis));
    if (group.finished.size() > beams) group.finished.pop_back();
  }
}

void BeamSearch::advance_running(Group& group) {
  const size_t beams = num_beams();
  std::vector<float> adjusted(best_.size());
  for (size_t i = 0; i < best_.size(); ++i) adjusted[i] = best_[i].score + (best_[i].ends ? kPushedDown : 0.0f);
  std::vector<size_t> pick(best_.size());
  std::iota(pick.begin(), pick.end(), size_t{0});
  std::stable_sort(pick.begin(), pick.end(), [&](size_t a, size_t b) { return adjusted[a] > adjusted[b]; });
  std::vector<std::vector<int32_t>> running(beams);
  for (size_t i = 0; i < beams; ++i) {
    const Continuation& c = best_[pick[i]];
    running[i] = group.running[static_cast<size_t>(c.beam)];
    running[i].push_back(c.token);
    group.parents[i] = c.beam;
    group.scores[i] = adjusted[pick[i]];
  }
  group.running = std::move(running);
}

void BeamSearch::step(size_t group_index, std::span<const float> log_probs, int64_t limit) {
  Group& group = groups_[group_index];
  top_continuations(group, log_probs, limit);
  const int64_t length = group.generated + 1;
  add_finished(group, length);
  advance_running(group);
  group.generated = length;

  const size_t beams = num_beams();
  const bool to_the_limit = params_.early_stopping == EarlyStopping::kNever && params_.length_penalty > 0 && limit > 0;
  const float best_possible = group.scores[0] / length_divisor(to_the_limit ? limit : length, params_.length_penalty);
  const float worst_finished = group.finished.size() == beams ? group.finished.back().score : kPushedDown;
  group.can_improve = group.can_improve && best_possible > worst_finished;
  const bool full_and_stopping = params_.early_stopping == EarlyStopping::kTrue && group.finished.size() == beams;
  const bool at_limit = limit > 0 && length >= limit;
  group.done = !group.can_improve || full_and_stopping || at_limit;
}

Status BeamLogProbs::compute(std::span<const float> logits, const TokenHistory& history, std::span<float> out) {
  float most = -std::numeric_limits<float>::infinity();
  for (const float x : logits) {
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity()) {
      return OG_ERROR("beam search: the model's logits hold ", x);
    }
    most = std::max(most, x);
  }
  if (most == -std::numeric_limits<float>::infinity()) return OG_ERROR("beam search: every logit is -inf");
  double sum = 0;
  for (const float x : logits) sum += std::exp(static_cast<double>(x) - most);
  const auto log_total = static_cast<float>(most + std::log(sum));
  scratch_.resize(logits.size());
  for (size_t t = 0; t < logits.size(); ++t) scratch_[t] = logits[t] - log_total;
  candidates_.assign(scratch_);
  for (const auto& processor : chain_) {
    OG_RETURN_IF_ERROR(processor->apply(history, candidates_).with_context(std::string(processor->name())));
  }
  const std::span<const float> processed = candidates_.logits();
  std::copy(processed.begin(), processed.end(), out.begin());
  return Status::ok();
}

Status check_beam_params(const GeneratorParams& params) {
  const BeamSearchParams& beam = params.beam;
  if (beam.num_beams < 1) return OG_ERROR("generator: num_beams must be >= 1, got ", beam.num_beams);
  if (beam.num_return_sequences < 1 || beam.num_return_sequences > beam.num_beams) {
    return OG_ERROR("generator: num_return_sequences must be in [1, num_beams ", beam.num_beams, "], got ",
                    beam.num_return_sequences);
  }
  if (!std::isfinite(beam.length_penalty)) {
    return OG_ERROR("generator: length_penalty must be finite, got ", beam.length_penalty);
  }
  if (beam.num_beams == 1) return Status::ok();
  const auto refuse = [&](const char* what) {
    return OG_ERROR("generator: beam search (num_beams ", beam.num_beams, ") cannot be combined with ", what);
  };
  if (!params.sampling.is_greedy()) {
    return refuse("sampling (do_sample / a temperature): turn sampling off, or use num_beams 1 to sample");
  }
  if (!params.stop_strings.empty()) return refuse("stop strings");
  if (params.constraint) return refuse("a constraint (structured output)");
  if (params.sampling.logprobs) return refuse("logprobs (each returned sequence has a beam score instead)");
  return Status::ok();
}

}  // namespace onnx_genai::genai
