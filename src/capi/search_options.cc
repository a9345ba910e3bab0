// Search options by onnxruntime-genai's key names: a table of keys, each with its slot and range;
// guidance by its type names: a table of types, each with its constraint kind.
#include "capi/search_options.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "genai/beam_search.h"

namespace onnx_genai::capi {

namespace {

struct NumberKey {
  std::string_view name;
  double SearchOptions::*slot;
  double lowest, highest;
  bool whole;        // an integer option
  bool lowest_open;  // the lowest value itself is out of range
};

constexpr double kMaxWhole = 9007199254740992.0;  // 2^53: every whole double below it is exact
constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr NumberKey kNumberKeys[] = {
    {"max_length", &SearchOptions::max_length, 1, kMaxWhole, true, false},
    {"min_length", &SearchOptions::min_length, 0, kMaxWhole, true, false},
    {"top_k", &SearchOptions::top_k, 0, 2147483647.0, true, false},
    {"top_p", &SearchOptions::top_p, 0, 1, false, true},
    {"temperature", &SearchOptions::temperature, 0, kInf, false, false},
    {"repetition_penalty", &SearchOptions::repetition_penalty, 0, kInf, false, true},
    {"no_repeat_ngram_size", &SearchOptions::no_repeat_ngram_size, 0, 2147483647.0, true, false},
    {"num_beams", &SearchOptions::num_beams, 1, 2147483647.0, true, false},
    {"num_return_sequences", &SearchOptions::num_return_sequences, 1, 2147483647.0, true, false},
    {"length_penalty", &SearchOptions::length_penalty, -kInf, kInf, false, false},
    {"diversity_penalty", &SearchOptions::diversity_penalty, -kInf, kInf, false, false},
    {"random_seed", &SearchOptions::random_seed, -1, kMaxWhole, true, false},
    // A batch is one sequence per row, each with its own sampler and cache rows.
    {"batch_size", &SearchOptions::batch_size, 1, 65536, true, false},
};

struct BoolKey {
  std::string_view name;
  bool SearchOptions::*slot;
};

constexpr BoolKey kBoolKeys[] = {
    {"do_sample", &SearchOptions::do_sample},
    {"early_stopping", &SearchOptions::early_stopping},
    {"past_present_share_buffer", &SearchOptions::past_present_share_buffer},
};

const NumberKey* find_number(std::string_view name) {
  for (const NumberKey& key : kNumberKeys) {
    if (key.name == name) return &key;
  }
  return nullptr;
}

const BoolKey* find_bool(std::string_view name) {
  for (const BoolKey& key : kBoolKeys) {
    if (key.name == name) return &key;
  }
  return nullptr;
}

Status unknown(std::string_view name, const char* kind) {
  std::string known;
  for (const NumberKey& key : kNumberKeys) known += std::string(known.empty() ? "" : ", ") + std::string(key.name);
  for (const BoolKey& key : kBoolKeys) known += ", " + std::string(key.name);
  const bool other_kind = std::string_view(kind) == "number" ? find_bool(name) != nullptr : find_number(name) != nullptr;
  if (other_kind) return OG_ERROR("search option '", name, "' is not a ", kind);
  return OG_ERROR("unknown search option '", name, "' (known: ", known, ")");
}

struct GuidanceType {
  std::string_view name;
  ConstraintKind kind;
};

// onnxruntime-genai's guidance types (its llguidance takes these three; "json_object" is not one).
constexpr GuidanceType kGuidanceTypes[] = {
    {"json_schema", ConstraintKind::kJsonSchema},
    {"regex", ConstraintKind::kRegex},
    {"lark_grammar", ConstraintKind::kLarkGrammar},
};

int32_t to_int32(double value) { return static_cast<int32_t>(std::clamp(value, -2147483648.0, 2147483647.0)); }

}  // namespace

SearchOptions search_defaults(const genai::Model& model) {
  SearchOptions options;
  options.defaults = model.default_params();
  const genai::GeneratorParams& params = options.defaults;
  const SamplingParams& s = params.sampling;
  options.max_length = static_cast<double>(params.max_length > 0 ? params.max_length : model.info().context_length);
  options.do_sample = !s.greedy;
  options.top_k = s.top_k;
  options.top_p = s.top_p;
  options.temperature = s.temperature;
  options.repetition_penalty = s.repetition_penalty;
  options.no_repeat_ngram_size = s.no_repeat_ngram_size;
  options.num_beams = params.beam.num_beams;
  options.num_return_sequences = params.beam.num_return_sequences;
  options.length_penalty = params.beam.length_penalty;
  options.early_stopping = params.beam.early_stopping == genai::EarlyStopping::kTrue;
  options.past_present_share_buffer = model.info().shared_kv_buffer;
  return options;
}

Status set_search_number(SearchOptions& options, std::string_view name, double value) {
  const NumberKey* key = find_number(name);
  if (key == nullptr) return unknown(name, "number");
  const bool below = key->lowest_open ? !(value > key->lowest) : !(value >= key->lowest);
  if (std::isnan(value) || below || value > key->highest) {
    return OG_ERROR("search option ", name, " must be in ", key->lowest_open ? "(" : "[", key->lowest, ", ",
                    key->highest, "], got ", value);
  }
  if (key->whole && value != std::floor(value)) {
    return OG_ERROR("search option ", name, " must be a whole number, got ", value);
  }
  options.*(key->slot) = value;
  return Status::ok();
}

Status set_search_bool(SearchOptions& options, std::string_view name, bool value) {
  const BoolKey* key = find_bool(name);
  if (key == nullptr) return unknown(name, "bool");
  options.*(key->slot) = value;
  return Status::ok();
}

Result<double> get_search_number(const SearchOptions& options, std::string_view name) {
  const NumberKey* key = find_number(name);
  if (key == nullptr) return unknown(name, "number");
  return options.*(key->slot);
}

Result<bool> get_search_bool(const SearchOptions& options, std::string_view name) {
  const BoolKey* key = find_bool(name);
  if (key == nullptr) return unknown(name, "bool");
  return options.*(key->slot);
}

Status set_search_value(SearchOptions& options, std::string_view name, const nlohmann::json& value) {
  if (value.is_boolean()) return set_search_bool(options, name, value.get<bool>());
  if (value.is_number()) return set_search_number(options, name, value.get<double>());
  return OG_ERROR("search option '", name, "' must be a number or a bool, got ", value.dump());
}

Result<std::optional<ConstraintSpec>> guidance_constraint(std::string_view type, std::string_view data) {
  if (type.empty() && data.empty()) return std::optional<ConstraintSpec>();
  for (const GuidanceType& known : kGuidanceTypes) {
    if (known.name != type) continue;
    if (data.empty()) return OG_ERROR("guidance type ", type, " needs data (the schema or expression), got none");
    return std::optional<ConstraintSpec>(ConstraintSpec{known.kind, std::string(data)});
  }
  std::string accepted;
  for (const GuidanceType& known : kGuidanceTypes) accepted += std::string(accepted.empty() ? "" : ", ") + std::string(known.name);
  return OG_ERROR("unknown guidance type '", type, "' (onnxruntime-genai's types: ", accepted, ")");
}

Result<genai::GeneratorParams> generator_params(const SearchOptions& options,
                                                std::vector<std::vector<int32_t>> prompts) {
  if (options.diversity_penalty != 0) {
    return OG_ERROR("diversity_penalty ", options.diversity_penalty,
                    " asks for group beam search, which is not implemented; use 0 (plain beam search)");
  }
  genai::GeneratorParams params = options.defaults;
  params.beam.num_beams = to_int32(options.num_beams);
  params.beam.num_return_sequences = to_int32(options.num_return_sequences);
  params.beam.length_penalty = static_cast<float>(options.length_penalty);
  // A bool here, as onnxruntime-genai has it: true stops at num_beams hypotheses, false is
  // transformers' heuristic (its "never" is only in the C++ API and the CLI).
  params.beam.early_stopping = options.early_stopping ? genai::EarlyStopping::kTrue : genai::EarlyStopping::kHeuristic;
  SamplingParams& s = params.sampling;
  s.greedy = !options.do_sample;
  s.top_k = to_int32(options.top_k);
  s.top_p = static_cast<float>(options.top_p);
  s.temperature = static_cast<float>(options.temperature);
  s.repetition_penalty = static_cast<float>(options.repetition_penalty);
  s.no_repeat_ngram_size = to_int32(options.no_repeat_ngram_size);
  if (options.random_seed >= 0) s.seed = static_cast<uint64_t>(options.random_seed);
  // onnxruntime-genai ends a sequence at max_length only; a package's max_new_tokens has no key there.
  params.max_new_tokens = 0;
  params.max_length = static_cast<int64_t>(options.max_length);
  size_t longest = 0;
  for (const auto& prompt : prompts) longest = std::max(longest, prompt.size());
  // min_length counts the prompt (of a padded batch: its longest), the Generator new tokens.
  params.min_new_tokens = std::max<int64_t>(0, static_cast<int64_t>(options.min_length) - static_cast<int64_t>(longest));
  params.prompts = std::move(prompts);
  params.constraint = options.constraint;
  OG_RETURN_IF_ERROR(s.validate());
  OG_RETURN_IF_ERROR(genai::check_beam_params(params));
  return params;
}

Result<genai::RequestParams> request_params(const SearchOptions& options, const std::vector<int32_t>& prompt) {
  for (const auto& [name, value] : {std::pair{"batch_size", options.batch_size}, std::pair{"num_beams", options.num_beams},
                                    std::pair{"num_return_sequences", options.num_return_sequences}}) {
    if (value != 1) return OG_ERROR("an engine request is one sequence: ", name, " must be 1, got ", value);
  }
  OG_ASSIGN_OR_RETURN(const genai::GeneratorParams g, generator_params(options, {prompt}));
  genai::RequestParams r;
  r.sampling = g.sampling;
  r.max_new_tokens = g.max_new_tokens;
  r.min_new_tokens = g.min_new_tokens;
  r.max_length = g.max_length;
  r.stop_strings = g.stop_strings;
  r.ignore_eos = g.ignore_eos;
  r.skip_special_tokens = g.skip_special_tokens;
  r.constraint = g.constraint;
  return r;
}

}  // namespace onnx_genai::capi
