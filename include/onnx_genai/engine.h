// The serving engine: many requests at once over one model, continuous batching over a paged KV
// cache with automatic prefix caching.
//
//   genai::EngineOptions options;                    // block size, KV memory, token budget...
//   auto engine = genai::Engine::load("models/qwen3", options).value();
//   genai::RequestParams params;  params.max_new_tokens = 64;
//   uint64_t id = engine->add_request(engine->model().encode("Hello").value(), params).value();
//   while (engine->has_work()) {
//     for (const genai::RequestOutput& out : engine->step().value()) std::cout << out.new_text;
//   }
//
// Every step() packs the new tokens of every running request (a decode token each, or chunks of
// prompts) into one decoder run of up to max_num_batched_tokens tokens, with no padding rows, and
// samples one token for each request whose known tokens are now all computed. Requests join and
// leave between steps; add_request() and abort() may be called from other threads while a loop
// steps. A request's greedy tokens do not depend on what else is in the batch, and seeded
// sampling draws the same tokens alone or batched.
//
// KV memory is a pool of blocks of block_size positions (sized by kv_cache_memory); a request
// holds the blocks its tokens fill and frees them the moment it finishes or is aborted. Full
// blocks are kept, keyed by their tokens and everything before them, so a prompt that starts like
// an earlier one skips computing that part. When the pool runs out, the latest low-priority
// request is preempted (it recomputes when readmitted).
//
// A model whose attention cannot be rewritten for paging (ModelInfo::paged_kv_unavailable says
// why) is still served: each request then runs in its own contiguous cache, one decoder run per
// request per step.
//
// With EngineOptions::model.tensor_parallel = N the decoder is sharded into N ranks (CPU only):
// one scheduler and one block pool bookkeeping drive them all, each rank keeps its own pools of
// kv_heads / N heads under the same block ids, and every step runs all ranks at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "onnx_genai/genai.h"

namespace onnx_genai::genai {

struct EngineOptions {
  ModelOptions model;                   // its kv_block_size is taken from block_size
  int64_t block_size = 16;              // positions per KV block
  int64_t kv_cache_memory = 0;          // bytes for the block pool (all tensor-parallel ranks'); 0: kv_cache_fraction
  // Of the device's free memory after loading (a GPU); on the CPU, of enough memory for
  // max_num_seqs sequences of the whole context.
  double kv_cache_fraction = 0.9;
  int64_t max_num_batched_tokens = 256;  // tokens per step
  int64_t max_num_seqs = 64;             // requests per step
  bool prefix_caching = true;
  // Speculating requests draft only while fewer than this many requests are running (0: always;
  // paged KV):
  // a full batch keeps the hardware busy, and rejected drafts then cost others their step time
  // (vLLM's speculative_disable_by_batch_size).
  int64_t speculative_disable_by_batch_size = 0;
};

// Per request: what GeneratorParams holds for one sequence.
struct RequestParams {
  SamplingParams sampling;       // greedy when sampling.is_greedy(); seeded draws are per request
  int64_t max_new_tokens = 0;    // 0 = up to the context
  int64_t min_new_tokens = 0;
  int64_t max_length = 0;        // prompt + generated; 0 = the context length
  std::vector<std::string> stop_strings;
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  std::optional<ConstraintSpec> constraint;  // structured output, as GeneratorParams::constraint
  // Speculative decoding and fast-forward for this request, as GeneratorParams::speculative: its
  // drafts are verified inside the step's one decoder run, beside the other requests' tokens.
  SpeculativeParams speculative;
  int priority = 0;              // higher is scheduled first; FCFS among equals
  uint64_t cache_salt = 0;       // requests with different salts never share cached blocks
};

struct RequestOutput {
  uint64_t id = 0;
  std::vector<int32_t> new_tokens;  // sampled this step (eos included when it ended the request)
  std::string new_text;             // text that became final this step
  std::vector<SampledToken> logprobs;  // with sampling.logprobs, one per new token
  bool finished = false;
  FinishReason reason = FinishReason::kNone;  // kAborted after abort()
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0;
  // On the request's first output: seconds from add_request until its tokens were first scheduled.
  std::optional<double> queue_seconds;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t scheduled_tokens = 0;   // tokens fed to the decoder, all steps
  int64_t preemptions = 0;
  int64_t drafted_tokens = 0, accepted_tokens = 0;  // speculative decoding, all requests
  int64_t forced_drafted_tokens = 0, forced_accepted_tokens = 0;  // of those, fast-forward's
  // Sampled (not greedy) tokens drawn on the device: their logits never left it.
  int64_t device_sampled_tokens = 0;
  int64_t prefix_queries = 0, prefix_hits = 0, prefix_evictions = 0;  // in blocks
  int64_t kv_blocks = 0, kv_blocks_used = 0, block_size = 0;
  // Positions of the requests' blocks that hold no token yet (the tails of their last blocks):
  // the pool's waste is kv_slots_unfilled / (kv_blocks_used * block_size).
  int64_t kv_slots_unfilled = 0;
  int64_t running = 0, waiting = 0;
  bool paged = false;
  double model_seconds = 0, sampling_seconds = 0;
  // Host time computing the token masks of constrained device draws; it runs while the device
  // runs the step's forward pass, inside model_seconds.
  double mask_seconds = 0;
  // The paged decoder's session (rank 0): plans compiled, and CUDA graph segments recorded,
  // replayed and dropped for other buffers. A step that compiles or records is a slow one.
  int64_t plans_compiled = 0, graph_captures = 0, graph_replays = 0, graph_invalidations = 0;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> load(const std::string& path, const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Model& model() const;
  // Queues a request; fails on an empty prompt, an id outside the vocabulary, a prompt that
  // leaves no room in the context or needs more KV blocks than the pool has, or bad parameters.
  Result<uint64_t> add_request(std::vector<int32_t> prompt, const RequestParams& params);
  // The request ends at the next step (which reports it finished, aborted); unknown ids are ignored.
  void abort(uint64_t id);
  // Runs one scheduled batch; returns an entry for every request that got tokens or finished.
  Result<std::vector<RequestOutput>> step();
  // Runs one decoder step of every shape a step can take (each bucket of packed tokens) with no
  // request in it, so that the first requests do not wait while plans compile and CUDA graphs are
  // recorded (on a 7B model that first load cost the first 128 requests half their throughput).
  // Call before stepping; returns the shapes run (0 for a model served with contiguous caches).
  Result<int64_t> warm_up();
  // Whether requests are queued or running. has_work() and stats() belong to the thread that steps.
  bool has_work() const;
  EngineStats stats() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace onnx_genai::genai
