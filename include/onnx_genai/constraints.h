// Structured output: constrain generation to a JSON Schema, any JSON object, a regular
// expression or a Lark-style grammar, as a mask over the model's vocabulary at every step.
//
//   auto vocab = ConstraintVocabulary::create(tokenizer, 151936, {eos_id}).value();
//   auto compiled = CompiledConstraint::compile({ConstraintKind::kJsonSchema, schema_text}, vocab).value();
//   ConstraintMatcher matcher(compiled);                // one per sequence
//   std::vector<uint64_t> mask(matcher.mask_words());
//   matcher.compute_mask(mask);                         // bit t set: token t may come next
//   matcher.accept_token(sampled);                      // advance; fails on a masked-out token
//
// A token is allowed iff its bytes keep the text a prefix of some sentence of the language;
// special tokens never are, stop tokens (EOS) only when the text is a whole sentence. A Lark
// grammar may name tokens (<|im_end|>, <[151645]>): those are allowed by id where the grammar
// takes them, and never by their bytes.
// Constraints the engine cannot enforce exactly (an unsupported JSON Schema keyword, a regex
// lookahead) fail to compile, naming the keyword and where it is; nothing is silently loosened.
// The engine and its limits: docs/constraints.md.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "onnx_genai/status.h"
#include "onnx_genai/tokenizer.h"

namespace onnx_genai {

namespace constraints {
class TokenTrie;
struct CompiledState;
}  // namespace constraints

enum class ConstraintKind {
  kJsonSchema,  // text: a JSON Schema (draft 2020-12 or draft-07 subset)
  kJsonObject,  // any JSON object (OpenAI's response_format {"type": "json_object"}); text unused
  kRegex,       // text: an ECMAScript regular expression the whole output must match
  kLarkGrammar, // text: a Lark-style grammar (llguidance's dialect) whose start rule the output must match
};

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kJsonSchema;
  std::string text;
  // JSON kinds: at most one space between tokens, no newlines, instead of up to 32 whitespace
  // characters. For output a program reads (a forced tool call): no tokens spent on layout.
  bool compact_json = false;
};

// A tokenizer's vocabulary as bytes (a trie); build once per model and share.
class ConstraintVocabulary {
 public:
  // `vocab_size` is the logits width; `stop_ids` end generation (allowed only on complete text).
  static Result<std::shared_ptr<const ConstraintVocabulary>> create(const Tokenizer& tokenizer, int32_t vocab_size,
                                                                    std::vector<int32_t> stop_ids);
  ~ConstraintVocabulary();
  int32_t vocab_size() const;
  // The bytes token `id` adds to the text; empty for special, stop and unknown tokens.
  const std::string& token_bytes(int32_t id) const;
  size_t trie_nodes() const;
  const constraints::TokenTrie& trie() const { return *trie_; }
  // The token whose text is exactly `text`, for texts of the form <...> (<|im_end|>, <tool_call>):
  // what a grammar's token references name.
  std::optional<int32_t> token_named(std::string_view text) const;

 private:
  ConstraintVocabulary() = default;
  std::unique_ptr<constraints::TokenTrie> trie_;
  std::map<std::string, int32_t, std::less<>> angle_tokens_;
};

// A constraint compiled against a vocabulary. Shared by every sequence using it, across
// threads: the parser states and masks it learns are cached for all of them, and threads
// computing masks of different states do not wait for one another.
class CompiledConstraint {
 public:
  static Result<std::shared_ptr<CompiledConstraint>> compile(const ConstraintSpec& spec,
                                                             std::shared_ptr<const ConstraintVocabulary> vocabulary);
  ~CompiledConstraint();
  const ConstraintVocabulary& vocabulary() const { return *vocabulary_; }
  // The language is empty (the schema false, a $ref loop that never reaches a value): every
  // mask is empty, so a generator must refuse it up front.
  bool matches_nothing() const { return matches_nothing_; }
  constraints::CompiledState& state() { return *state_; }

 private:
  CompiledConstraint() = default;
  std::shared_ptr<const ConstraintVocabulary> vocabulary_;
  std::unique_ptr<constraints::CompiledState> state_;
  bool matches_nothing_ = false;
};

// The constraints compiled lately against one vocabulary, by spec (least recently used dropped
// past `capacity`): requests repeating a schema, as a server's clients do, share one
// CompiledConstraint and so the states and masks it learned. Thread-safe.
class ConstraintCache {
 public:
  explicit ConstraintCache(std::shared_ptr<const ConstraintVocabulary> vocabulary, size_t capacity = 16);
  ~ConstraintCache();
  const std::shared_ptr<const ConstraintVocabulary>& vocabulary() const { return vocabulary_; }
  // The cached constraint for `spec`, or a new one compiled (errors are not kept).
  Result<std::shared_ptr<CompiledConstraint>> compile(const ConstraintSpec& spec);
  size_t hits() const;

 private:
  struct Entries;
  std::shared_ptr<const ConstraintVocabulary> vocabulary_;
  std::unique_ptr<Entries> entries_;
};

// One sequence's position in the language.
class ConstraintMatcher {
 public:
  explicit ConstraintMatcher(std::shared_ptr<CompiledConstraint> compiled);

  // 64-bit words a mask needs: ceil(vocab_size / 64).
  size_t mask_words() const;
  // Sets bit t of `mask` (word t / 64, bit t % 64) iff token t may come next.
  Status compute_mask(std::span<uint64_t> mask);
  // Advances by one token; fails, leaving the matcher unchanged, on a token the mask refuses.
  Status accept_token(int32_t id);
  // Advances by raw text (a forced prefix, or tests feeding bytes); fails like accept_token.
  Status accept_bytes(std::string_view bytes);
  // Whether the text so far is a whole sentence (a stop token may come now).
  bool is_complete() const;
  // The bytes every continuation of the text begins with, up to `most`: walks on while exactly
  // one byte may come next and nothing else may (the text is not complete, so no stop token; no
  // token the grammar names). Empty where several bytes may follow or the text may end, e.g. where
  // a terminal may end or go on. What generation may draft without sampling (fast-forward);
  // the matcher does not move.
  Result<std::string> forced_bytes(size_t most) const;
  // Whether a stop token was accepted: nothing but another stop token may follow.
  bool is_terminated() const { return history_.back().terminated; }
  // Undoes the last `count` accept_token / accept_bytes calls.
  Status rollback(size_t count);
  // Calls accepted so far (what rollback can undo).
  size_t accepted() const { return history_.size() - 1; }

 private:
  struct Step {
    int32_t state;
    bool terminated;
  };
  std::shared_ptr<CompiledConstraint> compiled_;
  std::vector<Step> history_;
};

}  // namespace onnx_genai
