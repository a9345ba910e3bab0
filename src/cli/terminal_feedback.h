// What the CLI shows on a terminal only (stderr is a tty), so piped output stays plain text:
// a spinner while a model loads, once loading has taken more than a second, and one compact
// stats line after each reply.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "onnx_genai/genai.h"

namespace onnx_genai::cli {

// genai::Model::load, with the spinner on a terminal; a GPU fallback (ModelOptions::cpu_fallback)
// is reported on stderr, on a terminal or not.
Result<std::unique_ptr<genai::Model>> load_model_with_progress(const std::string& dir, const genai::ModelOptions& options);

// Prompt tokens a chat turn took from the KV cache and fed afresh.
struct PromptReuse {
  size_t reused = 0, prefilled = 0;
};

// "[12 tokens · 95.3 tok/s · TTFT 41 ms]" on stderr, on a terminal only; with `reuse`, also
// " · prompt 40 cached + 9 new".
void print_reply_stats_line(const genai::GenerationStats& stats, size_t generated_tokens,
                            const PromptReuse* reuse = nullptr);

}  // namespace onnx_genai::cli
