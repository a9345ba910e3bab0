// The pipeline stages of a tokenizer.json, in the order text flows through them:
//   added-token split -> Normalizer -> PreTokenizer -> Model -> PostProcessor   (encode)
//   ids -> token strings -> Decoder                                              (decode)
// Each stage is an interface with one implementation per "type" string; create_* builds one
// from its JSON object and names an unknown type in its error. Semantics follow Hugging Face's
// tokenizers as @huggingface/transformers runs them (the reference the tests compare with).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "onnx_genai/status.h"
#include "tokenizer/vocabulary.h"

namespace onnx_genai::tokenizer {

using Json = nlohmann::json;

// Hash that lets string maps be searched with a string_view without building a string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual Result<std::string> normalize(std::string_view text) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits every piece further (or rewrites it). `section_index` is the index of the text
  // section between added tokens, which Metaspace's prepend_scheme "first" looks at.
  virtual Status pre_tokenize(std::vector<std::string>& pieces, int section_index) const = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-token.
  virtual Status encode(std::string_view word, std::vector<int32_t>& ids) const = 0;
  // Whether runs of unknown tokens collapse into one (JavaScript fuses across a whole section).
  virtual bool fuses_unknown() const { return false; }
  // Suffix the decoder turns back into a space (BPE end_of_word_suffix); empty when none.
  virtual std::string_view end_of_word_suffix() const { return {}; }
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// What decoders need to know about the rest of the tokenizer.
struct DecoderContext {
  const std::unordered_set<std::string>* added_tokens = nullptr;  // emitted verbatim by ByteLevel
  // Byte tokens stay raw bytes instead of being decoded as lossy UTF-8 (a token's exact bytes,
  // for grammar constraints, where half a character is a legitimate token).
  bool raw_bytes = false;
};

// `config` null means "no such stage": the factories then return nullptr.
Result<std::unique_ptr<Normalizer>> create_normalizer(const Json& config);
Result<std::unique_ptr<PreTokenizer>> create_pre_tokenizer(const Json& config);
Result<std::unique_ptr<PostProcessor>> create_post_processor(const Json& config, const Vocabulary& vocab);
Result<std::unique_ptr<Decoder>> create_decoder(const Json& config, const DecoderContext& context);

// The "model" object of tokenizer.json as raw JSON text per member (vocab and merges are most
// of the file; each loader reads them in place).
using ModelMembers = std::unordered_map<std::string, std::string_view>;

// Models fill `vocab` with their own tokens.
Result<std::unique_ptr<Model>> load_model(const ModelMembers& members, Vocabulary& vocab);
// Model loaders, one per model type (called by load_model).
Result<std::unique_ptr<Model>> load_bpe_model(const ModelMembers& members, Vocabulary& vocab);
Result<std::unique_ptr<Model>> create_unigram_model(const Json& config, Vocabulary& vocab);
Result<std::unique_ptr<Model>> create_wordpiece_model(const Json& config, Vocabulary& vocab);

// Shared helpers for reading component configs.
Result<std::string> json_string(const Json& config, const char* key, const char* component);
std::string json_string_or(const Json& config, const char* key, std::string fallback);
bool json_bool_or(const Json& config, const char* key, bool fallback);

// A {"String": s} or {"Regex": r} pattern as used by Split and Replace.
class Regex;
Result<Regex> compile_pattern(const Json& pattern, const char* component);

// transformers' clean_up_tokenization (spaces before punctuation and contractions).
std::string clean_up_tokenization(std::string text);

// JavaScript String.prototype.trim / trimStart / trimEnd.
std::string_view js_trim_start(std::string_view s);
std::string_view js_trim_end(std::string_view s);

}  // namespace onnx_genai::tokenizer
