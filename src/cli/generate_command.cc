#include "cli/generate_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/generate_options.h"
#include "cli/run_support.h"
#include "cli/speculative_options.h"
#include "cli/terminal_feedback.h"
#include "onnx_genai/genai.h"

namespace onnx_genai::cli {

namespace {

Result<std::vector<int32_t>> encode_prompt(const genai::Model& model, const GenerateOptions& options,
                                           const std::string& prompt) {
  OG_RETURN_IF_ERROR(check_utf8(prompt, "the prompt"));
  if (!options.chat) return model.encode(prompt);
  nlohmann::json messages = nlohmann::json::array();
  if (options.system) {
    OG_RETURN_IF_ERROR(check_utf8(*options.system, "--system"));
    messages.push_back({{"role", "system"}, {"content", *options.system}});
  }
  messages.push_back({{"role", "user"}, {"content", prompt}});
  ChatRequest request;
  request.messages_json = messages.dump();
  request.add_generation_prompt = true;
  return model.encode_chat(request);
}

// The package's defaults, then the command line.
genai::GeneratorParams make_params(const genai::Model& model, const GenerateOptions& options) {
  genai::GeneratorParams params = model.default_params();
  SamplingParams& s = params.sampling;
  if (options.asks_for_sampling()) s.greedy = false;
  if (options.greedy) s.greedy = true;
  if (options.temperature) s.temperature = *options.temperature;
  if (options.top_k) s.top_k = *options.top_k;
  if (options.top_p) s.top_p = *options.top_p;
  if (options.min_p) s.min_p = *options.min_p;
  if (options.seed) s.seed = *options.seed;
  if (options.repetition_penalty) s.repetition_penalty = *options.repetition_penalty;
  if (options.no_repeat_ngram_size) s.no_repeat_ngram_size = *options.no_repeat_ngram_size;
  if (options.max_new_tokens) params.max_new_tokens = *options.max_new_tokens;
  if (options.min_new_tokens) params.min_new_tokens = *options.min_new_tokens;
  if (options.prefill_chunk) params.prefill_chunk = *options.prefill_chunk;
  if (options.num_beams) params.beam.num_beams = *options.num_beams;
  if (options.num_return_sequences) params.beam.num_return_sequences = *options.num_return_sequences;
  if (options.length_penalty) params.beam.length_penalty = *options.length_penalty;
  if (options.early_stopping) params.beam.early_stopping = *options.early_stopping;
  params.stop_strings = options.stop_strings;
  params.ignore_eos = options.ignore_eos;
  params.truncate_prompt_left = options.truncate;
  return params;
}

// --json-schema FILE, --json-object, --regex RE or --grammar FILE as the generator's constraint.
Result<std::optional<ConstraintSpec>> read_constraint(const GenerateOptions& options) {
  if (options.regex) return std::optional<ConstraintSpec>(ConstraintSpec{ConstraintKind::kRegex, *options.regex});
  if (options.json_object) return std::optional<ConstraintSpec>(ConstraintSpec{ConstraintKind::kJsonObject, ""});
  const std::optional<std::string>& file = options.json_schema_file ? options.json_schema_file : options.grammar_file;
  if (!file) return std::optional<ConstraintSpec>();
  OG_ASSIGN_OR_RETURN(std::string text, read_input_file(*file, options.json_schema_file ? "--json-schema" : "--grammar",
                                                             options.max_input_bytes));
  const ConstraintKind kind = options.json_schema_file ? ConstraintKind::kJsonSchema : ConstraintKind::kLarkGrammar;
  return std::optional<ConstraintSpec>(ConstraintSpec{kind, std::move(text)});
}

void print_stats(const genai::Model& model, const genai::Generator& generator, double load_seconds) {
  const genai::GenerationStats& g = generator.stats();
  const SessionStats s = model.session_stats();
  const auto rate = [](double count, double seconds) { return seconds > 0 ? count / seconds : 0.0; };
  const size_t generated = generator.tokens(0).size() - generator.prompt_length(0);
  std::fprintf(stderr,
               "load %.1f ms; prefill %lld tokens in %.1f ms (%.1f tok/s); decode %lld tokens in %lld steps, %.1f ms (%.1f tok/s); "
               "sampling %.1f ms; %zu tokens generated (%s); plans compiled %lld, cache hits %lld; KV capacity %lld "
               "positions after %lld growths\n",
               load_seconds * 1e3, static_cast<long long>(g.prefill_tokens), g.prefill_seconds * 1e3,
               rate(static_cast<double>(g.prefill_tokens), g.prefill_seconds), static_cast<long long>(g.decode_tokens),
               static_cast<long long>(g.decode_steps), g.decode_seconds * 1e3, rate(static_cast<double>(g.decode_tokens), g.decode_seconds), g.sampling_seconds * 1e3,
               generated, std::string(genai::finish_reason_name(generator.finish_reason(0))).c_str(),
               static_cast<long long>(s.plans_compiled), static_cast<long long>(s.plan_cache_hits),
               static_cast<long long>(generator.kv_capacity()), static_cast<long long>(generator.kv_growths()));
}

}  // namespace

int run_generate(std::span<const std::string> args) {
  auto options = parse_generate_options(args);
  if (!options.is_ok()) return report(kExitBadInput, options.status().message());
  auto path = resolve_model_dir(options->model_path, "generate");
  if (!path.is_ok()) return report(kExitBadInput, path.status().message());
  auto prompt = read_text_or_stdin(options->prompt, "prompt", options->max_input_bytes);
  if (!prompt.is_ok()) return report(kExitBadInput, prompt.status().message());

  const auto load_start = std::chrono::steady_clock::now();
  genai::ModelOptions model_options = options->model;
  model_options.decode_mask_at_capacity = options->mask_at_capacity;
  auto model = load_model_with_progress(*path, model_options);
  if (!model.is_ok()) return report(kExitBadInput, model.status().message());
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  auto ids = encode_prompt(**model, *options, *prompt);
  if (!ids.is_ok()) return report(kExitBadInput, ids.status().message());

  genai::GeneratorParams params = make_params(**model, *options);
  params.prompts = {std::move(*ids)};
  auto constraint = read_constraint(*options);
  if (!constraint.is_ok()) return report(kExitBadInput, constraint.status().message());
  params.constraint = std::move(*constraint);
  auto speculative = load_speculative(options->speculative, model_options);
  if (!speculative.is_ok()) return report(kExitBadInput, speculative.status().message());
  params.speculative = speculative->params;
  params.speculative.fast_forward = options->fast_forward;
  auto generator = genai::Generator::create(**model, params);
  if (!generator.is_ok()) return report(kExitBadInput, generator.status().message());

  // Beam search may return several sequences, one per line; their text comes once the search ends.
  const size_t count = (*generator)->batch_size();
  const bool stream = options->stream && count == 1;
  std::vector<std::string> texts(count);
  const Status status = (*generator)->generate([&](size_t sequence, std::string_view piece) {
    if (!stream) {
      texts[sequence] += piece;
      return;
    }
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  for (const std::string& text : texts) {
    if (!stream) std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);
  if (!status.is_ok()) return report(kExitFailed, status.message());
  if (options->stats) {
    print_stats(**model, **generator, load_seconds);
    const std::string summary = speculative_summary(params.speculative, (*generator)->stats());
    if (!summary.empty()) std::fprintf(stderr, "%s\n", summary.c_str());
  } else {
    print_reply_stats_line((*generator)->stats(), (*generator)->tokens(0).size() - (*generator)->prompt_length(0));
  }
  return 0;
}

}  // namespace onnx_genai::cli
