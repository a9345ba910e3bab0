// Per-token mask time of the constraint engine at a real vocabulary, over a schema corpus, next
// to the naive mask (every token's bytes run through the same automaton, one token at a time).
//
//   build/bench/constraint_bench TOKENIZER_DIR CORPUS.json [--vocab N] [--steps N] [--seed N]
//                                [--batch N [--threads T]]
//
// CORPUS.json: entries {"name", "schema"} (a JSON Schema) or {"name", "lark": FILE} (a Lark
// grammar, FILE relative to the corpus; tests/constraints/lark_corpus.json).
// For each schema: compile it fresh (cold caches, as a new request meets it), take a seeded
// random walk of up to --steps tokens that the masks allow, timing every compute_mask call
// (the first is the time to first mask together with the compile); then the same walk again on
// the now warm constraint (a second request with the same schema); then the naive mask at each
// step of the walk. Prints per-schema rows and the totals: mean, p99 and max per mask, compile.
//
// With --batch N, the serving engine's case instead: N requests over one compiled constraint
// step together, each step computing every live request's mask on T threads (a matcher each, as
// Engine::compute_masks does while the device runs the forward pass), then each request takes a
// token. What a step costs the host is the time to the last of its masks: printed per schema as
// the mean, p50, p99 and max of that, over --steps steps.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "onnx_genai/constraints.h"
#include "onnx_genai/tokenizer.h"

namespace {

using onnx_genai::CompiledConstraint;
using onnx_genai::ConstraintKind;
using onnx_genai::ConstraintMatcher;
using onnx_genai::ConstraintSpec;
using onnx_genai::ConstraintVocabulary;
using Clock = std::chrono::steady_clock;

double micros(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

struct Stats {
  std::vector<double> samples;
  void add(double v) { samples.push_back(v); }
  double mean() const {
    double s = 0;
    for (double v : samples) s += v;
    return samples.empty() ? 0 : s / static_cast<double>(samples.size());
  }
  double quantile(double q) {
    if (samples.empty()) return 0;
    std::sort(samples.begin(), samples.end());
    return samples[std::min(samples.size() - 1, static_cast<size_t>(q * static_cast<double>(samples.size())))];
  }
  double max() const { return samples.empty() ? 0 : *std::max_element(samples.begin(), samples.end()); }
};

bool has(const std::vector<uint64_t>& mask, int32_t id) { return (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1; }

// The walk: the next token from a mask, favouring single-byte tokens half the time so that
// strings close (as tests/constraints/generated_outputs_test.cc does).
int32_t pick(const std::vector<uint64_t>& mask, const ConstraintVocabulary& vocab, int32_t eos, std::mt19937_64& rng) {
  if (eos >= 0 && has(mask, eos) && rng() % 3 == 0) return eos;
  std::vector<int32_t> any, single;
  for (size_t w = 0; w < mask.size(); ++w) {
    for (uint64_t bits = mask[w]; bits; bits &= bits - 1) {
      const auto id = static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
      if (id == eos) continue;
      any.push_back(id);
      if (vocab.token_bytes(id).size() == 1) single.push_back(id);
    }
  }
  if (any.empty()) return eos;
  const std::vector<int32_t>& pool = rng() % 2 && !single.empty() ? single : any;
  return pool[rng() % pool.size()];
}

// The naive mask: each token's bytes fed to a matcher copy positioned at `prefix`.
void naive_mask(const std::shared_ptr<CompiledConstraint>& compiled, const std::vector<int32_t>& prefix, int32_t vocab_size,
                std::vector<uint64_t>& mask) {
  ConstraintMatcher at(compiled);
  for (const int32_t id : prefix) (void)at.accept_token(id);
  std::fill(mask.begin(), mask.end(), 0);
  for (int32_t id = 0; id < vocab_size; ++id) {
    const std::string& bytes = compiled->vocabulary().token_bytes(id);
    if (bytes.empty()) continue;
    if (at.accept_bytes(bytes).is_ok()) {
      mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
      (void)at.rollback(1);
    }
  }
}

struct SchemaTimes {
  double first_ms = -1;  // compile + first mask; -1 when the schema did not compile
  Stats cold, warm, naive;
};

// One schema: a fresh compile, a walk timing each mask (cold), the same walk again (warm), and
// the naive mask at `naive_steps` points of the walk. Prints the schema's row.
ConstraintSpec spec_of(const nlohmann::json& entry, const std::filesystem::path& corpus_dir) {
  if (!entry.contains("lark")) return {ConstraintKind::kJsonSchema, entry["schema"].dump()};
  std::ifstream in(corpus_dir / entry["lark"].get<std::string>());
  return {ConstraintKind::kLarkGrammar, std::string(std::istreambuf_iterator<char>(in), {})};
}

SchemaTimes time_schema(const nlohmann::json& entry, const ConstraintSpec& spec,
                        const std::shared_ptr<const ConstraintVocabulary>& vocab, int32_t eos, int steps, int naive_steps,
                        std::mt19937_64& rng) {
  SchemaTimes t;
  const std::string name = entry["name"].get<std::string>();
  const auto start = Clock::now();
  auto compiled = CompiledConstraint::compile(spec, vocab);
  if (!compiled) {
    std::printf("%-12s %s\n", name.c_str(), compiled.status().message().c_str());
    return t;
  }
  ConstraintMatcher m(*compiled);
  std::vector<uint64_t> mask(m.mask_words());
  std::vector<int32_t> walk;
  for (int step = 0; step < steps; ++step) {
    const auto a = Clock::now();
    (void)m.compute_mask(mask);
    const auto b = Clock::now();
    if (step == 0) t.first_ms = micros(start, b) / 1e3;
    t.cold.add(micros(a, b));
    const int32_t id = pick(mask, *vocab, eos, rng);
    if (id < 0 || id == eos) break;
    (void)m.accept_token(id);
    walk.push_back(id);
  }
  ConstraintMatcher again(*compiled);
  for (const int32_t id : walk) {
    const auto a = Clock::now();
    (void)again.compute_mask(mask);
    t.warm.add(micros(a, Clock::now()));
    (void)again.accept_token(id);
  }
  for (int k = 0; k < naive_steps && k < static_cast<int>(walk.size()); ++k) {
    const size_t at = walk.size() * static_cast<size_t>(k) / static_cast<size_t>(naive_steps);
    const auto a = Clock::now();
    naive_mask(*compiled, std::vector<int32_t>(walk.begin(), walk.begin() + static_cast<std::ptrdiff_t>(at)),
               vocab->vocab_size(), mask);
    t.naive.add(micros(a, Clock::now()));
  }
  std::printf("%-12s %9.2f %6zu %10.1f %10.1f %10.1f %10.1f %10.1f\n", name.c_str(), t.first_ms, t.cold.samples.size(),
              t.cold.mean(), t.cold.quantile(0.99), t.cold.max(), t.warm.mean(), t.naive.mean());
  return t;
}

// One schema under --batch: `batch` walks from a fresh compile, stepping together.
void time_batch(const nlohmann::json& entry, const ConstraintSpec& spec, const std::shared_ptr<const ConstraintVocabulary>& vocab,
                int32_t eos, int steps, int batch, onnx_genai::ThreadPool& pool, std::mt19937_64& rng) {
  const std::string name = entry["name"].get<std::string>();
  auto compiled = CompiledConstraint::compile(spec, vocab);
  if (!compiled) {
    std::printf("%-12s %s\n", name.c_str(), compiled.status().message().c_str());
    return;
  }
  std::vector<ConstraintMatcher> matchers;
  for (int r = 0; r < batch; ++r) matchers.emplace_back(*compiled);
  std::vector<std::vector<uint64_t>> masks(static_cast<size_t>(batch), std::vector<uint64_t>(matchers[0].mask_words()));
  std::vector<size_t> live(static_cast<size_t>(batch));
  for (size_t r = 0; r < live.size(); ++r) live[r] = r;
  Stats step_ms;
  int64_t masks_computed = 0;
  std::vector<double> work_us(static_cast<size_t>(batch));
  double work_total = 0;
  for (int step = 0; step < steps && !live.empty(); ++step) {
    const auto a = Clock::now();
    pool.parallel_for(static_cast<int64_t>(live.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const size_t r = live[static_cast<size_t>(i)];
        const auto m0 = Clock::now();
        (void)matchers[r].compute_mask(masks[r]);
        work_us[r] = micros(m0, Clock::now());
      }
    });
    step_ms.add(micros(a, Clock::now()) / 1e3);
    masks_computed += static_cast<int64_t>(live.size());
    for (const size_t r : live) work_total += work_us[r];
    std::vector<size_t> still;
    for (const size_t r : live) {
      const int32_t id = pick(masks[r], *vocab, eos, rng);
      if (id < 0 || id == eos) continue;
      (void)matchers[r].accept_token(id);
      still.push_back(r);
    }
    live = std::move(still);
  }
  std::printf("%-12s %6zu %8lld %10.3f %10.3f %10.3f %10.3f %10.3f\n", name.c_str(), step_ms.samples.size(),
              static_cast<long long>(masks_computed), step_ms.mean(), step_ms.quantile(0.5), step_ms.quantile(0.99),
              step_ms.max(), work_total / 1e3 / static_cast<double>(std::max<size_t>(step_ms.samples.size(), 1)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR CORPUS.json [--vocab N] [--steps N] [--seed N] [--naive-steps N] [--batch N [--threads T]]\n", argv[0]);
    return 2;
  }
  int32_t vocab_size = 0;
  int steps = 256, naive_steps = 8, batch = 0, threads = 1;
  uint64_t seed = 1;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--vocab") vocab_size = std::stoi(argv[i + 1]);
    else if (flag == "--steps") steps = std::stoi(argv[i + 1]);
    else if (flag == "--seed") seed = std::stoull(argv[i + 1]);
    else if (flag == "--naive-steps") naive_steps = std::stoi(argv[i + 1]);
    else if (flag == "--batch") batch = std::stoi(argv[i + 1]);
    else if (flag == "--threads") threads = std::stoi(argv[i + 1]);
  }
  auto tokenizer = onnx_genai::Tokenizer::load(argv[1]);
  if (!tokenizer) {
    std::fprintf(stderr, "%s\n", tokenizer.status().message().c_str());
    return 1;
  }
  if (vocab_size == 0) vocab_size = (*tokenizer)->vocab_size();
  const int32_t eos = (*tokenizer)->eos_token_id().value_or(-1);
  const auto t0 = Clock::now();
  auto vocab = ConstraintVocabulary::create(**tokenizer, vocab_size, eos >= 0 ? std::vector<int32_t>{eos} : std::vector<int32_t>{});
  if (!vocab) {
    std::fprintf(stderr, "%s\n", vocab.status().message().c_str());
    return 1;
  }
  std::printf("vocabulary %d tokens prepared in %.1f ms (token trie of %zu nodes)\n", vocab_size,
              micros(t0, Clock::now()) / 1e3, (*vocab)->trie_nodes());
  std::ifstream corpus_file(argv[2]);
  const nlohmann::json corpus = nlohmann::json::parse(corpus_file, nullptr, /*allow_exceptions=*/false);
  if (!corpus.is_array() || std::any_of(corpus.begin(), corpus.end(), [](const nlohmann::json& e) {
        return !e.is_object() || !e.contains("name") || !e["name"].is_string() || !(e.contains("schema") || e.contains("lark"));
      })) {
    std::fprintf(stderr, "constraint_bench: %s is not a JSON list of {\"name\", \"schema\" or \"lark\"} entries\n", argv[2]);
    return 1;
  }
  std::mt19937_64 rng(seed);
  if (batch > 0) {
    onnx_genai::ThreadPool pool(threads);
    std::printf("%d requests a step, masks on %d threads; milliseconds per step\n", batch, threads);
    std::printf("%-12s %6s %8s %10s %10s %10s %10s %10s\n", "schema", "steps", "masks", "mean", "p50", "p99", "max",
                "mask sum");
    for (const auto& entry : corpus) {
      const ConstraintSpec spec = spec_of(entry, std::filesystem::path(argv[2]).parent_path());
      time_batch(entry, spec, *vocab, eos, steps, batch, pool, rng);
    }
    return 0;
  }
  std::printf("%-12s %9s %6s %10s %10s %10s %10s %10s\n", "schema", "first ms", "masks", "cold mean", "cold p99", "cold max",
              "warm mean", "naive mean");
  Stats all_cold, all_warm, all_naive, all_first;
  for (const auto& entry : corpus) {
    const ConstraintSpec spec = spec_of(entry, std::filesystem::path(argv[2]).parent_path());
    SchemaTimes t = time_schema(entry, spec, *vocab, eos, steps, naive_steps, rng);
    if (t.first_ms < 0) continue;
    all_first.add(t.first_ms * 1e3);
    for (double v : t.cold.samples) all_cold.add(v);
    for (double v : t.warm.samples) all_warm.add(v);
    for (double v : t.naive.samples) all_naive.add(v);
  }
  std::printf("\nall schemas, microseconds per mask (vocabulary %d):\n", vocab_size);
  std::printf("  cold (fresh compile per schema): mean %.1f  p99 %.1f  max %.1f  (%zu masks)\n", all_cold.mean(),
              all_cold.quantile(0.99), all_cold.max(), all_cold.samples.size());
  std::printf("  warm (second request):           mean %.1f  p99 %.1f  max %.1f\n", all_warm.mean(), all_warm.quantile(0.99),
              all_warm.max());
  std::printf("  naive (every token checked):     mean %.1f  p99 %.1f  max %.1f  (%zu masks)\n", all_naive.mean(),
              all_naive.quantile(0.99), all_naive.max(), all_naive.samples.size());
  std::printf("  compile + first mask: mean %.2f ms  max %.2f ms\n", all_first.mean() / 1e3, all_first.max() / 1e3);
  std::printf("  speed-up over naive (mean): cold %.0fx, warm %.0fx\n", all_naive.mean() / std::max(all_cold.mean(), 1e-9),
              all_naive.mean() / std::max(all_warm.mean(), 1e-9));
  return 0;
}
