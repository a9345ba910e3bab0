// The built-in logit processors, one class per step of the default chain. Each is built by
// make_logit_processors() from validated SamplingParams, so constructors do not re-check values.
// History ids outside the vocabulary are skipped here (the Sampler rejects them before the chain
// runs); processors never index out of bounds whoever calls them.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "onnx_genai/sampling.h"

namespace onnx_genai::sampling {

// Adds a fixed bias to chosen tokens (OpenAI logit_bias; transformers' SequenceBiasLogitsProcessor
// for one-token sequences). A -inf bias bans the token.
class LogitBias final : public LogitProcessor {
 public:
  explicit LogitBias(const std::map<int32_t, float>& bias) : bias_(bias.begin(), bias.end()) {}
  std::string_view name() const override { return "logit_bias"; }
  Status apply(const TokenHistory& history, Candidates& candidates) override;

 private:
  std::vector<std::pair<int32_t, float>> bias_;
};

// CTRL's penalty as transformers applies it: once per distinct token of prompt + generated,
// negative logits are multiplied by the penalty and the others divided, so penalty > 1 always
// makes a seen token less likely whatever its sign.
class RepetitionPenalty final : public LogitProcessor {
 public:
  explicit RepetitionPenalty(float penalty) : penalty_(penalty) {}
  std::string_view name() const override { return "repetition_penalty"; }
  Status apply(const TokenHistory& history, Candidates& candidates) override;

 private:
  float penalty_;
  std::vector<uint8_t> seen_;  // per token, cleared again after each apply
};

// OpenAI's penalties as vLLM applies them, over generated tokens only:
// logit -= frequency * count; logit -= presence * (count > 0).
class FrequencyPresencePenalty final : public LogitProcessor {
 public:
  FrequencyPresencePenalty(float frequency, float presence) : frequency_(frequency), presence_(presence) {}
  std::string_view name() const override { return "frequency_presence_penalty"; }
  Status apply(const TokenHistory& history, Candidates& candidates) override;

 private:
  float frequency_;
  float presence_;
  std::vector<uint32_t> counts_;  // per token, cleared again after each apply
};

// transformers' NoRepeatNGramLogitsProcessor: bans every token that would complete an n-gram
// already present in prompt + generated (n = 1 bans every token seen).
class NoRepeatNGram final : public LogitProcessor {
 public:
  explicit NoRepeatNGram(size_t n) : n_(n) {}
  std::string_view name() const override { return "no_repeat_ngram"; }
  Status apply(const TokenHistory& history, Candidates& candidates) override;

 private:
  size_t n_;
};

// logit / temperature.
class Temperature final : public LogitProcessor {
 public:
  explicit Temperature(float temperature) : temperature_(temperature) {}
  std::string_view name() const override { return "temperature"; }
  Status apply(const TokenHistory& history, Candidates& candidates) override;

 private:
  float temperature_;
};

// transformers' TopKLogitsWarper: keeps every token whose logit is >= the k-th largest, so a tie
// at the boundary keeps more than k (vLLM's threshold does the same).
class TopK final : public LogitProcessor {
 public:
  explicit TopK(size_t k) : k_(k) {}
  std::string_view name() const override { return "top_k"; }
  Status apply(const TokenHistory& history, Candidates& candidates) override;

 private:
  size_t k_;
  std::vector<float> values_;
};

// Nucleus sampling as transformers' TopPLogitsWarper: walking tokens from most to least likely,
// a token is kept while the probability of the tokens before it is < p; the result is the smallest
// prefix whose mass reaches p, never empty. Ties are ordered by lower id.
class TopP final : public LogitProcessor {
 public:
  explicit TopP(float p) : p_(p) {}
  std::string_view name() const override { return "top_p"; }
  Status apply(const TokenHistory& history, Candidates& candidates) override;

 private:
  struct Item {
    uint64_t rank;    // rank_key
    uint64_t weight;  // fixed-point unnormalized probability
  };
  float p_;
  std::vector<float> weights_;
  std::vector<Item> items_;
};

// transformers' MinPLogitsWarper: keeps tokens with probability >= min_p * max probability.
class MinP final : public LogitProcessor {
 public:
  explicit MinP(float min_p) : min_p_(min_p) {}
  std::string_view name() const override { return "min_p"; }
  Status apply(const TokenHistory& history, Candidates& candidates) override;

 private:
  float min_p_;
};

// transformers' TypicalLogitsWarper (Meister et al., locally typical sampling): orders tokens by
// |-log p - H| (H the entropy), finds the first position where the running mass reaches `mass`,
// and keeps every token whose distance is <= the distance there.
class TypicalP final : public LogitProcessor {
 public:
  explicit TypicalP(float mass) : mass_(mass) {}
  std::string_view name() const override { return "typical_p"; }
  Status apply(const TokenHistory& history, Candidates& candidates) override;

 private:
  struct Entry {
    double distance;
    uint64_t weight;  // fixed-point unnormalized probability
    int32_t token;
  };
  float mass_;
  std::vector<float> weights_;
  std::vector<Entry> entries_;
};

}  // namespace onnx_genai::sampling
