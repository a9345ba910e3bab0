// Beam search as Hugging Face transformers runs it (generation/utils.py: GenerationMixin._beam_search
// with _get_top_k_continuations, _get_running_beams_for_next_iteration, _update_finished_beams and
// _check_early_stop_heuristic), for a batch of prompts ("groups") of num_beams running beams each.
// Plain CPU bookkeeping over rows of log-probabilities: the Generator runs the model, reorders the
// KV cache by parents() and feeds each beam's new token.
//
// One step of a group, `generated` tokens into its search:
//   1. each beam's row of processed log-probs (BeamLogProbs) plus the beam's score; at the first
//      step every beam holds the same prompt, so beams 1.. start at -1e9 and only beam 0 counts;
//   2. the best K = max(2, 1 + eos ids) * num_beams continuations over all beams, by score (ties to
//      the lower beam, then the lower token id), so that num_beams of them can go on even when the
//      best ones all end;
//   3. a continuation ends when its token is an eos id or the group reaches its token limit. Those
//      among the best num_beams become finished hypotheses scored
//      score / (generated + 1) ^ length_penalty (the new tokens, eos included, as transformers
//      counts them), merged into the group's num_beams best (earlier ones first on ties) unless
//      the group can no longer improve (below);
//   4. the next running beams are the best num_beams continuations, ended ones pushed down by
//      -1e9 (they run on only when fewer than num_beams did not end, i.e. at the limit);
//   5. the group can still improve while it has fewer than num_beams hypotheses, or while its best
//      running beam, scored at length L, beats the worst of them: L = the new length, or under
//      early_stopping kNever with length_penalty > 0 the longest allowed (the limit). Once it
//      cannot, it never can again. The group is done when it cannot improve, when it has num_beams
//      hypotheses under kTrue, or at its limit.
// Scores are float, as transformers' float32 tensors hold them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "onnx_genai/genai.h"
#include "onnx_genai/sampling.h"

namespace onnx_genai::genai {

struct BeamHypothesis {
  std::vector<int32_t> tokens;  // generated tokens, the eos that ended it included
  float score = 0;              // sum of log-probs / tokens.size() ^ length_penalty
  bool eos = false;             // ended by an eos id (else by the length limit)
};

class BeamSearch {
 public:
  // `eos_ids` end hypotheses (none: only the limit does); rows of log-probs are `vocab` wide.
  BeamSearch(const BeamSearchParams& params, size_t groups, std::vector<int32_t> eos_ids, int32_t vocab);

  size_t num_beams() const { return static_cast<size_t>(params_.num_beams); }
  // One step of a group that is not done: `log_probs` holds num_beams rows of `vocab` processed
  // log-probs (row i: beam i's next token). `limit`: tokens the group may generate in all, >= 1,
  // or 0 for none (then kNever with length_penalty > 0 cannot be asked for; the Generator checks).
  void step(size_t group, std::span<const float> log_probs, int64_t limit);

  bool done(size_t group) const { return groups_[group].done; }
  // After step(): running beam i continues the beam that was parents(group)[i] before the step.
  std::span<const int32_t> parents(size_t group) const { return groups_[group].parents; }
  // A running beam's generated tokens.
  std::span<const int32_t> running(size_t group, size_t beam) const { return groups_[group].running[beam]; }
  // The group's finished hypotheses, best first, at most num_beams.
  std::span<const BeamHypothesis> hypotheses(size_t group) const { return groups_[group].finished; }

 private:
  struct Group {
    std::vector<float> scores;                 // running beams' sums of log-probs
    std::vector<std::vector<int32_t>> running;  // running beams' generated tokens
    std::vector<int32_t> parents;
    std::vector<BeamHypothesis> finished;      // best first
    int64_t generated = 0;
    bool can_improve = true;  // transformers' is_early_stop_heuristic_unsatisfied
    bool done = false;
  };
  struct Continuation {
    int32_t beam = 0, token = 0;
    float score = 0;
    bool ends = false;
  };

  bool is_eos(int32_t token) const;
  void top_continuations(const Group& group, std::span<const float> log_probs, int64_t limit);
  void add_finished(Group& group, int64_t length);
  void advance_running(Group& group);

  BeamSearchParams params_;
  std::vector<int32_t> eos_ids_;
  int32_t vocab_;
  size_t keep_;  // K above
  std::vector<Group> groups_;
  std::vector<Continuation> best_;  // this step's K, best first
  std::vector<uint32_t> order_;     // scratch: candidate indices
  std::vector<float> totals_;       // scratch: beam score + log-prob, num_beams * vocab
};

// Each beam row's log-probs as beam search ranks them: log_softmax of the model's logits, then the
// generation's logit processors (make_generation_chain) applied to those log-probs, as
// transformers applies its processors inside beam search.
class BeamLogProbs {
 public:
  explicit BeamLogProbs(LogitProcessorChain chain) : chain_(std::move(chain)) {}
  // `out` gets logits.size() values.
  Status compute(std::span<const float> logits, const TokenHistory& history, std::span<float> out);

 private:
  LogitProcessorChain chain_;
  Candidates candidates_;
  std::vector<float> scratch_;
};

// Fails naming the first beam search parameter of `params` that is invalid or that beam search
// cannot be combined with (sampling, stop strings, constraints, logprobs).
Status check_beam_params(const GeneratorParams& params);

}  // namespace onnx_genai::genai
