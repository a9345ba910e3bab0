#include "cli/eval_ppl_command.h"

#include <cstdio>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/run_support.h"
#include "cli/terminal_feedback.h"
#include "onnx_genai/genai.h"

namespace onnx_genai::cli {

namespace {

struct EvalPplOptions {
  std::string model_path;
  std::optional<std::string> text_path;
  genai::PerplexityOptions perplexity;
  genai::ModelOptions model;  // --threads, --device
  bool json = false;
  int64_t max_input_bytes = kDefaultMaxInputBytes;  // of the --text file
};

Result<EvalPplOptions> parse_eval_ppl_options(std::span<const std::string> args) {
  EvalPplOptions o;
  OptionTable table;
  constexpr int64_t kMaxTokens = 1 << 20;
  table.valued["--text"] = [&](const std::string&, const std::string& value) {
    o.text_path = value;
    return Status::ok();
  };
  table.valued["--window"] = integer_option(o.perplexity.window, 2, kMaxTokens);
  table.valued["--stride"] = integer_option(o.perplexity.stride, 1, kMaxTokens);
  add_model_options(table, o.model);
  add_input_limit_option(table, o.max_input_bytes);
  table.flags = {{"--json", &o.json}};
  OG_RETURN_IF_ERROR(parse_options(args, table, o.model_path));
  if (!o.text_path) return OG_ERROR("eval-ppl needs --text FILE (the text to score)");
  return o;
}

// The file's tokens without special tokens (no BOS): the text alone is scored.
Result<std::vector<int32_t>> tokenize_file(const genai::Model& model, const std::string& path,
                                           const std::string& text) {
  const Tokenizer* tokenizer = model.tokenizer();
  if (tokenizer == nullptr) return OG_ERROR("the model has no tokenizer.json to tokenize '", path, "' with");
  EncodeOptions options;
  options.add_special_tokens = false;
  Result<std::vector<int32_t>> ids = tokenizer->encode(text, options);
  if (!ids.is_ok()) return ids.status().with_context(path);
  return ids;
}

void print_result(const genai::PerplexityResult& r, bool json) {
  if (json) {
    const nlohmann::ordered_json summary = {{"tokens", r.tokens}, {"scored", r.scored}, {"window", r.window},
                                            {"stride", r.stride}, {"decoder_runs", r.decoder_runs},
                                            {"nll", r.nll},       {"ppl", r.ppl},       {"seconds", r.seconds}};
    std::printf("%s\n", summary.dump(2).c_str());
    return;
  }
  const double per_token = r.nll / static_cast<double>(r.scored);
  std::printf("tokens      %lld\n", static_cast<long long>(r.tokens));
  std::printf("scored      %lld (window %lld, stride %lld, %lld decoder runs)\n", static_cast<long long>(r.scored),
              static_cast<long long>(r.window), static_cast<long long>(r.stride),
              static_cast<long long>(r.decoder_runs));
  std::printf("nll         %.6f (%.6f per scored token)\n", r.nll, per_token);
  std::printf("ppl         %.6f\n", r.ppl);
  std::printf("seconds     %.3f (%.1f scored tokens/s)\n", r.seconds,
              r.seconds > 0 ? static_cast<double>(r.scored) / r.seconds : 0.0);
}

}  // namespace

int run_eval_ppl(std::span<const std::string> args) {
  auto options = parse_eval_ppl_options(args);
  if (!options.is_ok()) return report(kExitBadInput, options.status().message());
  auto text = read_input_file(*options->text_path, "--text", options->max_input_bytes);
  if (!text.is_ok()) return report(kExitBadInput, text.status().message());
  auto dir = resolve_model_dir(options->model_path, "eval-ppl");
  if (!dir.is_ok()) return report(kExitBadInput, dir.status().message());
  auto model = load_model_with_progress(*dir, options->model);
  if (!model.is_ok()) return report(kExitBadInput, model.status().message());
  auto tokens = tokenize_file(**model, *options->text_path, *text);
  if (!tokens.is_ok()) return report(kExitBadInput, tokens.status().message());
  auto resolved = genai::resolve_perplexity_options(**model, *tokens, options->perplexity);
  if (!resolved.is_ok()) return report(kExitBadInput, resolved.status().with_context(*options->text_path).message());
  auto result = genai::evaluate_perplexity(**model, *tokens, *resolved);
  if (!result.is_ok()) return report(kExitFailed, result.status().message());
  print_result(*result, options->json);
  std::fflush(stdout);
  return 0;
}

}  // namespace onnx_genai::cli
