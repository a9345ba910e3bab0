// Fast-forward (SpeculativeParams::fast_forward): where a constraint's grammar allows exactly
// one byte at a time (the rest of a property name once its first letters tell it apart, "\": "
// in compact JSON, a regex's literal), those bytes are tokenized and proposed as a draft, so
// that one decoder run takes several forced tokens instead of one each.
//
// Only a draft: every drafted position is verified under the grammar's mask like any other
// (verify_draft), so the output is what decoding token by token gives (greedy: the same tokens;
// sampling: the same distribution). The tokenization is the tokenizer's encoding of the forced
// text alone; where the model would split it otherwise (a word it merges with what comes after,
// a piece it joins to the token before), the draft is rejected from there on, which costs only
// the rejected positions of that verify step.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "genai/speculative.h"
#include "onnx_genai/constraints.h"
#include "onnx_genai/tokenizer.h"

namespace onnx_genai::genai {

class ForcedTextProposer final : public DraftProposer {
 public:
  // Forced bytes looked at per draft: more than kMostDraftTokens tokens mostly need.
  static constexpr size_t kMostForcedBytes = 64;

  // `constraint` is the sequence's (compiled once per Generator or request); `tokenizer` the
  // model's, outliving the proposer.
  ForcedTextProposer(std::shared_ptr<CompiledConstraint> constraint, const Tokenizer& tokenizer)
      : matcher_(constraint), constraint_(std::move(constraint)), tokenizer_(tokenizer) {}
  // The tokens of the text forced after `history`'s generated tokens (the prompt is not the
  // grammar's), at most `count`: those of the tokenizer's encoding whose bytes spell its start.
  Status propose(const TokenHistory& history, int32_t count, Draft& draft) override;

 private:
  // Brings the matcher to `generated`: back to what it shares with the tokens it followed (a
  // rejected draft, a rewind), then forward by the rest.
  Status follow(std::span<const int32_t> generated);

  ConstraintMatcher matcher_;
  std::shared_ptr<CompiledConstraint> constraint_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> followed_;  // the generated tokens the matcher has accepted
};

}  // namespace onnx_genai::genai
