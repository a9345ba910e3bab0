// Hugging Face tokenizer.json tokenizers: encode text to token ids and decode ids to text,
// with ids identical to Hugging Face's. Also a streaming detokenizer for generation.
//
//   auto tok = Tokenizer::load("path/to/model_dir");   // tokenizer.json (+ tokenizer_config.json)
//   auto ids = (*tok)->encode("Hello world");          // Result<std::vector<int32_t>>
//   auto text = (*tok)->decode(*ids);                  // Result<std::string>
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai {

struct EncodeOptions {
  // Add the post-processor's special tokens (e.g. BOS). Special tokens written in the text are
  // recognized either way.
  bool add_special_tokens = true;
};

struct DecodeOptions {
  bool skip_special_tokens = false;
  // Remove spaces before punctuation (" ." -> "."); unset means tokenizer_config.json's
  // clean_up_tokenization_spaces, which defaults to true.
  std::optional<bool> clean_up_tokenization_spaces;
};

class Tokenizer {
 public:
  // Loads `dir`/tokenizer.json and, when present, `dir`/tokenizer_config.json. `path` may also
  // name a tokenizer.json file directly.
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& path);
  // From in-memory JSON texts; `config_json` may be empty.
  static Result<std::unique_ptr<Tokenizer>> from_json(std::string_view tokenizer_json,
                                                      std::string_view config_json = {});
  ~Tokenizer();

  // Fails on text that is not valid UTF-8 (naming the byte offset): Hugging Face tokenizers only
  // accept Unicode strings, so there is no reference behaviour to imitate for broken bytes.
  Result<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Fails on ids outside the vocabulary. Invalid UTF-8 produced by byte tokens is replaced by
  // U+FFFD per maximal ill-formed subsequence, as Hugging Face's decoders do.
  Result<std::string> decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  // The bytes token `id` adds to a text it continues (byte tokens as raw bytes, which may be
  // part of a UTF-8 character; added tokens as their content). Empty for ids outside the vocabulary.
  std::string token_bytes(int32_t id) const;

  // Number of ids (largest id + 1, added tokens included).
  int32_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Empty when the id is outside the vocabulary or has no token.
  std::string_view id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;
  // bos/eos/pad/unk tokens named in tokenizer_config.json (nullopt when absent).
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns ids into text one id at a time during generation. Each put() returns the text that
// became final with that id: never a partial UTF-8 character, and the concatenation of all
// pieces plus flush() equals tokenizer.decode(all ids).
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, DecodeOptions options = {});

  Result<std::string> put(int32_t id);
  // Whatever is still held back (an incomplete character at the very end decodes as U+FFFD).
  Result<std::string> flush();
  void reset();

 private:
  const Tokenizer& tokenizer_;
  DecodeOptions options_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;  // ids_[prefix_offset_, read_offset_) is context already emitted
  size_t read_offset_ = 0;
};

}  // namespace onnx_genai
