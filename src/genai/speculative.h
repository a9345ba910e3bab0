// Speculative decoding's pieces for the Generator and the Engine (GeneratorParams::speculative):
// the proposers that draft tokens, the rule that sets how many to draft, and the Drafter that
// picks a sequence's proposer each step.
//
// Prompt lookup and fast-forward (forced_text.h) draft with certainty (a one-point draft
// distribution); a draft model samples its draft when the model samples, and hands over the
// distribution of each drafted token, which the verification needs beside the target's
// (Sampler::sample_given_draft). EAGLE/MTP heads reading the target's hidden states fit the same
// interface.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/function_ref.h"
#include "onnx_genai/genai.h"

namespace onnx_genai::genai {

// The most tokens one verify step drafts: it then stays within kMaxStepWidthAtCapacity.
inline constexpr int32_t kMostDraftTokens = 15;

struct Draft {
  std::vector<int32_t> tokens;
  // For a sampled draft, the proposer's probability of every vocabulary token at each drafted
  // position (tokens.size() rows of the vocabulary); empty when every token was certain.
  std::vector<float> probabilities;

  // Position i's row of `probabilities` (empty for a certain draft).
  std::span<const float> probabilities_at(size_t i) const {
    if (probabilities.empty()) return {};
    const size_t vocab = probabilities.size() / tokens.size();
    return std::span<const float>(probabilities).subspan(i * vocab, vocab);
  }
  void clear() {
    tokens.clear();
    probabilities.clear();
  }
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  // Up to `count` tokens likely to follow `history` (the sequence so far: the prompt, then the
  // generated tokens up to the last sampled one) into `draft`; fewer, or none, when it has no guess.
  virtual Status propose(const TokenHistory& history, int32_t count, Draft& draft) = 0;
};

// Prompt lookup decoding (Saxena 2023): the text's last n tokens, for n from ngram_max down to
// ngram_min, are searched for earlier in the sequence; the tokens that followed their latest
// earlier occurrence are the draft. Free to run, and strong wherever the output repeats its input
// (summaries, edits, code).
class NgramProposer final : public DraftProposer {
 public:
  NgramProposer(int32_t ngram_min, int32_t ngram_max) : ngram_min_(ngram_min), ngram_max_(ngram_max) {}
  Status propose(const TokenHistory& history, int32_t count, Draft& draft) override;

 private:
  int32_t ngram_min_, ngram_max_;
};

// A smaller model with the same vocabulary decodes the draft in a Generator of its own. For a
// greedy target it decodes greedily under the target's history-dependent processors (repetition
// penalty, banned n-grams, logit bias: a greedy target's picks are the argmax after them); for a
// sampling target it samples under the target's whole chain (its own seed, derived from the
// target's) and records each token's distribution, so that drafts agree as often as the two
// distributions overlap.
// Before drafting it is brought to the target's sequence: rewound to what the two share (the
// accepted part of its last draft) and fed what it lacks (the target's own token after it).
class DraftModelProposer final : public DraftProposer {
 public:
  DraftModelProposer(const Model& model, const SamplingParams& target);
  Status propose(const TokenHistory& history, int32_t count, Draft& draft) override;

 private:
  Status catch_up(std::span<const int32_t> tokens);

  const Model& model_;
  SamplingParams sampling_;
  // Sampled drafts: the last step's distribution, written by the draft Generator's chain.
  std::shared_ptr<std::vector<float>> distribution_;
  std::unique_ptr<Generator> generator_;
};

// Whether `params` asks for drafts at all (a proposer, fast-forward or both).
inline bool speculates(const SpeculativeParams& params) {
  return params.method != SpeculativeMethod::kNone || params.fast_forward;
}
// `constrained`: whether the sequence has a constraint (fast-forward needs one).
Status check_speculative_params(const SpeculativeParams& params, const ModelInfo& target, bool constrained);

// The tokens a verify step yields: at each position 0..draft size the model's own pick (`argmax`
// when the graph took the plain argmax at each, else from `logits_at(position)`'s row through
// Sampler::sample_given_draft given the drafted token and its distribution; after the last
// drafted one, sample()), handed to `keep` (which appends it to the sequence, so `history` grows)
// until a pick differs from the draft or `keep` returns false (the sequence ended). Returns how
// many drafted tokens were accepted.
Result<int64_t> verify_draft(const Draft& draft, std::span<const int32_t> argmax,
                             FunctionRef<std::span<const float>(int64_t)> logits_at, Sampler& sampler,
                             FunctionRef<TokenHistory()> history, FunctionRef<Result<bool>(SampledToken)> keep);

// How many tokens to draft next (0: take a plain step), from what the last drafts achieved.
// Hugging Face's heuristic schedule grows K by 2 after a fully accepted draft and shrinks it by 1
// otherwise; at K = 1 the acceptance rate (a moving average) decides whether drafting pays for its
// longer step, and below kMinAcceptance drafting pauses for a number of steps that doubles with
// every pause in a row (up to kLongestPause), then K = 1 is tried again. It reads only accepted
// counts, never clocks, so a seeded run takes the same steps every time.
class DraftLength {
 public:
  static constexpr double kMinAcceptance = 0.25;
  static constexpr int32_t kFirstPause = 4, kLongestPause = 64;

  DraftLength(int32_t most, bool adaptive) : most_(most), current_(most), adaptive_(adaptive) {}
  int32_t next();  // before a step: tokens to draft, 0 for a plain step
  void record(int32_t drafted, int32_t accepted);

 private:
  int32_t most_, current_;
  bool adaptive_;
  double acceptance_ = 1.0;  // moving average of accepted / drafted at K = 1
  int32_t pause_left_ = 0, next_pause_ = kFirstPause;
};

// Who drafts for one sequence. With fast-forward, the text the constraint forces comes first.
// With a model that spells text as its tokenizer does it is kept nearly always, so it is drafted
// whole (up to kMostDraftTokens) whatever DraftLength says, and its outcome does not move
// DraftLength. A model that spells it in other pieces (a small one, unfamiliar words) rejects
// much of it, and a long rejected draft costs a wide verify step: after a rejection the next
// forced draft is one token longer than what was kept, and it doubles after a whole one is kept.
// Where nothing is forced, the method's proposer drafts as DraftLength allows.
class Drafter {
 public:
  // Null when `params` asks for no drafts. `constraint` (with the model's tokenizer) is the
  // sequence's, needed for fast-forward.
  static Result<std::unique_ptr<Drafter>> create(const SpeculativeParams& params, const SamplingParams& target,
                                                 std::shared_ptr<CompiledConstraint> constraint,
                                                 const Tokenizer* tokenizer);
  // The draft after `history`: at most `room` tokens (those the sequence may still take, less the
  // one after the draft); `forced_only` leaves out the method's proposer (a busy engine).
  Status propose(const TokenHistory& history, int64_t room, bool forced_only, Draft& draft);
  // After the last draft was verified.
  void record(int64_t drafted, int64_t accepted);
  // Whether the last draft was forced text (fast-forward).
  bool last_forced() const { return last_forced_; }

 private:
  std::unique_ptr<DraftProposer> forced_, proposer_;
  std::optional<DraftLength> length_;
  int64_t forced_length_ = kMostDraftTokens;  // the most tokens of the next forced draft
  bool last_forced_ = false;
};

}  // namespace onnx_genai::genai
