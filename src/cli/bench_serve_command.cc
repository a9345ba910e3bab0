#include "cli/bench_serve_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/bench_serve_http.h"
#include "cli/run_support.h"
#include "cli/speculative_options.h"
#include "onnx_genai/engine.h"

namespace onnx_genai::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct ServeBenchOptions {
  std::string model_path;
  int64_t num_requests = 64;
  int64_t concurrency = 8;    // requests in flight when --request-rate is not given
  double request_rate = 0;    // > 0: Poisson arrivals per second
  int64_t prompt_len = 128, gen_len = 64;
  double range = 0.5;         // lengths uniform in [len * (1 - range), len * (1 + range)]
  int64_t shared_prefix_len = 0;
  int64_t seed = 0;
  double slo_ttft_ms = 1000, slo_tpot_ms = 100;
  bool json = false, no_prefix_caching = false;
  genai::EngineOptions engine;
  std::string url, api_key;  // --url: an OpenAI-compatible server instead of the engine in process
  SpeculativeOptions speculative;  // every request speculates (the engine in process)
  genai::SpeculativeParams speculation;  // what --speculative loaded
  std::string json_schema_file;          // every request's output is constrained to it (in process)
  std::optional<ConstraintSpec> constraint;  // what --json-schema read
};

constexpr int64_t kMaxSchemaBytes = int64_t{64} << 20;

Result<ServeBenchOptions> parse_serve_bench_options(std::span<const std::string> args) {
  ServeBenchOptions o;
  OptionTable table;
  constexpr int64_t kMaxTokens = 1 << 20;
  const auto real = [](double& field, double min, double max) {
    return [&field, min, max](const std::string& option, const std::string& value) -> Status {
      OG_ASSIGN_OR_RETURN(field, parse_number<double>(value, option, min, max));
      return Status::ok();
    };
  };
  table.valued["--num-requests"] = integer_option(o.num_requests, 1, 1 << 20);
  table.valued["--concurrency"] = integer_option(o.concurrency, 1, 1 << 16);
  table.valued["--request-rate"] = real(o.request_rate, 0, 1e6);
  table.valued["--prompt-len"] = integer_option(o.prompt_len, 1, kMaxTokens);
  table.valued["--gen-len"] = integer_option(o.gen_len, 1, kMaxTokens);
  table.valued["--range"] = real(o.range, 0, 0.99);
  table.valued["--shared-prefix-len"] = integer_option(o.shared_prefix_len, 0, kMaxTokens);
  table.valued["--seed"] = integer_option(o.seed, 0, 1LL << 62);
  table.valued["--slo-ttft-ms"] = real(o.slo_ttft_ms, 0, 1e9);
  table.valued["--slo-tpot-ms"] = real(o.slo_tpot_ms, 0, 1e9);
  add_engine_options(table, o.engine);
  table.valued["--url"] = [&o](const std::string&, const std::string& value) {
    o.url = value;
    return Status::ok();
  };
  table.valued["--api-key"] = [&o](const std::string&, const std::string& value) {
    o.api_key = value;
    return Status::ok();
  };
  table.valued["--json-schema"] = [&o](const std::string&, const std::string& value) {
    o.json_schema_file = value;
    return Status::ok();
  };
  table.flags = {{"--json", &o.json}, {"--no-prefix-caching", &o.no_prefix_caching}};
  add_speculative_options(table, o.speculative);
  OG_RETURN_IF_ERROR(parse_options(args, table, o.model_path));
  if (!o.url.empty() && o.speculative.proposer) return OG_ERROR("--speculative runs the engine in process; with --url the server decides");
  if (!o.url.empty() && o.request_rate > 0) return OG_ERROR("--url takes --concurrency, not --request-rate");
  if (!o.url.empty() && !o.json_schema_file.empty()) return OG_ERROR("--json-schema constrains the engine in process, not --url");
  if (!o.json_schema_file.empty()) {
    OG_ASSIGN_OR_RETURN(std::string schema, read_input_file(o.json_schema_file, "--json-schema", kMaxSchemaBytes));
    o.constraint = ConstraintSpec{ConstraintKind::kJsonSchema, std::move(schema)};
  }
  if (!o.url.empty() && o.engine.model.tensor_parallel > 1) {
    return OG_ERROR("--tensor-parallel shards the engine in process; with --url the server decides");
  }
  o.engine.prefix_caching = !o.no_prefix_caching;
  return o;
}

// `shared_prefix`: every prompt starts with the same prefix_len tokens; else each its own.
Workload make_workload(const ServeBenchOptions& o, int64_t count, uint64_t seed, int64_t vocab, bool shared_prefix) {
  std::mt19937_64 rng(seed);
  const auto length = [&](int64_t mean) {
    const auto lo = static_cast<int64_t>(static_cast<double>(mean) * (1 - o.range));
    const auto hi = static_cast<int64_t>(static_cast<double>(mean) * (1 + o.range));
    return std::uniform_int_distribution<int64_t>(std::max<int64_t>(1, lo), std::max<int64_t>(1, hi))(rng);
  };
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> prefix(static_cast<size_t>(o.shared_prefix_len));
  for (int32_t& t : prefix) t = token(rng);
  Workload w;
  double t = 0;
  std::exponential_distribution<double> gap(o.request_rate > 0 ? o.request_rate : 1.0);
  for (int64_t i = 0; i < count; ++i) {
    if (!shared_prefix) {
      for (int32_t& t : prefix) t = token(rng);
    }
    std::vector<int32_t> p = prefix;
    for (int64_t j = 0, n = length(o.prompt_len); j < n; ++j) p.push_back(token(rng));
    w.prompts.push_back(std::move(p));
    w.gen_lens.push_back(length(o.gen_len));
    w.arrivals.push_back(t);
    t += gap(rng);
  }
  return w;
}

// Serves `w`: Poisson arrivals when a rate is given, else `concurrency` requests in flight.
Result<ServeResult> serve(genai::Engine& engine, const ServeBenchOptions& o, const Workload& w) {
  ServeResult r;
  const genai::EngineStats before = engine.stats();
  const auto n = static_cast<int64_t>(w.prompts.size());
  r.requests.resize(static_cast<size_t>(n));
  std::map<uint64_t, size_t> index;
  const Clock::time_point start = Clock::now();
  const auto now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  int64_t next = 0, in_flight = 0, finished = 0;
  while (finished < n) {
    while (next < n && (o.request_rate > 0 ? w.arrivals[static_cast<size_t>(next)] <= now() : in_flight < o.concurrency)) {
      genai::RequestParams p;
      p.sampling.greedy = true;
      p.ignore_eos = !o.constraint;  // a constrained request ends where its schema lets it
      p.constraint = o.constraint;
      p.max_new_tokens = w.gen_lens[static_cast<size_t>(next)];
      p.speculative = o.speculation;
      OG_ASSIGN_OR_RETURN(const uint64_t id, engine.add_request(w.prompts[static_cast<size_t>(next)], p));
      index[id] = static_cast<size_t>(next);
      r.requests[static_cast<size_t>(next)].arrival = o.request_rate > 0 ? w.arrivals[static_cast<size_t>(next)] : now();
      ++next;
      ++in_flight;
    }
    if (!engine.has_work()) {
      std::this_thread::sleep_until(start + std::chrono::duration<double>(w.arrivals[static_cast<size_t>(next)]));
      continue;
    }
    OG_ASSIGN_OR_RETURN(const std::vector<genai::RequestOutput> outputs, engine.step());
    const double t = now();
    const genai::EngineStats s = engine.stats();
    if (s.kv_blocks_used > 0) {
      r.waste_sum += static_cast<double>(s.kv_slots_unfilled) / static_cast<double>(s.kv_blocks_used * s.block_size);
      ++r.waste_samples;
    }
    for (const genai::RequestOutput& out : outputs) {
      Timeline& tl = r.requests[index.at(out.id)];
      for (size_t k = 0; k < out.new_tokens.size(); ++k) tl.token_times.push_back(t);
      tl.tokens += static_cast<int64_t>(out.new_tokens.size());
      if (!out.new_tokens.empty() && tl.first < 0) tl.first = t;
      r.output_tokens += static_cast<int64_t>(out.new_tokens.size());
      if (out.finished) {
        tl.last = t;
        r.prompt_tokens += out.prompt_tokens;
        r.cached_prompt_tokens += out.cached_prompt_tokens;
        ++finished;
        --in_flight;
      }
    }
  }
  r.seconds = now();
  r.stats = engine.stats();
  // Counters of this run only.
  r.stats.steps -= before.steps;
  r.stats.preemptions -= before.preemptions;
  r.stats.prefix_queries -= before.prefix_queries;
  r.stats.prefix_hits -= before.prefix_hits;
  r.stats.prefix_evictions -= before.prefix_evictions;
  r.stats.drafted_tokens -= before.drafted_tokens;
  r.stats.accepted_tokens -= before.accepted_tokens;
  r.stats.model_seconds -= before.model_seconds;
  r.stats.mask_seconds -= before.mask_seconds;
  return r;
}

nlohmann::ordered_json distribution(const std::vector<double>& seconds) {
  double sum = 0;
  for (double s : seconds) sum += s;
  const double mean = seconds.empty() ? 0 : sum / static_cast<double>(seconds.size());
  return {{"mean", mean * 1e3}, {"p50", percentile(seconds, 50) * 1e3}, {"p90", percentile(seconds, 90) * 1e3},
          {"p99", percentile(seconds, 99) * 1e3}};
}

nlohmann::ordered_json summarize(const ServeBenchOptions& o, const ServeResult& r) {
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t good = 0;
  for (const Timeline& t : r.requests) {
    ttft.push_back(t.first - t.arrival);
    e2e.push_back(t.last - t.arrival);
    const auto tokens = static_cast<double>(t.tokens);
    const double per_token = tokens > 1 ? (t.last - t.first) / (tokens - 1) : 0;
    tpot.push_back(per_token);
    for (size_t k = 1; k < t.token_times.size(); ++k) itl.push_back(t.token_times[k] - t.token_times[k - 1]);
    good += (t.first - t.arrival) * 1e3 <= o.slo_ttft_ms && per_token * 1e3 <= o.slo_tpot_ms;
  }
  const double s = r.seconds;
  const genai::EngineStats& st = r.stats;
  return {{"requests", static_cast<int64_t>(r.requests.size())},
          {"concurrency", o.request_rate > 0 ? 0 : o.concurrency},
          {"request_rate", o.request_rate},
          {"threads", o.engine.model.num_threads},
          {"tensor_parallel", o.engine.model.tensor_parallel},
          {"device", o.engine.model.device.to_string()},
          {"paged", st.paged},
          {"seconds", s},
          {"output_tok_s", static_cast<double>(r.output_tokens) / s},
          {"total_tok_s", static_cast<double>(r.output_tokens + r.prompt_tokens) / s},
          {"request_s", static_cast<double>(r.requests.size()) / s},
          {"goodput_request_s", static_cast<double>(good) / s},
          {"ttft_ms", distribution(ttft)},
          // The first request against the rest: with a shared prefix, what the prefix cache saves.
          {"ttft_first_ms", ttft.front() * 1e3},
          {"ttft_rest_mean_ms", ttft.size() > 1 ? (std::accumulate(ttft.begin() + 1, ttft.end(), 0.0) /
                                                   static_cast<double>(ttft.size() - 1)) * 1e3 : 0.0},
          {"tpot_ms", distribution(tpot)},
          {"itl_ms", distribution(itl)},
          {"e2e_ms", distribution(e2e)},
          {"output_tokens", r.output_tokens},
          {"json_schema", o.json_schema_file},
          {"prompt_tokens", r.prompt_tokens},
          {"cached_prompt_tokens", r.cached_prompt_tokens},
          {"kv_blocks", st.kv_blocks},
          {"kv_waste", r.waste_samples > 0 ? r.waste_sum / static_cast<double>(r.waste_samples) : 0.0},
          {"preemptions", st.preemptions},
          {"prefix_hit_rate", st.prefix_queries > 0 ? static_cast<double>(st.prefix_hits) / static_cast<double>(st.prefix_queries) : 0.0},
          {"drafted_tokens", st.drafted_tokens},
          {"accepted_tokens", st.accepted_tokens},
          {"steps", st.steps},
          // Per step: the decoder run (launch to tokens), and within it the host's token masks.
          {"model_ms_per_step", st.steps > 0 ? st.model_seconds * 1e3 / static_cast<double>(st.steps) : 0.0},
          {"mask_ms_per_step", st.steps > 0 ? st.mask_seconds * 1e3 / static_cast<double>(st.steps) : 0.0},
          // The decoder session's counters since load (warm-up included).
          {"plans_compiled", st.plans_compiled},
          {"graph_captures", st.graph_captures},
          {"graph_replays", st.graph_replays},
          {"graph_invalidations", st.graph_invalidations}};
}

void print_table(const nlohmann::ordered_json& j) {
  const std::string load = j["concurrency"].get<long long>() > 0 ? "concurrency " + std::to_string(j["concurrency"].get<long long>())
                                                                  : "Poisson " + std::to_string(j["request_rate"].get<double>()) + " req/s";
  if (j.contains("url")) {
    std::printf("%lld requests, %s, through %s\n", j["requests"].get<long long>(), load.c_str(), j["url"].get<std::string>().c_str());
  } else {
    std::printf("%lld requests, %s, threads %lld, tensor-parallel %lld, device %s, %s KV\n", j["requests"].get<long long>(),
                load.c_str(), j["threads"].get<long long>(), j["tensor_parallel"].get<long long>(),
                j["device"].get<std::string>().c_str(), j["paged"].get<bool>() ? "paged" : "per-request");
  }
  std::printf("  output        %10.1f tok/s   (total %.1f tok/s, %.2f req/s, goodput %.2f req/s)\n",
              j["output_tok_s"].get<double>(), j["total_tok_s"].get<double>(), j["request_s"].get<double>(),
              j["goodput_request_s"].get<double>());
  for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    const auto& d = j[key];
    std::printf("  %-8s mean %9.2f  p50 %9.2f  p90 %9.2f  p99 %9.2f ms\n", key, d["mean"].get<double>(),
                d["p50"].get<double>(), d["p90"].get<double>(), d["p99"].get<double>());
  }
  if (j.contains("url")) return;  // the server's own counters are in its /metrics
  std::printf("  KV: %lld blocks, waste %.1f%%, %lld preemptions, prefix hits %.1f%% (%lld of %lld prompt tokens cached)\n",
              j["kv_blocks"].get<long long>(), 100 * j["kv_waste"].get<double>(), j["preemptions"].get<long long>(),
              100 * j["prefix_hit_rate"].get<double>(), j["cached_prompt_tokens"].get<long long>(),
              j["prompt_tokens"].get<long long>());
  if (const auto drafted = j["drafted_tokens"].get<long long>(); drafted > 0) {
    std::printf("  speculative: %lld drafted, %lld accepted (%.1f%%)\n", drafted, j["accepted_tokens"].get<long long>(),
                100.0 * static_cast<double>(j["accepted_tokens"].get<long long>()) / static_cast<double>(drafted));
  }
}

int print_summary(const ServeBenchOptions& o, const ServeResult& result) {
  nlohmann::ordered_json summary = summarize(o, result);
  if (!o.url.empty()) {
    for (const char* engine_only : {"threads", "tensor_parallel", "device", "paged", "cached_prompt_tokens", "kv_blocks",
                                    "kv_waste", "preemptions",
                                    "prefix_hit_rate", "drafted_tokens", "accepted_tokens", "steps", "model_ms_per_step",
                                    "mask_ms_per_step", "plans_compiled", "graph_captures", "graph_replays",
                                    "graph_invalidations"}) {
      summary.erase(engine_only);
    }
    summary["url"] = o.url;
  }
  if (o.json) {
    std::printf("%s\n", summary.dump(2).c_str());
  } else {
    print_table(summary);
  }
  std::fflush(stdout);
  return 0;
}

// The load through an OpenAI-compatible server (--url): prompts of random ids of MODEL's vocabulary
// (the server's model), the same warm-up and measurement as in process.
int bench_over_http(const ServeBenchOptions& o, const std::string& dir) {
  int64_t vocab = 0;
  if (Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::load(dir); tokenizer.is_ok()) {
    vocab = (*tokenizer)->vocab_size();
  } else {  // a package without tokenizer files (random-weight test models): the logits' width
    Result<std::unique_ptr<genai::Model>> model = genai::Model::load(dir);
    if (!model.is_ok()) return report(kExitBadInput, model.status().message());
    vocab = (*model)->info().vocab_size;
  }
  const auto seed = static_cast<uint64_t>(o.seed);
  const Workload warm = make_workload(o, std::min<int64_t>(o.num_requests, 8), seed + 1, vocab, false);
  if (auto r = serve_over_http(o.url, o.api_key, o.concurrency, warm); !r.is_ok()) return report(kExitBadInput, r.status().message());
  auto result = serve_over_http(o.url, o.api_key, o.concurrency, make_workload(o, o.num_requests, seed, vocab, true));
  if (!result.is_ok()) return report(kExitFailed, result.status().message());
  return print_summary(o, *result);
}

}  // namespace

int run_bench_serve(std::span<const std::string> args) {
  auto options = parse_serve_bench_options(args);
  if (!options.is_ok()) return report(kExitBadInput, options.status().message());
  auto dir = resolve_model_dir(options->model_path, "bench-serve");
  if (!dir.is_ok()) return report(kExitBadInput, dir.status().message());
  if (!options->url.empty()) return bench_over_http(*options, *dir);
  auto engine = genai::Engine::load(*dir, options->engine);
  if (!engine.is_ok()) return report(kExitBadInput, engine.status().message());
  auto speculative = load_speculative(options->speculative, options->engine.model);
  if (!speculative.is_ok()) return report(kExitBadInput, speculative.status().message());
  options->speculation = speculative->params;
  const genai::ModelInfo& info = (*engine)->model().info();
  if (!info.paged_kv_unavailable.empty()) std::fprintf(stderr, "onnx-genai: per-request KV caches: %s\n", info.paged_kv_unavailable.c_str());
  int64_t vocab = info.vocab_size;
  if (const Tokenizer* tokenizer = (*engine)->model().tokenizer()) vocab = std::min<int64_t>(vocab, tokenizer->vocab_size());
  // Warm-up (not measured), as `serve` does: every step shape's plan, then requests on prompts as
  // long as the measured ones, but each with its own prefix, so the measured run's first request
  // finds the shared one uncached.
  if (auto shapes = (*engine)->warm_up(); !shapes.is_ok()) return report(kExitFailed, shapes.status().message());
  const auto seed = static_cast<uint64_t>(options->seed);
  const Workload warm = make_workload(*options, std::min<int64_t>(options->num_requests, 8), seed + 1, vocab, false);
  ServeBenchOptions warm_options = *options;
  warm_options.request_rate = 0;
  if (auto r = serve(**engine, warm_options, warm); !r.is_ok()) return report(kExitBadInput, r.status().message());
  const Workload w = make_workload(*options, options->num_requests, seed, vocab, true);
  auto result = serve(**engine, *options, w);
  if (!result.is_ok()) return report(kExitFailed, result.status().message());
  return print_summary(*options, *result);
}

}  // namespace onnx_genai::cli
