#include "genai/text_stream.h"

#include <algorithm>
#include <string_view>

namespace onnx_genai::genai {

namespace {

// Length of the longest end of `text` that some stop string begins with (and is not all of).
size_t possible_stop_start(std::string_view text, const std::vector<std::string>& stop_strings) {
  size_t keep = 0;
  for (const std::string& stop : stop_strings) {
    for (size_t k = std::min(text.size(), stop.size() - 1); k > keep; --k) {
      if (text.ends_with(std::string_view(stop).substr(0, k))) {
        keep = k;
        break;
      }
    }
  }
  return keep;
}

DecodeOptions decode_options(bool skip_special_tokens) {
  DecodeOptions options;
  options.skip_special_tokens = skip_special_tokens;
  return options;
}

}  // namespace

TextStream::TextStream(const Tokenizer& tokenizer, const std::vector<std::string>& stop_strings, bool skip_special_tokens)
    : detokenizer_(tokenizer, decode_options(skip_special_tokens)),
      text_vocab_(tokenizer.vocab_size()),
      stop_strings_(stop_strings) {}

bool TextStream::release(bool check_stops, bool final, std::string& out) {
  if (check_stops) {
    size_t first = std::string::npos;
    for (const std::string& stop : stop_strings_) first = std::min(first, held_.find(stop));
    if (first != std::string::npos) {
      out.append(held_, 0, first);
      held_.clear();
      return true;
    }
  }
  // A held-back end starts like a stop string, so it begins on a character boundary.
  const size_t keep = check_stops && !final ? possible_stop_start(held_, stop_strings_) : 0;
  out.append(held_, 0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return false;
}

Result<bool> TextStream::put(int32_t token, bool check_stops, std::string& out) {
  if (!has_text(token)) return false;
  OG_ASSIGN_OR_RETURN(std::string piece, detokenizer_.put(token));
  held_ += piece;
  return release(check_stops, /*final=*/false, out);
}

Result<bool> TextStream::finish(bool check_stops, std::string& out) {
  OG_ASSIGN_OR_RETURN(std::string rest, detokenizer_.flush());
  held_ += rest;
  return release(check_stops, /*final=*/true, out);
}

Status TextStream::replay(std::span<const int32_t> tokens) {
  detokenizer_.reset();
  held_.clear();
  for (const int32_t token : tokens) {
    if (!has_text(token)) continue;
    OG_ASSIGN_OR_RETURN(std::string ignored, detokenizer_.put(token));
  }
  return Status::ok();
}

}  // namespace onnx_genai::genai
