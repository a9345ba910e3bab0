#include "cli/generate_options.h"

#include <limits>

#include "cli/run_support.h"

namespace onnx_genai::cli {

namespace {

using Setter = std::function<Status(const std::string& option, const std::string& value)>;

template <typename T, typename Field>
Setter number(Field& field, T min, T max) {
  return [&field, min, max](const std::string& option, const std::string& text) -> Status {
    OG_ASSIGN_OR_RETURN(field, parse_number<T>(text, option, min, max));
    return Status::ok();
  };
}

Setter text(std::optional<std::string>& field) {
  return [&field](const std::string&, const std::string& value) {
    field = value;
    return Status::ok();
  };
}

OptionTable option_table(GenerateOptions& o) {
  constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  constexpr float kMaxFloat = std::numeric_limits<float>::max();
  OptionTable table;
  table.valued = {
      {"--prompt", text(o.prompt)},
      {"--system", text(o.system)},
      {"--json-schema", text(o.json_schema_file)},
      {"--regex", text(o.regex)},
      {"--grammar", text(o.grammar_file)},
      {"--stop",
       [&o](const std::string& option, const std::string& value) {
         if (value.empty()) return OG_ERROR(option, " wants a non-empty string");
         o.stop_strings.push_back(value);
         return Status::ok();
       }},
      {"--max-new-tokens", number<int64_t>(o.max_new_tokens, 0, kMaxTokens)},
      {"--min-new-tokens", number<int64_t>(o.min_new_tokens, 0, kMaxTokens)},
      {"--prefill-chunk", number<int64_t>(o.prefill_chunk, 0, kMaxTokens)},
      {"--temperature", number<float>(o.temperature, 0.0f, kMaxFloat)},
      {"--top-p", number<float>(o.top_p, 0.0f, 1.0f)},
      {"--min-p", number<float>(o.min_p, 0.0f, 1.0f)},
      {"--top-k", number<int32_t>(o.top_k, 0, std::numeric_limits<int32_t>::max())},
      // The package's search settings otherwise; greedy decoding applies them too.
      {"--repetition-penalty", number<float>(o.repetition_penalty, 1e-6f, kMaxFloat)},
      {"--no-repeat-ngram-size", number<int32_t>(o.no_repeat_ngram_size, 0, std::numeric_limits<int32_t>::max())},
      {"--seed", number<uint64_t>(o.seed, 0, std::numeric_limits<uint64_t>::max())},
      // Checked against each other by the Generator (num_return_sequences <= num_beams...).
      {"--num-beams", number<int32_t>(o.num_beams, 1, std::numeric_limits<int32_t>::max())},
      {"--num-return-sequences", number<int32_t>(o.num_return_sequences, 1, std::numeric_limits<int32_t>::max())},
      {"--length-penalty", number<float>(o.length_penalty, -kMaxFloat, kMaxFloat)},
      {"--early-stopping",
       [&o](const std::string& option, const std::string& value) {
         if (value == "true") {
           o.early_stopping = genai::EarlyStopping::kTrue;
         } else if (value == "false") {
           o.early_stopping = genai::EarlyStopping::kHeuristic;
         } else if (value == "never") {
           o.early_stopping = genai::EarlyStopping::kNever;
         } else {
           return OG_ERROR(option, " wants true, false or never, got '", value, "'");
         }
         return Status::ok();
       }},
      {"--mask-at-capacity",
       [&o](const std::string& option, const std::string& value) {
         if (value != "on" && value != "off") return OG_ERROR(option, " wants on or off, got '", value, "'");
         o.mask_at_capacity = value == "on";
         return Status::ok();
       }},
  };
  table.flags = {{"--chat", &o.chat},     {"--greedy", &o.greedy}, {"--ignore-eos", &o.ignore_eos},
                 {"--truncate", &o.truncate}, {"--stream", &o.stream}, {"--stats", &o.stats},
                 {"--json-object", &o.json_object}, {"--fast-forward", &o.fast_forward}};
  add_model_options(table, o.model);
  add_tensor_parallel_option(table, o.model);
  add_input_limit_option(table, o.max_input_bytes);
  add_speculative_options(table, o.speculative);
  return table;
}

}  // namespace

Result<GenerateOptions> parse_generate_options(std::span<const std::string> args) {
  GenerateOptions options;
  OG_RETURN_IF_ERROR(parse_options(args, option_table(options), options.model_path));
  if (options.system && !options.chat) return OG_ERROR("--system needs --chat");
  if (int(options.json_schema_file.has_value()) + int(options.json_object) + int(options.regex.has_value()) +
          int(options.grammar_file.has_value()) >
      1) {
    return OG_ERROR("--json-schema, --json-object, --regex and --grammar exclude each other");
  }
  if (options.fast_forward && !options.json_schema_file && !options.json_object && !options.regex &&
      !options.grammar_file) {
    return OG_ERROR("--fast-forward drafts the text a constraint forces: it needs --json-schema, --json-object, "
                    "--regex or --grammar");
  }
  return options;
}

}  // namespace onnx_genai::cli
