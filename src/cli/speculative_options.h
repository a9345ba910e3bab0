// Speculative decoding on the command line (generate, bench):
//   --speculative ngram|DRAFT_DIR   prompt lookup, or a draft model's package folder
//   --draft-tokens K                the most tokens drafted per step (default 4)
//   --ngram-max N                   prompt lookup's longest n-gram (default 3)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cli/run_support.h"
#include "onnx_genai/genai.h"

namespace onnx_genai::cli {

struct SpeculativeOptions {
  std::optional<std::string> proposer;  // "ngram" or a draft model folder
  int64_t draft_tokens = 4;
  int64_t ngram_max = 3;
};

void add_speculative_options(OptionTable& table, SpeculativeOptions& options);

// What GeneratorParams::speculative needs, with the draft model (loaded like the target, same
// --threads and --device) kept alive beside it.
struct SpeculativeSetup {
  genai::SpeculativeParams params;
  std::unique_ptr<genai::Model> draft_model;
};
Result<SpeculativeSetup> load_speculative(const SpeculativeOptions& options, const genai::ModelOptions& model_options);

// "speculative ngram: 40 verify steps, 120 drafted, 95 accepted (79.2%), mean accepted length
// 2.38, drafting 0.4 ms", with "; forced text 30 drafted, 30 accepted" under fast-forward (empty
// without either).
std::string speculative_summary(const genai::SpeculativeParams& params, const genai::GenerationStats& stats);

}  // namespace onnx_genai::cli
