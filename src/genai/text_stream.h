// One sequence's generated text, produced token by token: the tokenizer's streaming
// detokenizer (never a partial UTF-8 character), then stop strings matched across token
// boundaries. Text that could still be the start of a stop string is held back until the next
// tokens decide; when a stop string completes, the text before it is released and the stop
// string itself never is.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "onnx_genai/tokenizer.h"

namespace onnx_genai::genai {

class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, const std::vector<std::string>& stop_strings, bool skip_special_tokens);

  // Adds one generated token; appends the text that became final to `out`. Returns true when a
  // stop string completed (checked only when `check_stops`; unchecked text is released at once).
  // Ids past the tokenizer's vocabulary (a model's padded one: Qwen's 151,936 logits over 151,669
  // tokens) have no text, as Hugging Face's decoders skip them; negative ids are errors.
  Result<bool> put(int32_t token, bool check_stops, std::string& out);
  // The sequence ended: releases what is held back (a stop string in it still stops the text).
  Result<bool> finish(bool check_stops, std::string& out);
  // Starts over as if `tokens` had been put, without producing text (after a rewind).
  Status replay(std::span<const int32_t> tokens);

 private:
  bool release(bool check_stops, bool final, std::string& out);

  // Whether `token` has text: inside the tokenizer's vocabulary (negative ids go on to its error).
  bool has_text(int32_t token) const { return token < text_vocab_; }

  StreamingDetokenizer detokenizer_;
  int32_t text_vocab_;
  const std::vector<std::string>& stop_strings_;
  std::string held_;  // decoded but not yet released
};

}  // namespace onnx_genai::genai
