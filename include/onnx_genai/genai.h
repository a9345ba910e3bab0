// Text generation: load a model package, then prefill and decode with a KV cache the runtime owns.
//
//   auto model = genai::Model::load("models/qwen3").value();          // Result<unique_ptr<Model>>
//   genai::GeneratorParams params = model->default_params();
//   params.prompts = {model->encode("Once upon a time").value()};
//   params.max_new_tokens = 64;
//   auto generator = genai::Generator::create(*model, params).value();
//   generator->generate([](size_t sequence, std::string_view text) { std::cout << text; });
//
// or step by step: while (!generator->is_done()) { generator->generate_next(); ...new_text(0)... }.
//
// A package is an onnxruntime-genai folder (genai_config.json) or a Hugging Face ONNX export
// (config.json + model.onnx / model_q4.onnx / model_fp16.onnx, also under onnx/), with
// tokenizer.json, tokenizer_config.json, generation_config.json and chat_template.jinja beside
// it. The decoder's inputs and outputs are derived from the graph (src/genai/decoder_io.h).
//
// Batches: one prompt per sequence, of any lengths. Sequences advance in lockstep, one token per
// generate_next(); a finished sequence stops growing (internally it is fed filler tokens until
// every sequence has finished). Errors are Status values; nothing throws.
//
// These classes live in onnx_genai::genai: onnx_genai::Model is the runtime's loaded ONNX graph.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "onnx_genai/chat_template.h"
#include "onnx_genai/constraints.h"
#include "onnx_genai/device.h"
#include "onnx_genai/sampling.h"
#include "onnx_genai/session.h"
#include "onnx_genai/status.h"
#include "onnx_genai/tokenizer.h"

namespace onnx_genai::genai {

struct ModelOptions {
  int num_threads = 0;            // intra-op threads including the caller; 0 = all cores
  // cuda:N: the decoder runs on that GPU (nodes without a CUDA kernel on the CPU) and the KV cache
  // lives there; token ids and logits cross to the host.
  Device device = Device::cpu();
  // A GPU that exists but that this build has no code for (another compute capability) leaves
  // the model on the CPU, and Model::device_fallback() says why; false makes it an error.
  bool cpu_fallback = true;
  bool capture_device_graphs = true;  // SessionOptions::capture_device_graphs
  // SessionOptions::max_cached_plans: the decoder's plans kept (one per step shape; the serving
  // engine raises it to hold every shape its steps take).
  size_t max_cached_plans = 16;
  std::string onnx_file;          // decoder file inside the folder; empty = the config's / the usual names
  bool preallocate_kv = false;    // reserve the KV cache for the whole context up front
  int64_t initial_kv_capacity = 0;  // smallest first KV reservation in positions; 0 = 64
  // Shared-buffer (GroupQueryAttention) models: decode steps pass an attention_mask as wide as the
  // KV capacity, so they all have one input shape and replay one execution plan until the cache
  // grows (onnxruntime-genai feeds such a static mask under graph capture). Unset: on when the
  // graph uses the mask only for seqlens_k and total_sequence_length (onnxruntime-genai's builder
  // graphs); a graph reading more from the mask's width (LongRoPE's If) would see the capacity.
  std::optional<bool> decode_mask_at_capacity;
  // Compute logits only at the positions the generator samples from (a prompt's last), not at
  // every prompt position as the graph's LM head would (src/genai/logit_rows.h).
  bool select_logit_rows = true;
  // > 0: the KV cache is a pool of blocks of this many positions shared by many sequences (the
  // serving Engine, onnx_genai/engine.h): attention is rewritten at load to read it through block
  // tables. A graph whose attention cannot be rewritten keeps per-sequence caches, and
  // ModelInfo::paged_kv_unavailable says why. 0: one contiguous cache per Generator.
  int64_t kv_block_size = 0;
  // > 1: the decoder is sharded at load into this many tensor-parallel ranks (Megatron-style,
  // docs/ARCHITECTURE.md "Tensor parallelism"), run in lockstep on one thread each (each rank's
  // pool has num_threads), every rank with its own KV cache of kv_heads / N heads. CPU only; the
  // KV heads must divide by N, and a graph the sharding pass does not recognise is refused naming
  // why. With kv_block_size (the serving Engine) each rank's graph is paged after sharding.
  int tensor_parallel = 1;
};

// What loading found out about the model.
struct ModelInfo {
  std::string model_file;        // the decoder .onnx
  std::string config_name;       // "genai_config.json" or "config.json"
  int64_t context_length = 0;    // 0 when the config gives none
  int64_t vocab_size = 0;        // logits width
  int64_t num_layers = 0, kv_heads = 0, head_size = 0;  // kv_heads: the whole model's, all ranks
  int tensor_parallel = 1;        // ranks (ModelOptions::tensor_parallel)
  DType kv_dtype = DType::kUndefined;
  bool shared_kv_buffer = false;  // present written into past's storage (GroupQueryAttention)
  bool right_padding = false;     // batch rows start at cache slot 0 (else left-padded)
  std::vector<int32_t> eos_token_ids;
  int32_t pad_token_id = 0;
  // Config values the decoder graph contradicts, one line each; the graph's values are used.
  std::vector<std::string> warnings;
  bool paged_kv = false;             // attention reads a block pool (ModelOptions::kv_block_size)
  std::string paged_kv_unavailable;  // why not, when kv_block_size asked for it
};

// Beam search's stopping rule, as transformers' early_stopping: kHeuristic (False) stops a prompt
// once its best running beam, scored at its current length, cannot beat the worst of num_beams
// finished hypotheses; kTrue stops as soon as num_beams hypotheses have finished; kNever stops only
// when no running beam can do better even at the longest length allowed (with length_penalty > 0).
enum class EarlyStopping { kHeuristic, kTrue, kNever };

// Beam search with Hugging Face transformers' semantics (src/genai/beam_search.h) when
// num_beams > 1: each prompt keeps num_beams running beams ranked by the sum of their tokens'
// log-probabilities, and a hypothesis that ends (eos, or the length limit) scores
// sum_logprobs / generated_tokens ^ length_penalty. Greedy only (sampling.is_greedy()); the logit
// processors (repetition penalty, no-repeat n-grams, min_new_tokens, logit bias) apply to the
// log-probabilities. Stop strings, constraints and logprobs are refused with it.
struct BeamSearchParams {
  int32_t num_beams = 1;             // 1: greedy search or sampling, no beams
  float length_penalty = 1.0f;       // > 0 favours longer hypotheses, < 0 shorter ones
  EarlyStopping early_stopping = EarlyStopping::kHeuristic;
  int32_t num_return_sequences = 1;  // in [1, num_beams]: the best hypotheses of each prompt
};

// Speculative decoding (src/genai/speculative.h): each step a proposer drafts up to draft_tokens
// tokens, one decoder run over the last token and the draft scores them all, the longest agreeing
// prefix is kept with one token of the model's own after it, and the KV cache forgets the rest.
// Lossless: greedy gives the tokens plain greedy decoding gives; sampling accepts a drafted token
// with probability min(1, p / q) (p the processed distribution, q the draft's: q puts all its mass
// on a prompt-lookup token) and otherwise draws from max(0, p - q) renormalised, so the tokens
// follow the same distribution (not the same draws for a seed).
// One prompt, no beams; a constraint masks every verified position. The model must return logits
// for several positions.
class Model;

enum class SpeculativeMethod {
  kNone,
  kNgram,       // prompt lookup: continue the latest earlier occurrence of the text's last n-gram
  kDraftModel,  // a smaller model with the same vocabulary drafts in its own KV cache (sampling when the model samples)
};
std::string_view speculative_method_name(SpeculativeMethod method);  // "none", "ngram", "draft"

struct SpeculativeParams {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int32_t draft_tokens = 4;      // K: the most tokens drafted per step, in [1, 15]
  // kNgram: the longest n-gram first, down to the shortest.
  int32_t ngram_max = 3, ngram_min = 1;
  const Model* draft_model = nullptr;  // kDraftModel; must outlive the Generator
  // Per sequence: K grows while whole drafts are accepted and shrinks when they are not; at K = 1
  // a low acceptance rate pauses drafting for a while (plain steps), then it tries again.
  bool adaptive = true;
  // Fast-forward, with a constraint (an error without one): where the grammar allows exactly one
  // byte at a time (the rest of a property name, "\": "), that text is tokenized and drafted (up
  // to 15 tokens a step, fewer after rejections), and verified like any draft under the grammar's
  // mask, so the output is the one decoding token by token gives. Where nothing is forced,
  // `method` drafts (kNone: a plain step). docs/constraints.md.
  bool fast_forward = false;
};

struct GeneratorParams {
  SamplingParams sampling;           // greedy when sampling.is_greedy()
  BeamSearchParams beam;
  int64_t max_new_tokens = 0;        // 0 = no limit besides max_length / the context
  int64_t min_new_tokens = 0;        // eos and stop strings are ignored before this many
  int64_t max_length = 0;            // prompt + generated tokens; 0 = the context length
  std::vector<std::string> stop_strings;  // end a sequence; the stop string is not in its text
  bool ignore_eos = false;           // keep generating through eos tokens
  std::vector<std::vector<int32_t>> prompts;  // one per sequence (the batch)
  int64_t prefill_chunk = 512;       // longest run of prompt tokens per decoder call; 0 = all at once
  bool truncate_prompt_left = false;  // drop a too-long prompt's oldest tokens instead of failing
  bool skip_special_tokens = true;   // in the text stream
  // Structured output: every sequence's text is kept a prefix of the constraint's language, and
  // eos comes only once it is a whole sentence (include/onnx_genai/constraints.h). Masked rows
  // are sampled on the host, and sampling.no_repeat_ngram_size does not apply to them (grammars
  // force repeats: indentation, "}, {").
  std::optional<ConstraintSpec> constraint;
  SpeculativeParams speculative;
};

enum class FinishReason { kNone, kEos, kStopString, kLength, kAborted };
// "none", "eos", "stop", "length", "abort"
std::string_view finish_reason_name(FinishReason reason);

struct GenerationStats {
  int64_t prefill_tokens = 0;   // prompt tokens fed (padding excluded), all sequences
  double prefill_seconds = 0;
  int64_t decode_steps = 0;     // decoder runs after the prompt (one token each, or a verified draft)
  int64_t decode_tokens = 0;    // tokens those runs gave (decode_steps without speculation)
  double decode_seconds = 0;
  double sampling_seconds = 0;  // sampling and detokenizing, all steps
  // Speculative decoding: steps that verified a draft (also counted in decode_steps, their time
  // in decode_seconds with the drafting), tokens drafted, and drafted tokens accepted.
  int64_t speculative_steps = 0;
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  // Of those, fast-forward's drafts (the text a constraint forces) and their accepted tokens.
  int64_t forced_drafted_tokens = 0;
  int64_t forced_accepted_tokens = 0;
  double drafting_seconds = 0;
};

class Generator;

class Model {
 public:
  static Result<std::unique_ptr<Model>> load(const std::string& path, const ModelOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelInfo& info() const;
  // Null when the package has no tokenizer.json.
  const Tokenizer* tokenizer() const;
  // Sampling defaults and limits from genai_config.json's search section or generation_config.json.
  GeneratorParams default_params() const;
  // Text -> ids with the tokenizer's special tokens (BOS...). Fails on invalid UTF-8.
  Result<std::vector<int32_t>> encode(std::string_view text) const;
  // Renders the chat template and encodes the result without adding special tokens again.
  Result<std::vector<int32_t>> encode_chat(const ChatRequest& request) const;
  SessionStats session_stats() const;
  // Where the decoder runs (the CPU after a fallback), and why it fell back ("" when it did not).
  Device device() const;
  const std::string& device_fallback() const;

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class Generator;
  friend struct ModelAccess;  // other genai-layer code (src/genai/model_parts.h)
};

// Called with each piece of text that became final, per sequence.
using TextCallback = std::function<void(size_t sequence, std::string_view text)>;

// With beam search (params.beam.num_beams > 1) the Generator's sequences are the returned
// hypotheses: prompt p's k-th best is sequence p * num_return_sequences + k. Until a prompt's
// search ends they show its k-th running beam (no text yet); when it ends, they hold the finished
// hypotheses, best first, and new_text() gives each one's whole text at once. rewind() and
// append_tokens() are refused.
class Generator {
 public:
  // Validates `params` (prompts, limits, sampling) against the model; the model must outlive it.
  static Result<std::unique_ptr<Generator>> create(const Model& model, const GeneratorParams& params);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Appends `tokens` to every sequence (a further prompt turn, or a prompt after rewind(0)); they
  // count as prompt. Finished sequences resume.
  Status append_tokens(std::span<const int32_t> tokens);
  // Feeds what the cache lacks (the prompt, chunked, on the first call) and samples one token per
  // unfinished sequence.
  Status generate_next();
  // Runs generate_next() until every sequence has finished, passing each text piece on.
  Status generate(const TextCallback& on_text);

  size_t batch_size() const;
  bool is_done() const;
  bool is_done(size_t sequence) const;
  FinishReason finish_reason(size_t sequence) const;
  // Prompt and generated tokens (eos included when it ended the sequence).
  std::span<const int32_t> tokens(size_t sequence) const;
  size_t prompt_length(size_t sequence) const;
  // Leading tokens of the sequence whose keys and values the KV cache holds (the next
  // generate_next() feeds the rest); after rewind(n), at most n - 1 (the last kept one is fed again).
  size_t cached_length(size_t sequence) const;
  // Text that became final in the last generate_next() (stop strings held back until decided).
  const std::string& new_text(size_t sequence) const;
  // One entry per generated token when params.sampling.logprobs.
  std::span<const SampledToken> logprobs(size_t sequence) const;
  // Beam search: a finished hypothesis' score, sum_logprobs / generated ^ length_penalty; 0 before
  // its prompt's search ends, and for greedy search and sampling.
  double beam_score(size_t sequence) const;

  // Keeps the first `length` tokens of the longest sequence; every sequence drops the same number
  // of trailing tokens (for batch 1: keeps `length` tokens). The next generate_next() recomputes
  // the last kept token's successor. rewind(0) empties every sequence (then append_tokens()).
  // Text already reported is not taken back, and seeded samplers do not replay their draws.
  Status rewind(size_t length);

  int64_t kv_capacity() const;   // positions per sequence the KV cache holds now
  int64_t kv_growths() const;    // times it grew
  const GenerationStats& stats() const;

 private:
  struct Impl;
  explicit Generator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Perplexity of a token sequence, Hugging Face's sliding-window protocol: windows of `window`
// tokens start every `stride` tokens (the last one ends at the sequence's end); each window is
// one decoder run over an empty KV cache and scores only the tokens no earlier window scored
// (never its own first token, which has no context in it). NLL is the log-softmax of the float
// logits, computed in double; ppl = exp(nll / scored).
struct PerplexityOptions {
  int64_t window = 0;  // tokens per decoder run; 0 = min(context length, 512)
  int64_t stride = 0;  // tokens between window starts, in [1, window]; 0 = window / 2
};

struct PerplexityResult {
  int64_t tokens = 0;              // tokens given
  int64_t scored = 0;              // tokens whose NLL counts
  int64_t window = 0, stride = 0;  // as resolved
  int64_t decoder_runs = 0;        // windows that scored something
  double nll = 0;                  // total over the scored tokens (natural log)
  double ppl = 0;                  // exp(nll / scored)
  double seconds = 0;              // decoder runs and scoring
};

// `options` with the defaults filled in, or an error saying which limit `tokens` or the options
// break (a window over the context length, a stride outside [1, window], fewer than 2 tokens, an
// id outside [0, vocab_size), a logits output declared with only the last position).
Result<PerplexityOptions> resolve_perplexity_options(const Model& model, std::span<const int32_t> tokens,
                                                     const PerplexityOptions& options);
// Resolves `options` as above, then scores every window.
Result<PerplexityResult> evaluate_perplexity(const Model& model, std::span<const int32_t> tokens,
                                             const PerplexityOptions& options = {});

}  // namespace onnx_genai::genai
