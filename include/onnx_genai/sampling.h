// Sampling for the generation loop: turns one row of next-token logits into a token id.
//
//   SamplingParams params;
//   params.temperature = 0.7f;  params.top_p = 0.9f;  params.seed = 42;
//   auto sampler = Sampler::create(params, vocab_size);                    // Result<Sampler>
//   auto next = sampler->sample(logits_row, {tokens, prompt_length});      // Result<SampledToken>
//
// A Sampler copies the row into Candidates, runs a chain of LogitProcessors over it, then picks a
// token: the argmax when greedy, else a draw from the softmax of what is left. The default chain
// follows Hugging Face transformers' order (GenerationMixin._get_logits_processor), with OpenAI's
// frequency/presence penalties placed next to the repetition penalty as vLLM applies them:
//
//   logit_bias -> repetition_penalty -> frequency/presence -> no_repeat_ngram
//     -> temperature -> top_k -> top_p -> min_p -> typical_p        (the last five only when sampling)
//
// Greedy (params.greedy, or a temperature below 1e-5 as in vLLM) skips the five
// distribution-shaping steps, as transformers does with do_sample=False, and takes the argmax with
// ties going to the lowest token id.
//
// Logprobs follow vLLM's default (logprobs_mode=raw_logprobs): log-softmax of the raw model row,
// before penalties, temperature and filtering, so they describe the model rather than the sampler.
// LogprobSource::kProcessed reports the distribution actually sampled from instead (after every
// processor; filtered-out tokens get -inf).
//
// Determinism: a seeded Sampler draws the same tokens from the same logits on every run and
// platform. It uses its own generator (SFC64 seeded through SplitMix64) with a fixed u64 -> double
// conversion, its own float exp built from IEEE basic operations (the library is compiled without
// FMA contraction), and sums probability mass in fixed point, which is exact whatever order a
// selection leaves the candidates in. Only typical-p's threshold also goes through std::log; a
// last-bit difference there could matter only on an exact tie of that threshold.
//
// Cost on a 152k vocabulary: penalties and n-gram bans touch only the tokens in the history;
// top-k selects with a heap of k (nth_element for large k), top-p and typical-p with a weighted
// quickselect that never sorts more than the last few dozen candidates; every step is O(vocab).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai {

class LogitProcessor;

enum class LogprobSource : int32_t {
  kRaw = 0,        // log-softmax of the logits as the model produced them (vLLM's default)
  kProcessed = 1,  // log-softmax after every processor: the distribution a draw uses
};

struct SamplingParams {
  bool greedy = false;            // argmax; also implied by a temperature below 1e-5
  float temperature = 1.0f;       // >= 0; logits are divided by it
  int32_t top_k = 0;              // >= 0; 0 keeps every token
  float top_p = 1.0f;             // in (0, 1]; 1 keeps every token
  float min_p = 0.0f;             // in [0, 1]; 0 keeps every token
  float typical_p = 1.0f;         // in (0, 1]; 1 keeps every token
  float repetition_penalty = 1.0f;  // > 0; 1 = off. Over prompt + generated tokens (HF/CTRL)
  float frequency_penalty = 0.0f;   // finite; over generated tokens only (OpenAI/vLLM)
  float presence_penalty = 0.0f;    // finite; over generated tokens only (OpenAI/vLLM)
  int32_t no_repeat_ngram_size = 0;  // >= 0; 0 = off. Over prompt + generated tokens (HF)
  // Added to a token's logit before anything else. Values must be finite, or -inf to ban a token.
  std::map<int32_t, float> logit_bias;
  // Unset: seeded from std::random_device, so runs differ.
  std::optional<uint64_t> seed;
  bool logprobs = false;          // report the chosen token's logprob
  int32_t top_logprobs = 0;       // >= 0; also report this many most likely tokens (needs logprobs)
  LogprobSource logprob_source = LogprobSource::kRaw;
  // A caller's own processor, run first (before logit_bias) on the model's row: called once for
  // every chain made from these params. The Generator makes one chain per sequence, in sequence
  // order; the C API reads and replaces rows through it (get_logits / set_logits).
  std::function<std::unique_ptr<LogitProcessor>()> first_processor;
  // Likewise, run last: it sees the distribution the token is drawn from (a speculative draft
  // model records it there, src/genai/speculative.h).
  std::function<std::unique_ptr<LogitProcessor>()> last_processor;

  // Fails naming the first invalid parameter and its value.
  Status validate() const;
  // Temperatures below this take the argmax, as vLLM does: the distribution they ask for is the
  // argmax to float precision, and dividing logits by them (below ~1e-38) overflows to inf and
  // samples noise.
  static constexpr float kGreedyBelowTemperature = 1e-5f;
  bool is_greedy() const { return greedy || temperature < kGreedyBelowTemperature; }
};

// The tokens that came before the position being sampled.
struct TokenHistory {
  std::span<const int32_t> tokens;  // the prompt followed by the tokens generated so far
  size_t prompt_length = 0;         // how many of `tokens` are the prompt

  std::span<const int32_t> generated() const {
    return tokens.subspan(prompt_length < tokens.size() ? prompt_length : tokens.size());
  }
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  int32_t token = 0;
  std::optional<float> logprob;            // set when params.logprobs
  std::vector<TokenLogprob> top_logprobs;  // params.top_logprobs entries, most likely first,
                                           // ties by lower id
};

// One row of logits being shaped for sampling: a dense working copy indexed by token id, and the
// ids still in play in ascending order. A token whose logit is -inf is out of play for good:
// filters set dropped tokens to -inf, and set_logit() cannot bring one back.
class Candidates {
 public:
  // Starts over from a model row (finite or -inf entries); tokens at -inf start out of play.
  void assign(std::span<const float> logits);

  int32_t vocab_size() const { return static_cast<int32_t>(logits_.size()); }
  // -inf for tokens out of play and for ids outside [0, vocab_size).
  float logit(int32_t token) const {
    return in_range(token) ? logits_[static_cast<size_t>(token)] : kOut;
  }
  // Ignored for ids outside the vocabulary and tokens already out of play. +inf is stored as the
  // largest finite float and NaN as -inf, so the distribution stays well defined.
  void set_logit(int32_t token, float value) {
    if (!in_range(token)) return;
    float& slot = logits_[static_cast<size_t>(token)];
    if (slot != kOut) slot = sanitize(value);
  }
  // The whole row, -inf where out of play.
  std::span<const float> logits() const { return logits_; }
  // Ids in play, ascending. May also hold ids set to -inf since the last keep_if(); they carry no
  // probability.
  std::span<const int32_t> ids() const { return ids_; }

  // Keeps the ids for which keep(token, logit) is true; the others go to -inf.
  template <typename Keep>
  void keep_if(Keep&& keep) {
    size_t kept = 0;
    for (const int32_t id : ids_) {
      float& slot = logits_[static_cast<size_t>(id)];
      if (slot != kOut && keep(id, slot)) {
        ids_[kept++] = id;
      } else {
        slot = kOut;
      }
    }
    ids_.resize(kept);
  }
  // Keeps the ids whose bit is set in `allowed` (bit t % 64 of word t / 64; ids past its
  // words go): a token mask, applied a word at a time rather than an id at a time.
  void keep_allowed(std::span<const uint64_t> allowed);
  // logit = f(logit) for every id in play (same sanitizing as set_logit).
  template <typename F>
  void transform(F&& f) {
    const auto update = [&f](float& slot) {
      if (slot != kOut) slot = sanitize(f(slot));
    };
    if (ids_.size() == logits_.size()) {
      for (float& slot : logits_) update(slot);  // all in play: a contiguous pass, which vectorizes
    } else {
      for (const int32_t id : ids_) update(logits_[static_cast<size_t>(id)]);
    }
  }

 private:
  static constexpr float kOut = -std::numeric_limits<float>::infinity();
  bool in_range(int32_t token) const {
    return token >= 0 && static_cast<size_t>(token) < logits_.size();
  }
  // ids_ = every token whose logit is not -inf, ascending.
  void collect_ids();
  static float sanitize(float value) {
    if (value != value) return kOut;  // NaN
    return value > std::numeric_limits<float>::max() ? std::numeric_limits<float>::max() : value;
  }

  std::vector<float> logits_;
  std::vector<int32_t> ids_;
};

// One step of the chain. Processors may keep scratch state (they are not shared between Samplers)
// and fail with a Status, which the Sampler prefixes with name().
class LogitProcessor {
 public:
  virtual ~LogitProcessor() = default;
  virtual std::string_view name() const = 0;
  virtual Status apply(const TokenHistory& history, Candidates& candidates) = 0;
};

using LogitProcessorChain = std::vector<std::unique_ptr<LogitProcessor>>;

// The chain `params` asks for, in the order above; steps that would do nothing are left out.
// To add a processor of your own, insert it where it belongs (find the neighbours by name():
// "logit_bias", "repetition_penalty", "frequency_presence_penalty", "no_repeat_ngram",
// "temperature", "top_k", "top_p", "min_p", "typical_p") and pass the chain to Sampler::create.
Result<LogitProcessorChain> make_logit_processors(const SamplingParams& params);

// Samples one sequence. Not thread-safe; one Sampler per sequence (it holds that sequence's
// random state and scratch sized to the vocabulary).
class Sampler {
 public:
  // Fails on invalid params, a vocab_size outside [1, 2^20], or logit_bias ids outside it.
  static Result<Sampler> create(const SamplingParams& params, int32_t vocab_size);
  static Result<Sampler> create(const SamplingParams& params, int32_t vocab_size,
                                LogitProcessorChain processors);

  // `logits` is one row of vocab_size entries (NaN or +inf in it is an error). History ids must
  // lie in [0, vocab_size) and prompt_length must not exceed the history.
  Result<SampledToken> sample(std::span<const float> logits, const TokenHistory& history);

  // Speculative decoding's check of a token a proposer drafted for this position: greedy, the
  // token sample() gives. Sampling (the rejection scheme of Leviathan et al. 2023 and Chen et al.
  // 2023), with p the processed distribution and q the proposer's: `draft` is kept with
  // probability min(1, p(draft) / q(draft)), else a token is drawn from max(0, p - q)
  // renormalised, so the token follows p whatever q is. `draft_probabilities` is q, one entry per
  // vocabulary token; empty, the draft was certain (q puts all its mass on it).
  Result<SampledToken> sample_given_draft(std::span<const float> logits, const TokenHistory& history, int32_t draft,
                                          std::span<const float> draft_probabilities = {});

  // The uniform in [0, 1) that the next draw would take, advancing this Sampler's generator as
  // that draw would: for a device that runs the chain and the draw itself (the generator's
  // on-device sampling, src/genai/device_sampling.h), so that a seed gives the same tokens there.
  double next_uniform();

 private:
  Sampler(const SamplingParams& params, int32_t vocab_size, LogitProcessorChain processors);
  Status check_inputs(std::span<const float> logits, const TokenHistory& history) const;
  Status process(std::span<const float> logits, const TokenHistory& history);
  SampledToken result_for(int32_t token, std::span<const float> raw_logits);
  void report_logprobs(std::span<const float> raw_logits, SampledToken& result);

  int32_t vocab_size_ = 0;
  bool greedy_ = false;
  bool logprobs_ = false;
  size_t top_logprobs_ = 0;
  LogprobSource logprob_source_ = LogprobSource::kRaw;
  LogitProcessorChain processors_;
  Candidates candidates_;
  std::array<uint64_t, 4> rng_state_{};  // SFC64 (src/genai/sampling/random.h)
  std::vector<float> weights_;           // scratch for draw() and logprobs, one per candidate
};

}  // namespace onnx_genai
