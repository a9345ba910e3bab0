// Incremental detokenization: decode a short window of ids twice (with and without the newest
// ids) and emit the difference, holding back while the window ends in U+FFFD (an incomplete
// UTF-8 character from byte tokens). The window keeps one already-emitted token of context so
// decoders that treat the first token specially (leading-space strip) stay consistent.
#include "onnx_genai/tokenizer.h"

namespace onnx_genai {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool ends_with_replacement(const std::string& text) {
  return text.size() >= kReplacement.size() &&
         text.compare(text.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
}

}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {}

Result<std::string> StreamingDetokenizer::put(int32_t id) {
  if (id < 0 || id >= tokenizer_.vocab_size()) {
    return OG_ERROR("streaming decode: token id ", id, " is outside the vocabulary (size ", tokenizer_.vocab_size(), ")");
  }
  ids_.push_back(id);
  const std::span<const int32_t> all(ids_);
  OG_ASSIGN_OR_RETURN(const std::string prefix,
                      tokenizer_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), options_));
  OG_ASSIGN_OR_RETURN(const std::string current, tokenizer_.decode(all.subspan(prefix_offset_), options_));
  if (current.size() <= prefix.size() || ends_with_replacement(current)) return std::string();
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return current.substr(prefix.size());
}

Result<std::string> StreamingDetokenizer::flush() {
  const std::span<const int32_t> all(ids_);
  OG_ASSIGN_OR_RETURN(const std::string prefix,
                      tokenizer_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), options_));
  OG_ASSIGN_OR_RETURN(const std::string current, tokenizer_.decode(all.subspan(prefix_offset_), options_));
  reset();
  return current.size() > prefix.size() ? current.substr(prefix.size()) : std::string();
}

void StreamingDetokenizer::reset() {
  ids_.clear();
  prefix_offset_ = read_offset_ = 0;
}

}  // namespace onnx_genai
