#include "genai/speculative.h"

#include <algorithm>

#include "genai/forced_text.h"
#include "sampling/softmax.h"

namespace onnx_genai::genai {

std::string_view speculative_method_name(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::kNgram: return "ngram";
    case SpeculativeMethod::kDraftModel: return "draft";
    case SpeculativeMethod::kNone: break;
  }
  return "none";
}

Status check_speculative_params(const SpeculativeParams& p, const ModelInfo& target, bool constrained) {
  if (p.fast_forward && !constrained) {
    return OG_ERROR("speculative: fast_forward drafts the text a constraint forces, and no constraint is set");
  }
  if (p.method == SpeculativeMethod::kNone) return Status::ok();
  if (p.draft_tokens < 1 || p.draft_tokens > kMostDraftTokens) {
    return OG_ERROR("speculative: draft_tokens must be in [1, ", kMostDraftTokens, "], got ", p.draft_tokens);
  }
  if (p.method == SpeculativeMethod::kNgram && (p.ngram_min < 1 || p.ngram_max < p.ngram_min)) {
    return OG_ERROR("speculative: n-gram sizes must satisfy 1 <= ngram_min <= ngram_max, got ", p.ngram_min, " and ",
                    p.ngram_max);
  }
  if (p.method != SpeculativeMethod::kDraftModel) return Status::ok();
  if (p.draft_model == nullptr) return OG_ERROR("speculative: the draft method needs a draft model");
  const ModelInfo& draft = p.draft_model->info();
  if (draft.vocab_size != target.vocab_size) {
    return OG_ERROR("speculative: the draft model's vocabulary has ", draft.vocab_size, " tokens, the model's ",
                    target.vocab_size, " (drafts must use the same tokenizer)");
  }
  return Status::ok();
}

Status NgramProposer::propose(const TokenHistory& history, int32_t count, Draft& draft) {
  draft.clear();
  const std::span<const int32_t> tokens = history.tokens;
  const auto length = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(ngram_max_, length - 1); n >= ngram_min_; --n) {
    const std::span<const int32_t> suffix = tokens.last(static_cast<size_t>(n));
    // The latest earlier occurrence: its continuation is the text nearest to where we are.
    for (int64_t start = length - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n, to = std::min(length, from + count);
      draft.tokens.assign(tokens.begin() + from, tokens.begin() + to);
      return Status::ok();
    }
  }
  return Status::ok();
}

namespace {

// The last step of a sampling draft model's chain: the distribution its token is drawn from, in
// the fixed-point weights the draw uses (sampling/softmax.h), so q is exactly what was sampled.
class DistributionRecorder final : public LogitProcessor {
 public:
  explicit DistributionRecorder(std::shared_ptr<std::vector<float>> out) : out_(std::move(out)) {}
  std::string_view name() const override { return "draft_distribution"; }
  Status apply(const TokenHistory& /*history*/, Candidates& candidates) override {
    const std::span<const int32_t> ids = candidates.ids();
    sampling::exp_weights(candidates.logits(), ids, weights_);
    const auto total = static_cast<double>(sampling::fixed_total(weights_));
    out_->assign(static_cast<size_t>(candidates.vocab_size()), 0.0f);
    if (total == 0) return Status::ok();  // the pick reports that nothing is left
    for (size_t i = 0; i < ids.size(); ++i) {
      (*out_)[static_cast<size_t>(ids[i])] = static_cast<float>(static_cast<double>(sampling::to_fixed(weights_[i])) / total);
    }
    return Status::ok();
  }

 private:
  std::shared_ptr<std::vector<float>> out_;
  std::vector<float> weights_;
};

// Drafts draw from a stream of their own: the target's seed, offset so the two differ.
constexpr uint64_t kDraftSeedOffset = 0x5eed'd4af'7000'0001ULL;

}  // namespace

DraftModelProposer::DraftModelProposer(const Model& model, const SamplingParams& target) : model_(model) {
  if (target.is_greedy()) {
    sampling_.greedy = true;
    sampling_.repetition_penalty = target.repetition_penalty;
    sampling_.no_repeat_ngram_size = target.no_repeat_ngram_size;
    sampling_.logit_bias = target.logit_bias;
    return;
  }
  sampling_ = target;
  sampling_.logprobs = false;
  sampling_.top_logprobs = 0;
  sampling_.first_processor = nullptr;
  if (target.seed) sampling_.seed = *target.seed + kDraftSeedOffset;
  distribution_ = std::make_shared<std::vector<float>>();
  sampling_.last_processor = [out = distribution_] { return std::make_unique<DistributionRecorder>(out); };
}

Status DraftModelProposer::catch_up(std::span<const int32_t> tokens) {
  if (!generator_) {
    GeneratorParams params;
    params.sampling = sampling_;
    params.ignore_eos = true;  // a draft through eos costs nothing the target would not reject
    params.prompts = {std::vector<int32_t>(tokens.begin(), tokens.end())};
    OG_ASSIGN_OR_RETURN(generator_, Generator::create(model_, params));
    return Status::ok();
  }
  const std::span<const int32_t> known = generator_->tokens(0);
  const auto shared = static_cast<size_t>(
      std::mismatch(known.begin(), known.end(), tokens.begin(), tokens.end()).first - known.begin());
  if (shared < known.size()) OG_RETURN_IF_ERROR(generator_->rewind(shared));
  if (shared < tokens.size()) OG_RETURN_IF_ERROR(generator_->append_tokens(tokens.subspan(shared)));
  return Status::ok();
}

Status DraftModelProposer::propose(const TokenHistory& history, int32_t count, Draft& draft) {
  draft.clear();
  const std::span<const int32_t> tokens = history.tokens;
  // The draft model's own context may be shorter than the target's: no draft past it.
  const int64_t context = model_.info().context_length;
  if (context > 0) count = static_cast<int32_t>(std::min<int64_t>(count, context - 1 - static_cast<int64_t>(tokens.size())));
  if (count <= 0) return Status::ok();
  OG_RETURN_IF_ERROR(catch_up(tokens).with_context("draft model"));
  for (int32_t i = 0; i < count; ++i) {
    OG_RETURN_IF_ERROR(generator_->generate_next().with_context("draft model"));
    draft.tokens.push_back(generator_->tokens(0).back());
    if (distribution_) draft.probabilities.insert(draft.probabilities.end(), distribution_->begin(), distribution_->end());
  }
  return Status::ok();
}

Result<int64_t> verify_draft(const Draft& draft, std::span<const int32_t> argmax,
                             FunctionRef<std::span<const float>(int64_t)> logits_at, Sampler& sampler,
                             FunctionRef<TokenHistory()> history, FunctionRef<Result<bool>(SampledToken)> keep) {
  const auto drafted = static_cast<int64_t>(draft.tokens.size());
  int64_t accepted = 0;
  for (int64_t i = 0; i <= drafted; ++i) {
    SampledToken pick;
    if (!argmax.empty()) {
      pick.token = argmax[static_cast<size_t>(i)];
    } else {
      const std::span<const float> logits = logits_at(i);
      const auto at = static_cast<size_t>(i);
      OG_ASSIGN_OR_RETURN(pick, i < drafted ? sampler.sample_given_draft(logits, history(), draft.tokens[at],
                                                                         draft.probabilities_at(at))
                                            : sampler.sample(logits, history()));
    }
    const int32_t token = pick.token;
    OG_ASSIGN_OR_RETURN(const bool goes_on, keep(std::move(pick)));
    if (!goes_on || i == drafted || token != draft.tokens[static_cast<size_t>(i)]) break;
    ++accepted;
  }
  return accepted;
}

Result<std::unique_ptr<Drafter>> Drafter::create(const SpeculativeParams& p, const SamplingParams& target,
                                                 std::shared_ptr<CompiledConstraint> constraint,
                                                 const Tokenizer* tokenizer) {
  if (!speculates(p)) return std::unique_ptr<Drafter>();
  auto drafter = std::make_unique<Drafter>();
  if (p.fast_forward) {
    if (!constraint || tokenizer == nullptr) return OG_ERROR("internal error: fast-forward without a constraint");
    drafter->forced_ = std::make_unique<ForcedTextProposer>(std::move(constraint), *tokenizer);
  }
  switch (p.method) {
    case SpeculativeMethod::kNgram: drafter->proposer_ = std::make_unique<NgramProposer>(p.ngram_min, p.ngram_max); break;
    case SpeculativeMethod::kDraftModel: drafter->proposer_ = std::make_unique<DraftModelProposer>(*p.draft_model, target); break;
    case SpeculativeMethod::kNone: break;
  }
  if (drafter->proposer_) drafter->length_.emplace(p.draft_tokens, p.adaptive);
  return drafter;
}

Status Drafter::propose(const TokenHistory& history, int64_t room, bool forced_only, Draft& draft) {
  draft.clear();
  last_forced_ = false;
  if (room <= 0) return Status::ok();
  if (forced_) {
    OG_RETURN_IF_ERROR(forced_->propose(history, static_cast<int32_t>(std::min(room, forced_length_)), draft));
    last_forced_ = !draft.tokens.empty();
    if (last_forced_) return Status::ok();
  }
  if (!proposer_ || forced_only) return Status::ok();
  const int64_t count = std::min<int64_t>(length_->next(), room);
  if (count <= 0) return Status::ok();
  return proposer_->propose(history, static_cast<int32_t>(count), draft);
}

void Drafter::record(int64_t drafted, int64_t accepted) {
  if (last_forced_) {
    forced_length_ = accepted == drafted ? std::min<int64_t>(kMostDraftTokens, 2 * forced_length_) : accepted + 1;
    return;
  }
  if (length_) length_->record(static_cast<int32_t>(drafted), static_cast<int32_t>(accepted));
}

int32_t DraftLength::next() {
  if (pause_left_ > 0) {
    --pause_left_;
    return 0;
  }
  return current_;
}

void DraftLength::record(int32_t drafted, int32_t accepted) {
  if (!adaptive_ || drafted == 0) return;
  acceptance_ = 0.5 * acceptance_ + 0.5 * static_cast<double>(accepted) / static_cast<double>(drafted);
  if (accepted == drafted) {
    current_ = std::min(most_, current_ + 2);
    next_pause_ = kFirstPause;
    return;
  }
  current_ = std::max(1, current_ - 1);
  if (current_ > 1 || acceptance_ >= kMinAcceptance) return;
  pause_left_ = next_pause_;
  next_pause_ = std::min(kLongestPause, next_pause_ * 2);
  acceptance_ = 2 * kMinAcceptance;  // one more rejected probe after the pause makes a longer one
}

}  // namespace onnx_genai::genai
