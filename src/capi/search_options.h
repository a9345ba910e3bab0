// onnxruntime-genai's search options (genai_config.json "search", set_search_options) and
// guidance (set_guidance), kept by their names and turned into a genai::GeneratorParams when a
// generator starts, or a genai::RequestParams when an engine request is added.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "onnx_genai/constraints.h"
#include "onnx_genai/engine.h"
#include "onnx_genai/genai.h"

namespace onnx_genai::capi {

struct SearchOptions {
  genai::GeneratorParams defaults;  // the model's, for what onnxruntime-genai has no key for (min_p...)
  double max_length = 0;            // prompt + generated; 0 = the context length
  double min_length = 0;            // eos is held back until a sequence is this long
  double top_k = 0, top_p = 1, temperature = 1, repetition_penalty = 1, no_repeat_ngram_size = 0;
  double num_beams = 1, num_return_sequences = 1, length_penalty = 1, diversity_penalty = 0;
  double random_seed = -1;  // -1: a random seed
  double batch_size = 1;
  bool do_sample = false, early_stopping = true, past_present_share_buffer = true;
  std::optional<ConstraintSpec> constraint;  // set_guidance's
};

// The model's defaults (its package's search section or generation_config.json).
SearchOptions search_defaults(const genai::Model& model);

// Fail naming the key, for unknown keys and values out of range.
Status set_search_number(SearchOptions& options, std::string_view name, double value);
Status set_search_bool(SearchOptions& options, std::string_view name, bool value);
Result<double> get_search_number(const SearchOptions& options, std::string_view name);
Result<bool> get_search_bool(const SearchOptions& options, std::string_view name);

// A JSON value of the "search" object applied by its type (number or bool).
Status set_search_value(SearchOptions& options, std::string_view name, const nlohmann::json& value);

// onnxruntime-genai's guidance (type, data) as a constraint: "json_schema" and "regex" map onto
// ConstraintKind; both empty means no guidance; other types fail naming the accepted ones. The
// schema or regex itself is checked only when compiled.
Result<std::optional<ConstraintSpec>> guidance_constraint(std::string_view type, std::string_view data);

// The generator's params for these prompts; fails on what this runtime cannot do (group beam
// search: a diversity_penalty).
Result<genai::GeneratorParams> generator_params(const SearchOptions& options,
                                                std::vector<std::vector<int32_t>> prompts);

// An engine request's params for `prompt`: the engine runs one sequence per request, so
// batch_size, num_beams and num_return_sequences must be 1.
Result<genai::RequestParams> request_params(const SearchOptions& options, const std::vector<int32_t>& prompt);

}  // namespace onnx_genai::capi
