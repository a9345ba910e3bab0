#include "genai/constraint_processor.h"

#include <limits>
#include <mutex>

namespace onnx_genai::genai {
namespace {

// Advances its matcher by the tokens generated since the last step (the history says which:
// after a rewind it rolls back), then masks the row.
class ConstraintProcessor final : public LogitProcessor, public TokenMasker {
 public:
  explicit ConstraintProcessor(std::shared_ptr<CompiledConstraint> constraint)
      : matcher_(std::move(constraint)), mask_(matcher_.mask_words()) {}
  std::string_view name() const override { return "constraint"; }

  Result<std::span<const uint64_t>> mask_for(const TokenHistory& history) override {
    const std::span<const int32_t> generated = history.generated();
    if (generated.size() < matcher_.accepted()) OG_RETURN_IF_ERROR(matcher_.rollback(matcher_.accepted() - generated.size()));
    for (size_t k = matcher_.accepted(); k < generated.size(); ++k) OG_RETURN_IF_ERROR(matcher_.accept_token(generated[k]));
    OG_RETURN_IF_ERROR(matcher_.compute_mask(mask_));
    return std::span<const uint64_t>(mask_);
  }

  Status apply(const TokenHistory& history, Candidates& candidates) override {
    OG_RETURN_IF_ERROR(mask_for(history).status());
    candidates.keep_allowed(mask_);
    if (candidates.ids().empty()) return OG_ERROR("no token the constraint allows is left (every allowed token has logit -inf)");
    return Status::ok();
  }

 private:
  ConstraintMatcher matcher_;
  std::vector<uint64_t> mask_;
};

}  // namespace

Result<std::shared_ptr<CompiledConstraint>> compile_constraint(const ModelParts& model,
                                                               const std::optional<ConstraintSpec>& spec) {
  if (!spec) return std::shared_ptr<CompiledConstraint>();
  if (!model.tokenizer) return OG_ERROR("a constraint needs the model's tokenizer.json");
  // The vocabulary's bytes (a trie of ~150k tokens) are prepared once per model, and a spec
  // compiled once while it is among the recent ones: requests with one schema share its masks.
  std::call_once(model.constraints_once, [&] {
    Result<std::shared_ptr<const ConstraintVocabulary>> vocabulary =
        ConstraintVocabulary::create(*model.tokenizer, static_cast<int32_t>(model.io.vocab_size), model.info.eos_token_ids);
    if (vocabulary) {
      model.constraints = std::make_unique<ConstraintCache>(std::move(vocabulary).value());
    } else {
      model.constraints = vocabulary.status();
    }
  });
  if (!*model.constraints) return model.constraints->status();
  OG_ASSIGN_OR_RETURN(std::shared_ptr<CompiledConstraint> compiled, model.constraints->value()->compile(*spec));
  if (compiled->matches_nothing()) return OG_ERROR("the constraint matches no text at all");
  return compiled;
}

TokenMasker* add_constraint_processor(std::shared_ptr<CompiledConstraint> constraint, LogitProcessorChain& chain) {
  // A grammar often forces repeats (indentation, "}, {", a key's quotes), and an n-gram ban on the
  // only allowed token leaves nothing to sample: the hard constraint wins over the heuristic.
  std::erase_if(chain, [](const std::unique_ptr<LogitProcessor>& p) { return p->name() == "no_repeat_ngram"; });
  auto processor = std::make_unique<ConstraintProcessor>(std::move(constraint));
  TokenMasker* masker = processor.get();
  chain.insert(chain.begin(), std::move(processor));
  return masker;
}

}  // namespace onnx_genai::genai
