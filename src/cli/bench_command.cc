#include "cli/bench_command.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/run_support.h"
#include "cli/speculative_options.h"
#include "cli/terminal_feedback.h"
#include "onnx_genai/genai.h"

namespace onnx_genai::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model_path;
  int64_t prompt_len = 128;
  int64_t gen_len = 64;
  int64_t repeat = 3;
  int64_t step_tokens = 1;  // tokens fed per decode step: K > 1 is a speculative verify's shape
  genai::ModelOptions model;  // --threads, --device
  bool json = false;
  bool all_logits = false;  // run the LM head over every prompt position, as the graph asks
  SpeculativeOptions speculative;
};

Result<BenchOptions> parse_bench_options(std::span<const std::string> args) {
  BenchOptions o;
  OptionTable table;
  constexpr int64_t kMaxTokens = 1 << 20;
  table.valued["--prompt-len"] = integer_option(o.prompt_len, 1, kMaxTokens);
  table.valued["--gen-len"] = integer_option(o.gen_len, 1, kMaxTokens);
  table.valued["--repeat"] = integer_option(o.repeat, 1, 1000);
  table.valued["--step-tokens"] = integer_option(o.step_tokens, 1, 16);
  add_model_options(table, o.model);
  add_tensor_parallel_option(table, o.model);
  table.flags = {{"--json", &o.json}, {"--all-logits", &o.all_logits}};
  add_speculative_options(table, o.speculative);
  OG_RETURN_IF_ERROR(parse_options(args, table, o.model_path));
  if (o.speculative.proposer && o.step_tokens > 1) return OG_ERROR("--speculative and --step-tokens exclude each other");
  return o;
}

// Distinct-looking ids spread over the vocabulary, the same every run.
std::vector<int32_t> synthetic_prompt(int64_t length, int64_t vocab_size) {
  std::vector<int32_t> ids(static_cast<size_t>(length));
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>((i * 7919 + 13) % static_cast<size_t>(vocab_size));
  }
  return ids;
}

struct RunTimes {
  double first_token_seconds = 0;       // prefill and the first pick
  std::vector<double> step_seconds;     // each later token
  genai::GenerationStats stats;
};

// With step_tokens K > 1, each decode step first appends K - 1 tokens (`filler`), so the decoder
// runs K positions and one is sampled: the cost of a speculative verify of K drafted tokens.
// Appended tokens count as prompt, so such a run is max_new_tokens steps, not a token count.
Result<RunTimes> time_one_run(const genai::Model& model, const genai::GeneratorParams& params,
                              std::span<const int32_t> filler) {
  OG_ASSIGN_OR_RETURN(auto generator, genai::Generator::create(model, params));
  RunTimes times;
  auto start = Clock::now();
  OG_RETURN_IF_ERROR(generator->generate_next());
  times.first_token_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (int64_t step = 1; filler.empty() ? !generator->is_done() : step < params.max_new_tokens; ++step) {
    start = Clock::now();
    if (!filler.empty()) OG_RETURN_IF_ERROR(generator->append_tokens(filler));
    OG_RETURN_IF_ERROR(generator->generate_next());
    times.step_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  const size_t generated = generator->tokens(0).size() - generator->prompt_length(0);
  if (filler.empty() && generated != static_cast<size_t>(params.max_new_tokens)) {
    return OG_ERROR("generated ", generated, " tokens instead of ", params.max_new_tokens, " (",
                    genai::finish_reason_name(generator->finish_reason(0)), ")");
  }
  times.stats = generator->stats();
  return times;
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// `decode_plan`: the session's statistics after the last run, whose last plan is a decode step's.
nlohmann::ordered_json summarize(const BenchOptions& options, const std::vector<RunTimes>& runs,
                                 const SessionStats& decode_plan) {
  double prefill_tokens = 0, prefill_seconds = 0, decode_tokens = 0, decode_seconds = 0, ttft = 0;
  genai::GenerationStats speculation;
  std::vector<double> steps;
  for (const RunTimes& run : runs) {
    prefill_tokens += static_cast<double>(run.stats.prefill_tokens);
    prefill_seconds += run.stats.prefill_seconds;
    decode_tokens += static_cast<double>(run.stats.decode_tokens);
    speculation.speculative_steps += run.stats.speculative_steps;
    speculation.drafted_tokens += run.stats.drafted_tokens;
    speculation.accepted_tokens += run.stats.accepted_tokens;
    decode_seconds += run.stats.decode_seconds;
    ttft += run.first_token_seconds;
    steps.insert(steps.end(), run.step_seconds.begin(), run.step_seconds.end());
  }
  const auto rate = [](double count, double seconds) { return seconds > 0 ? count / seconds : 0.0; };
  double step_seconds = 0;
  for (double s : steps) step_seconds += s;
  if (options.step_tokens > 1) {
    // The generator counts runs of several tokens as prefill: take the bench's own clocks.
    prefill_tokens = static_cast<double>(options.prompt_len * options.repeat);
    prefill_seconds = ttft;
    decode_tokens = static_cast<double>(steps.size());
    decode_seconds = step_seconds;
  }
  return {{"prompt_len", options.prompt_len}, {"gen_len", options.gen_len}, {"repeat", options.repeat},
          {"threads", options.model.num_threads}, {"tensor_parallel", options.model.tensor_parallel},
          {"step_tokens", options.step_tokens},
          {"prefill_tok_s", rate(prefill_tokens, prefill_seconds)},
          {"decode_tok_s", rate(decode_tokens, decode_seconds)},
          {"speculative_steps", speculation.speculative_steps},
          {"drafted_tokens", speculation.drafted_tokens},
          {"accepted_tokens", speculation.accepted_tokens},
          {"decode_step_ms", steps.empty() ? 0.0 : step_seconds / static_cast<double>(steps.size()) * 1e3},
          {"ttft_ms", ttft / static_cast<double>(runs.size()) * 1e3},
          {"itl_p50_ms", percentile(steps, 50) * 1e3},
          {"itl_p90_ms", percentile(steps, 90) * 1e3},
          {"itl_p99_ms", percentile(steps, 99) * 1e3},
          {"peak_rss_mib", peak_rss_mib()},
          {"device", options.model.device.to_string()},
          {"decode_plan_steps", decode_plan.last_plan_steps},
          {"decode_plan_device_steps", decode_plan.last_plan_device_steps},
          {"decode_plan_transfers", decode_plan.last_plan_transfers},
          {"device_arena_mib", static_cast<double>(decode_plan.device_arena_bytes) / (1 << 20)},
          {"decode_plan_graph_segments", decode_plan.last_plan_graph_segments},
          {"graph_captures", decode_plan.graph_captures},
          {"graph_replays", decode_plan.graph_replays},
          {"graph_invalidations", decode_plan.graph_invalidations},
          {"graph_capture_failures", decode_plan.graph_capture_failures}};
}

void print_table(const nlohmann::ordered_json& summary) {
  std::printf("prompt %lld tokens, %lld generated, %lld runs after a warm-up, threads %lld, tensor-parallel %lld, "
              "device %s\n",
              summary["prompt_len"].get<long long>(), summary["gen_len"].get<long long>(),
              summary["repeat"].get<long long>(), summary["threads"].get<long long>(),
              summary["tensor_parallel"].get<long long>(), summary["device"].get<std::string>().c_str());
  if (summary["step_tokens"].get<long long>() > 1) {
    std::printf("  decode steps of %lld tokens (one sampled): %.3f ms per step\n", summary["step_tokens"].get<long long>(),
                summary["decode_step_ms"].get<double>());
  }
  std::printf("  prefill       %10.1f tok/s\n", summary["prefill_tok_s"].get<double>());
  std::printf("  decode        %10.1f tok/s\n", summary["decode_tok_s"].get<double>());
  if (summary["speculative_steps"].get<long long>() > 0) {
    const auto drafted = summary["drafted_tokens"].get<double>(), accepted = summary["accepted_tokens"].get<double>();
    std::printf("  speculative   %lld verify steps, %.0f drafted, %.0f accepted (%.1f%%), %.2f per step\n",
                summary["speculative_steps"].get<long long>(), drafted, accepted,
                drafted > 0 ? 100.0 * accepted / drafted : 0.0,
                accepted / summary["speculative_steps"].get<double>());
  }
  std::printf("  TTFT          %10.2f ms\n", summary["ttft_ms"].get<double>());
  std::printf("  ITL p50       %10.2f ms\n", summary["itl_p50_ms"].get<double>());
  std::printf("  ITL p90       %10.2f ms\n", summary["itl_p90_ms"].get<double>());
  std::printf("  ITL p99       %10.2f ms\n", summary["itl_p99_ms"].get<double>());
  std::printf("  peak RSS      %10.1f MiB\n", summary["peak_rss_mib"].get<double>());
  if (summary["device"].get<std::string>() != "cpu") {
    std::printf("  decode plan   %lld steps, %lld on the device, %lld host/device copies; device arena %.1f MiB\n",
                summary["decode_plan_steps"].get<long long>(), summary["decode_plan_device_steps"].get<long long>(),
                summary["decode_plan_transfers"].get<long long>(), summary["device_arena_mib"].get<double>());
    std::printf("  CUDA graphs   %lld per decode step; %lld captures, %lld replays, %lld invalidations, %lld failures\n",
                summary["decode_plan_graph_segments"].get<long long>(), summary["graph_captures"].get<long long>(),
                summary["graph_replays"].get<long long>(), summary["graph_invalidations"].get<long long>(),
                summary["graph_capture_failures"].get<long long>());
  }
}

}  // namespace

int run_bench(std::span<const std::string> args) {
  auto options = parse_bench_options(args);
  if (!options.is_ok()) return report(kExitBadInput, options.status().message());
  auto dir = resolve_model_dir(options->model_path, "bench");
  if (!dir.is_ok()) return report(kExitBadInput, dir.status().message());
  genai::ModelOptions model_options = options->model;
  model_options.select_logit_rows = !options->all_logits;
  auto model = load_model_with_progress(*dir, model_options);
  if (!model.is_ok()) return report(kExitBadInput, model.status().message());

  const int64_t context = (*model)->info().context_length;
  const int64_t fed = options->prompt_len + options->gen_len * options->step_tokens;
  if (context > 0 && fed > context) {
    return report(kExitBadInput, "--prompt-len " + std::to_string(options->prompt_len) + " + --gen-len " +
                                     std::to_string(options->gen_len) + " x --step-tokens " +
                                     std::to_string(options->step_tokens) + " exceeds the context length " +
                                     std::to_string(context));
  }
  genai::GeneratorParams params = (*model)->default_params();
  params.sampling = SamplingParams{};
  params.sampling.greedy = true;
  params.beam = {};  // greedy, whatever the package's num_beams
  params.ignore_eos = true;
  params.stop_strings.clear();
  params.min_new_tokens = 0;
  params.max_length = 0;  // the package's default length must not cut the run short
  params.max_new_tokens = options->gen_len;
  // Ids every part of the package knows: the logits width may be padded past the tokenizer's.
  int64_t vocab = (*model)->info().vocab_size;
  if (const Tokenizer* tokenizer = (*model)->tokenizer()) vocab = std::min<int64_t>(vocab, tokenizer->vocab_size());
  params.prompts = {synthetic_prompt(options->prompt_len, vocab)};
  const std::vector<int32_t> filler = synthetic_prompt(options->step_tokens - 1, vocab);
  auto speculative = load_speculative(options->speculative, model_options);
  if (!speculative.is_ok()) return report(kExitBadInput, speculative.status().message());
  params.speculative = speculative->params;
  // The warm-up also validates the lengths against the context before anything is measured.
  auto warm_up = time_one_run(**model, params, filler);
  if (!warm_up.is_ok()) return report(kExitBadInput, warm_up.status().message());
  std::vector<RunTimes> runs;
  for (int64_t r = 0; r < options->repeat; ++r) {
    auto run = time_one_run(**model, params, filler);
    if (!run.is_ok()) return report(kExitFailed, run.status().message());
    runs.push_back(std::move(*run));
  }
  const nlohmann::ordered_json summary = summarize(*options, runs, (*model)->session_stats());
  if (options->json) {
    std::printf("%s\n", summary.dump(2).c_str());
  } else {
    print_table(summary);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace onnx_genai::cli
