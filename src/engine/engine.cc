// genai::Engine (include/onnx_genai/engine.h): requests in, one scheduled decoder run per step,
// tokens out.
#include "onnx_genai/engine.h"

#include <algorithm>
#include <bit>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>

#include "core/thread_pool.h"
#include "engine/kv_block_pool.h"
#include "engine/paged_runner.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "genai/constraint_processor.h"
#include "genai/device_sampling.h"
#include "genai/generator.h"
#include "genai/greedy_output.h"
#include "genai/model_parts.h"
#include "genai/speculative.h"

namespace onnx_genai::genai {

using engine::DeviceDraw;
using engine::KvBlockPool;
using engine::PagedRunner;
using engine::Request;
using engine::ScheduledRun;
using engine::Scheduler;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Positions a request may ever occupy: the context, else what the rotary tables cover.
int64_t context_positions(const ModelParts& parts) {
  constexpr int64_t kUnknownContext = 4096;
  if (parts.info.context_length > 0) return parts.info.context_length;
  return parts.paged.rotary_rows > 0 ? parts.paged.rotary_rows : kUnknownContext;
}

Status check_options(const EngineOptions& o) {
  if (o.block_size < 1 || o.block_size > 1024) return OG_ERROR("engine: block_size must be in [1, 1024], got ", o.block_size);
  if (o.max_num_batched_tokens < 1 || o.max_num_seqs < 1) {
    return OG_ERROR("engine: max_num_batched_tokens and max_num_seqs must be positive, got ", o.max_num_batched_tokens,
                    " and ", o.max_num_seqs);
  }
  if (o.kv_cache_memory < 0) return OG_ERROR("engine: kv_cache_memory must be >= 0 bytes, got ", o.kv_cache_memory);
  if (!(o.kv_cache_fraction > 0.0 && o.kv_cache_fraction <= 1.0)) {
    return OG_ERROR("engine: kv_cache_fraction must be in (0, 1], got ", o.kv_cache_fraction);
  }
  return Status::ok();
}

}  // namespace

struct Engine::Impl {
  std::unique_ptr<Model> model;
  const ModelParts* parts = nullptr;
  EngineOptions options;
  int64_t max_positions = 0;  // per request
  std::unique_ptr<KvBlockPool> pool;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<PagedRunner> runner;
  std::map<uint64_t, std::unique_ptr<Request>> requests;  // admitted to the step loop
  std::vector<std::vector<float>> logits;                 // per sampling run of the step
  std::vector<int32_t> device_tokens;                     // or its token picked on the device
  std::vector<DeviceDraw> draws;                          // how the device picks them
  std::vector<std::pair<size_t, Request*>> masked_draws;  // the masked ones: draw index, request
  std::unique_ptr<ThreadPool> mask_pool;                   // computes their token masks
  EngineStats stats;

  // Filled by other threads, drained by step().
  mutable std::mutex inbox_mutex;
  std::vector<std::unique_ptr<Request>> inbox;
  std::vector<uint64_t> aborted;
  std::atomic<uint64_t> next_id{1};

  Status size_pool();
  Result<std::unique_ptr<Request>> make_request(std::vector<int32_t> prompt, const RequestParams& params) const;
  void drain_inbox(std::vector<RequestOutput>& outputs);
  Status step_paged(std::vector<RequestOutput>& outputs);
  Result<bool> plan_device_draws(std::span<const ScheduledRun> runs);
  Status compute_masks();
  Status draft_for_running();
  Status keep_verified(Request& r, std::span<const std::vector<float>> logits, std::span<const int32_t> argmax);
  int64_t tokens_left(const Request& r) const;
  Status step_per_request(std::vector<RequestOutput>& outputs);
  Status after_token(Request& r, int32_t token);
  Status finish(Request& r, FinishReason reason);
  RequestOutput report(Request& r) const;
  static void note_scheduled(Request& r, Clock::time_point now) {
    if (!r.queue_seconds) r.queue_seconds = std::chrono::duration<double>(now - r.arrived).count();
  }
  void retire(uint64_t id);
};

Status Engine::Impl::size_pool() {
  const DecoderIo& io = parts->io;
  const int64_t bs = options.block_size;
  // One rank's share of a block (kv_heads / N heads); kv_cache_memory holds all ranks' shares, so
  // a budget gives the same number of blocks whatever N is, while a fraction of free memory is
  // each rank's device's own.
  const int64_t per_block = PagedRunner::block_bytes(io, bs);
  const int64_t max_blocks_per_seq = (max_positions + bs - 1) / bs;
  int64_t blocks = 0;
  if (options.kv_cache_memory > 0) {
    blocks = options.kv_cache_memory / (per_block * parts->info.tensor_parallel);
  } else if (parts->session->device().type != DeviceType::kCpu) {
    const auto free = static_cast<double>(parts->session->allocator().free_bytes());
    blocks = static_cast<int64_t>(free * options.kv_cache_fraction) / per_block;
  } else {
    blocks = static_cast<int64_t>(std::ceil(options.kv_cache_fraction * static_cast<double>(options.max_num_seqs) *
                                            static_cast<double>(max_blocks_per_seq)));
  }
  if (blocks < 1) {
    return OG_ERROR("engine: the KV cache budget holds no block (", per_block * parts->info.tensor_parallel,
                    " bytes per block of ", bs, " positions)");
  }
  pool = std::make_unique<KvBlockPool>(blocks, bs, options.prefix_caching);
  scheduler = std::make_unique<Scheduler>(
      engine::SchedulerLimits{options.max_num_batched_tokens, options.max_num_seqs, max_blocks_per_seq}, *pool);
  OG_ASSIGN_OR_RETURN(runner, PagedRunner::create(*parts, engine::PagedRunnerLimits{blocks, bs, options.max_num_seqs,
                                                                                     options.max_num_batched_tokens,
                                                                                     max_blocks_per_seq}));
  return Status::ok();
}

Result<std::unique_ptr<Engine>> Engine::load(const std::string& path, const EngineOptions& options) {
  OG_RETURN_IF_ERROR(check_options(options));
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  ModelOptions model_options = options.model;
  model_options.kv_block_size = options.block_size;
  // A plan per bucket of packed tokens for each way a step ends (logits to the host, tokens on
  // the device, masked tokens on the device) and room for speculative steps' wider logit rows:
  // evicting one recompiles it and records its CUDA graphs again mid-serving.
  const auto buckets = static_cast<size_t>(std::bit_width(std::bit_ceil(static_cast<uint64_t>(options.max_num_batched_tokens))));
  model_options.max_cached_plans = std::max(model_options.max_cached_plans, 4 * buckets);
  OG_ASSIGN_OR_RETURN(impl->model, Model::load(path, model_options));
  impl->parts = &ModelAccess::parts(*impl->model);
  impl->max_positions = context_positions(*impl->parts);
  impl->stats.paged = impl->parts->io.paged;
  impl->stats.block_size = options.block_size;
  if (impl->parts->io.paged) OG_RETURN_IF_ERROR(impl->size_pool());
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

const Model& Engine::model() const { return *impl_->model; }

Result<std::unique_ptr<Request>> Engine::Impl::make_request(std::vector<int32_t> prompt, const RequestParams& params) const {
  const int64_t vocab = parts->io.vocab_size;
  if (prompt.empty()) return OG_ERROR("request: the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab) {
      return OG_ERROR("request: prompt token ", i, " is ", prompt[i], ", outside the vocabulary [0, ", vocab, ")");
    }
  }
  if (params.max_new_tokens < 0 || params.min_new_tokens < 0 || params.max_length < 0) {
    return OG_ERROR("request: max_new_tokens, min_new_tokens and max_length must be >= 0");
  }
  for (const std::string& stop : params.stop_strings) {
    if (stop.empty()) return OG_ERROR("request: stop strings must not be empty");
  }
  if (!params.stop_strings.empty() && !parts->tokenizer) {
    return OG_ERROR("request: stop strings need the model's tokenizer.json, which the package lacks");
  }
  const auto length = static_cast<int64_t>(prompt.size());
  if (length >= max_positions) {
    return OG_ERROR("request: the prompt has ", length, " tokens; the model's context holds ", max_positions,
                    " including at least one new token");
  }
  if (pool) {
    // The most positions it can reach must fit the pool, or it could wait forever.
    int64_t most = max_positions;
    if (params.max_new_tokens > 0) most = std::min(most, length + params.max_new_tokens);
    if (params.max_length > 0) most = std::min(most, std::max(params.max_length, length + 1));
    const int64_t blocks = (most + pool->block_size() - 1) / pool->block_size();
    if (blocks > pool->num_blocks()) {
      return OG_ERROR("request: up to ", most, " positions need ", blocks, " KV blocks; the pool has ", pool->num_blocks(),
                      " (raise the KV cache memory or lower max_new_tokens)");
    }
  }
  auto r = std::make_unique<Request>();
  r->params = params;
  r->priority = params.priority;
  r->cache_salt = params.cache_salt;
  r->prompt_length = length;
  r->tokens = std::move(prompt);
  const int64_t min_new_tokens = params.ignore_eos ? 0 : params.min_new_tokens;
  OG_ASSIGN_OR_RETURN(LogitProcessorChain chain,
                      make_generation_chain(params.sampling, min_new_tokens, parts->info.eos_token_ids));
  if (speculates(params.speculative)) {
    OG_RETURN_IF_ERROR(
        check_speculative_params(params.speculative, parts->info, params.constraint.has_value()).with_context("request"));
    const SpeculativeParams& s = params.speculative;
    if (s.method == SpeculativeMethod::kDraftModel && ModelAccess::parts(*s.draft_model).io.paged) {
      return OG_ERROR("request: the draft model was loaded with a paged KV cache (an Engine's model); a draft decodes "
                      "in a Generator of its own: load it with Model::load");
    }
  }
  OG_ASSIGN_OR_RETURN(std::shared_ptr<CompiledConstraint> constraint, compile_constraint(*parts, params.constraint));
  if (constraint) r->masker = add_constraint_processor(constraint, chain);
  r->plain_argmax = takes_plain_argmax(params.sampling, chain);
  r->device_sampling = takes_device_sampling(params.sampling, chain);
  r->device_masked = takes_masked_device_sampling(params.sampling, chain);
  OG_ASSIGN_OR_RETURN(Sampler sampler, Sampler::create(params.sampling, static_cast<int32_t>(vocab), std::move(chain)));
  r->sampler.emplace(std::move(sampler));
  if (parts->tokenizer) r->text.emplace(*parts->tokenizer, r->params.stop_strings, params.skip_special_tokens);
  if (pool) {
    OG_ASSIGN_OR_RETURN(r->drafter, Drafter::create(params.speculative, params.sampling, std::move(constraint),
                                                    parts->tokenizer.get()));
  }
  return r;
}

Result<uint64_t> Engine::add_request(std::vector<int32_t> prompt, const RequestParams& params) {
  OG_ASSIGN_OR_RETURN(std::unique_ptr<Request> r, impl_->make_request(std::move(prompt), params));
  const uint64_t id = impl_->next_id.fetch_add(1);
  r->id = id;
  r->arrival = id;
  std::lock_guard lock(impl_->inbox_mutex);
  impl_->inbox.push_back(std::move(r));
  return id;
}

void Engine::abort(uint64_t id) {
  std::lock_guard lock(impl_->inbox_mutex);
  impl_->aborted.push_back(id);
}

bool Engine::has_work() const {
  std::lock_guard lock(impl_->inbox_mutex);
  return !impl_->requests.empty() || !impl_->inbox.empty() || !impl_->aborted.empty();
}

void Engine::Impl::retire(uint64_t id) {
  auto it = requests.find(id);
  if (it == requests.end()) return;
  if (scheduler) scheduler->remove(it->second.get());
  requests.erase(it);
}

void Engine::Impl::drain_inbox(std::vector<RequestOutput>& outputs) {
  std::vector<std::unique_ptr<Request>> arrived;
  std::vector<uint64_t> aborts;
  {
    std::lock_guard lock(inbox_mutex);
    arrived.swap(inbox);
    aborts.swap(aborted);
  }
  for (std::unique_ptr<Request>& r : arrived) {
    if (scheduler) scheduler->add(r.get());
    const uint64_t id = r->id;
    requests.emplace(id, std::move(r));
  }
  for (const uint64_t id : aborts) {
    auto it = requests.find(id);
    if (it == requests.end()) continue;
    it->second->reason = FinishReason::kAborted;
    outputs.push_back(report(*it->second));
    retire(id);
  }
}

Status Engine::Impl::finish(Request& r, FinishReason reason) {
  r.reason = reason;
  if (reason == FinishReason::kStopString || !r.text) return Status::ok();
  OG_ASSIGN_OR_RETURN(const bool stopped, r.text->finish(r.generated() >= r.params.min_new_tokens, r.new_text));
  if (stopped) r.reason = FinishReason::kStopString;
  return Status::ok();
}

// The Generator's stop rules (generator.cc), for one request.
Status Engine::Impl::after_token(Request& r, int32_t token) {
  const std::vector<int32_t>& eos = parts->info.eos_token_ids;
  if (!r.params.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) return finish(r, FinishReason::kEos);
  if (r.text) {
    OG_ASSIGN_OR_RETURN(const bool stopped, r.text->put(token, r.generated() >= r.params.min_new_tokens, r.new_text));
    if (stopped) return finish(r, FinishReason::kStopString);
  }
  const auto total = static_cast<int64_t>(r.tokens.size());
  const bool at_limit = (r.params.max_new_tokens > 0 && r.generated() >= r.params.max_new_tokens) ||
                        (r.params.max_length > 0 && total >= r.params.max_length) || total >= max_positions;
  return at_limit ? finish(r, FinishReason::kLength) : Status::ok();
}

RequestOutput Engine::Impl::report(Request& r) const {
  RequestOutput out;
  out.id = r.id;
  out.new_tokens = std::move(r.new_tokens);
  out.new_text = std::move(r.new_text);
  out.logprobs = std::move(r.logprobs);
  r.new_tokens.clear();
  r.new_text.clear();
  r.logprobs.clear();
  out.finished = r.finished();
  out.reason = r.reason;
  out.prompt_tokens = r.prompt_length;
  out.cached_prompt_tokens = std::min(r.cached_prefix_tokens, r.prompt_length);
  if (r.queue_seconds && !r.queue_reported) {
    out.queue_seconds = r.queue_seconds;
    r.queue_reported = true;
  }
  out.generated_tokens = r.generator ? static_cast<int64_t>(r.generator->tokens(0).size()) - r.prompt_length : r.generated();
  return out;
}

int64_t Engine::Impl::tokens_left(const Request& r) const {
  const auto total = static_cast<int64_t>(r.tokens.size());
  int64_t left = max_positions - total;
  if (r.params.max_new_tokens > 0) left = std::min(left, r.params.max_new_tokens - r.generated());
  if (r.params.max_length > 0) left = std::min(left, r.params.max_length - total);
  return left;
}

// Requests that speculate and are decoding (one token to feed) get a draft appended to their
// tokens; the scheduler feeds it with that token, or drops it when the step has no room. A busy
// engine (speculative_disable_by_batch_size) still takes fast-forward's drafts: they are kept
// nearly always, so they cost the others no wasted positions, and a request's tokens then do not
// depend on what else runs.
Status Engine::Impl::draft_for_running() {
  const int64_t most = options.speculative_disable_by_batch_size;
  const bool busy = most > 0 && static_cast<int64_t>(scheduler->running()) >= most;
  for (auto& [id, r] : requests) {
    if (!r->drafter || r->finished() || r->pending() != 1 || r->computed == 0) continue;
    Draft draft;
    // Room for the draft and the token after it.
    OG_RETURN_IF_ERROR(r->drafter->propose(r->history(), tokens_left(*r) - 1, busy, draft)
                           .with_context("request " + std::to_string(id)));
    r->tokens.insert(r->tokens.end(), draft.tokens.begin(), draft.tokens.end());
    r->draft = static_cast<int64_t>(draft.tokens.size());
    r->draft_probabilities = std::move(draft.probabilities);
  }
  return Status::ok();
}

// After a verify step: the accepted draft and the model's token after it become the request's,
// the cache keeps the accepted positions (Scheduler::rewind).
Status Engine::Impl::keep_verified(Request& r, std::span<const std::vector<float>> logits, std::span<const int32_t> argmax) {
  const Draft draft{{r.tokens.end() - r.draft, r.tokens.end()}, std::move(r.draft_probabilities)};
  r.drop_draft();
  const int64_t fed_from = static_cast<int64_t>(r.tokens.size()) - 1;
  OG_ASSIGN_OR_RETURN(const int64_t accepted,
                      verify_draft(draft, argmax,
                                   [&](int64_t i) { return std::span<const float>(logits[static_cast<size_t>(i)]); },
                                   *r.sampler, [&r] { return r.history(); },
                                   [&](SampledToken pick) -> Result<bool> {
                                     r.tokens.push_back(pick.token);
                                     r.new_tokens.push_back(pick.token);
                                     if (r.params.sampling.logprobs) r.logprobs.push_back(pick);
                                     OG_RETURN_IF_ERROR(after_token(r, pick.token));
                                     return !r.finished();
                                   }));
  scheduler->rewind(r, fed_from + 1 + accepted);
  r.drafter->record(static_cast<int64_t>(draft.tokens.size()), accepted);
  stats.drafted_tokens += static_cast<int64_t>(draft.tokens.size());
  stats.accepted_tokens += accepted;
  if (r.drafter->last_forced()) {
    stats.forced_drafted_tokens += static_cast<int64_t>(draft.tokens.size());
    stats.forced_accepted_tokens += accepted;
  }
  return Status::ok();
}

// Whether every sampling position of the step can take its token on the device (the argmax, or a
// draw of a request whose chain SampleTokens computes exactly, given its constraint's mask if it
// has one, without a draft to verify); if so fills `draws`, each sampled draw taking its request's
// next uniform as its Sampler would (a greedy one takes none).
Result<bool> Engine::Impl::plan_device_draws(std::span<const ScheduledRun> runs) {
  draws.clear();
  masked_draws.clear();
  bool sampled = false;
  for (const ScheduledRun& run : runs) {
    if (!run.samples()) continue;
    const auto& r = static_cast<const Request&>(*run.request);
    if (r.plain_argmax) continue;
    if (!(r.device_sampling || r.device_masked) || run.sampled_rows() != 1) return false;
    sampled = true;
  }
  if (!(sampled ? runner->device_draws() : runner->device_argmax())) return false;
  for (const ScheduledRun& run : runs) {
    auto& r = static_cast<Request&>(*run.request);
    for (int64_t k = 0; k < run.sampled_rows(); ++k) {
      if (r.plain_argmax) {
        draws.emplace_back();
        continue;
      }
      const bool greedy = r.params.sampling.is_greedy();
      if (r.device_masked) masked_draws.emplace_back(draws.size(), &r);
      draws.push_back(DeviceDraw{device_sampling_params(r.params.sampling), greedy ? 0.0 : r.sampler->next_uniform(),
                                 r.device_masked, {}});
      stats.device_sampled_tokens += greedy ? 0 : 1;
    }
  }
  return true;
}

// The masks of the step's masked device draws, on host threads (one request's matcher each),
// while the device runs the step's forward pass (PagedRunner::run calls this).
Status Engine::Impl::compute_masks() {
  if (masked_draws.empty()) return Status::ok();
  const Clock::time_point start = Clock::now();
  if (!mask_pool) mask_pool = std::make_unique<ThreadPool>(std::min(hardware_threads(), 8));
  std::vector<Status> failed(masked_draws.size(), Status::ok());
  mask_pool->parallel_for(static_cast<int64_t>(masked_draws.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto [k, r] = masked_draws[static_cast<size_t>(i)];
      Result<std::span<const uint64_t>> mask = r->masker->mask_for(r->history());
      if (mask.is_ok()) {
        draws[k].mask = *mask;
      } else {
        failed[static_cast<size_t>(i)] = mask.status().with_context("request " + std::to_string(r->id));
      }
    }
  });
  stats.mask_seconds += seconds_since(start);
  for (const Status& s : failed) OG_RETURN_IF_ERROR(s);
  return Status::ok();
}

Status Engine::Impl::step_paged(std::vector<RequestOutput>& outputs) {
  OG_RETURN_IF_ERROR(draft_for_running());
  const std::vector<ScheduledRun> runs = scheduler->schedule();
  if (runs.empty()) return Status::ok();
  OG_ASSIGN_OR_RETURN(const bool on_device, plan_device_draws(runs));
  const Clock::time_point start = Clock::now();
  for (const ScheduledRun& run : runs) note_scheduled(static_cast<Request&>(*run.request), start);
  OG_ASSIGN_OR_RETURN(const bool took_tokens,
                      runner->run(runs, on_device ? &draws : nullptr, [this] { return compute_masks(); }, logits, device_tokens));
  stats.model_seconds += seconds_since(start);
  scheduler->complete(runs);
  const Clock::time_point sampling = Clock::now();
  size_t row = 0;
  std::vector<uint64_t> done;
  for (const ScheduledRun& run : runs) {
    stats.scheduled_tokens += run.count;
    if (!run.samples()) continue;
    auto& r = static_cast<Request&>(*run.request);
    if (r.draft > 0) {
      const auto rows = static_cast<size_t>(run.sampled_rows());
      OG_RETURN_IF_ERROR(keep_verified(r, took_tokens ? std::span<const std::vector<float>>() : std::span(logits).subspan(row, rows),
                                       took_tokens ? std::span<const int32_t>(device_tokens).subspan(row, rows)
                                                   : std::span<const int32_t>())
                             .with_context("request " + std::to_string(r.id)));
      row += rows;
      outputs.push_back(report(r));
      if (r.finished()) done.push_back(r.id);
      continue;
    }
    SampledToken sampled;
    if (took_tokens) {
      sampled.token = device_tokens[row++];
    } else {
      OG_ASSIGN_OR_RETURN(sampled, r.sampler->sample(logits[row++], r.history()));
    }
    r.tokens.push_back(sampled.token);
    r.new_tokens.push_back(sampled.token);
    if (r.params.sampling.logprobs) r.logprobs.push_back(sampled);
    OG_RETURN_IF_ERROR(after_token(r, sampled.token).with_context("request " + std::to_string(r.id)));
    outputs.push_back(report(r));
    if (r.finished()) done.push_back(r.id);
  }
  for (const uint64_t id : done) retire(id);
  stats.sampling_seconds += seconds_since(sampling);
  return Status::ok();
}

// Without paged attention each request decodes in its own cache: up to max_num_seqs of them,
// oldest first, one decoder run each per step.
Status Engine::Impl::step_per_request(std::vector<RequestOutput>& outputs) {
  int64_t served = 0;
  std::vector<uint64_t> done;
  const Clock::time_point start = Clock::now();
  for (auto& [id, r] : requests) {
    if (served++ == options.max_num_seqs) break;
    if (!r->generator) {
      GeneratorParams p;
      p.sampling = r->params.sampling;
      p.max_new_tokens = r->params.max_new_tokens;
      p.min_new_tokens = r->params.min_new_tokens;
      p.max_length = r->params.max_length;
      p.stop_strings = r->params.stop_strings;
      p.ignore_eos = r->params.ignore_eos;
      p.skip_special_tokens = r->params.skip_special_tokens;
      p.constraint = r->params.constraint;
      p.speculative = r->params.speculative;
      p.prefill_chunk = options.max_num_batched_tokens;
      p.prompts = {r->tokens};
      OG_ASSIGN_OR_RETURN(r->generator, Generator::create(*model, p));
      note_scheduled(*r, start);
    }
    Generator& g = *r->generator;
    const size_t before = g.tokens(0).size();
    OG_RETURN_IF_ERROR(g.generate_next().with_context("request " + std::to_string(id)));
    const std::span<const int32_t> tokens = g.tokens(0);
    r->new_tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(before), tokens.end());
    r->new_text = g.new_text(0);
    const std::span<const SampledToken> logprobs = g.logprobs(0);
    const size_t fresh = std::min(logprobs.size(), tokens.size() - before);
    r->logprobs.assign(logprobs.end() - static_cast<std::ptrdiff_t>(fresh), logprobs.end());
    if (g.is_done()) r->reason = g.finish_reason(0);
    stats.scheduled_tokens += static_cast<int64_t>(tokens.size() - before);
    outputs.push_back(report(*r));
    if (r->finished()) done.push_back(id);
  }
  stats.model_seconds += seconds_since(start);
  for (const uint64_t id : done) retire(id);
  return Status::ok();
}

Result<std::vector<RequestOutput>> Engine::step() {
  std::vector<RequestOutput> outputs;
  impl_->drain_inbox(outputs);
  ++impl_->stats.steps;
  if (impl_->runner) {
    OG_RETURN_IF_ERROR(impl_->step_paged(outputs));
  } else {
    OG_RETURN_IF_ERROR(impl_->step_per_request(outputs));
  }
  return outputs;
}

Result<int64_t> Engine::warm_up() {
  if (!impl_->runner) return int64_t{0};
  return impl_->runner->warm_up();
}

EngineStats Engine::stats() const {
  EngineStats s = impl_->stats;
  if (impl_->pool) {
    const engine::PrefixCacheCounters& c = impl_->pool->counters();
    s.prefix_queries = c.queries;
    s.prefix_hits = c.hits;
    s.prefix_evictions = c.evictions;
    s.kv_blocks = impl_->pool->num_blocks();
    s.kv_blocks_used = impl_->pool->used_blocks();
    s.preemptions = impl_->scheduler->preemptions();
    s.running = static_cast<int64_t>(impl_->scheduler->running());
    s.waiting = static_cast<int64_t>(impl_->scheduler->waiting());
  } else {
    s.running = static_cast<int64_t>(impl_->requests.size());
  }
  if (impl_->runner) {
    const SessionStats session = impl_->runner->session_stats();
    s.plans_compiled = session.plans_compiled;
    s.graph_captures = session.graph_captures;
    s.graph_replays = session.graph_replays;
    s.graph_invalidations = session.graph_invalidations;
  }
  for (const auto& [id, r] : impl_->requests) {
    if (!r->blocks.empty()) s.kv_slots_unfilled += static_cast<int64_t>(r->blocks.size()) * s.block_size - r->computed;
  }
  return s;
}

}  // namespace onnx_genai::genai
