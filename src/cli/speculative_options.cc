#include "cli/speculative_options.h"

#include <cstdio>

namespace onnx_genai::cli {

void add_speculative_options(OptionTable& table, SpeculativeOptions& options) {
  table.valued["--speculative"] = [&options](const std::string& option, const std::string& value) {
    if (value.empty()) return OG_ERROR(option, " wants ngram or a draft model folder");
    options.proposer = value;
    return Status::ok();
  };
  table.valued["--draft-tokens"] = integer_option(options.draft_tokens, 1, 15);
  table.valued["--ngram-max"] = integer_option(options.ngram_max, 1, 64);
}

Result<SpeculativeSetup> load_speculative(const SpeculativeOptions& options, const genai::ModelOptions& model_options) {
  SpeculativeSetup setup;
  if (!options.proposer) return setup;
  setup.params.draft_tokens = static_cast<int32_t>(options.draft_tokens);
  setup.params.ngram_max = static_cast<int32_t>(options.ngram_max);
  if (*options.proposer == "ngram") {
    setup.params.method = genai::SpeculativeMethod::kNgram;
    return setup;
  }
  // A draft model is small: it runs whole on one rank whatever --tensor-parallel says.
  genai::ModelOptions draft_options = model_options;
  draft_options.tensor_parallel = 1;
  auto draft = genai::Model::load(*options.proposer, draft_options);
  if (!draft.is_ok()) return draft.status().with_context("--speculative draft model");
  setup.draft_model = std::move(*draft);
  setup.params.method = genai::SpeculativeMethod::kDraftModel;
  setup.params.draft_model = setup.draft_model.get();
  return setup;
}

std::string speculative_summary(const genai::SpeculativeParams& params, const genai::GenerationStats& stats) {
  const bool proposer = params.method != genai::SpeculativeMethod::kNone;
  if (!proposer && !params.fast_forward) return "";
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  const auto steps = static_cast<double>(stats.speculative_steps);
  const std::string who = !proposer ? std::string("fast-forward")
                                    : "speculative " + std::string(genai::speculative_method_name(params.method)) +
                                          (params.fast_forward ? " + fast-forward" : "");
  char forced[128] = "";
  if (params.fast_forward) {
    std::snprintf(forced, sizeof forced, "; forced text %lld drafted, %lld accepted",
                  static_cast<long long>(stats.forced_drafted_tokens), static_cast<long long>(stats.forced_accepted_tokens));
  }
  char line[384];
  std::snprintf(line, sizeof line,
                "%s: %lld verify steps, %lld drafted, %lld accepted (%.1f%%), mean accepted length %.2f, "
                "drafting %.1f ms%s",
                who.c_str(),
                static_cast<long long>(stats.speculative_steps), static_cast<long long>(stats.drafted_tokens),
                static_cast<long long>(stats.accepted_tokens),
                100.0 * ratio(static_cast<double>(stats.accepted_tokens), static_cast<double>(stats.drafted_tokens)),
                ratio(static_cast<double>(stats.accepted_tokens), steps), stats.drafting_seconds * 1e3, forced);
  return line;
}

}  // namespace onnx_genai::cli
