#include "genai/forced_text.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace onnx_genai::genai {

namespace {

// `text` without a UTF-8 character cut short at its end (the byte cap can split one); the
// tokenizer takes whole characters.
std::string_view whole_characters(std::string_view text) {
  size_t lead = text.size();
  while (lead > 0 && (static_cast<uint8_t>(text[lead - 1]) & 0xC0) == 0x80) --lead;
  if (lead == 0) return text;
  const auto first = static_cast<uint8_t>(text[lead - 1]);
  const size_t length = first < 0x80 ? 1 : first >= 0xF0 ? 4 : first >= 0xE0 ? 3 : 2;
  return lead - 1 + length > text.size() ? text.substr(0, lead - 1) : text;
}

}  // namespace

Status ForcedTextProposer::follow(std::span<const int32_t> generated) {
  const auto shared = static_cast<size_t>(
      std::mismatch(followed_.begin(), followed_.end(), generated.begin(), generated.end()).first - followed_.begin());
  if (shared < followed_.size()) {
    OG_RETURN_IF_ERROR(matcher_.rollback(followed_.size() - shared));
    followed_.resize(shared);
  }
  for (size_t k = shared; k < generated.size(); ++k) {
    OG_RETURN_IF_ERROR(matcher_.accept_token(generated[k]).with_context("fast-forward"));
    followed_.push_back(generated[k]);
  }
  return Status::ok();
}

Status ForcedTextProposer::propose(const TokenHistory& history, int32_t count, Draft& draft) {
  draft.clear();
  OG_RETURN_IF_ERROR(follow(history.generated()));
  OG_ASSIGN_OR_RETURN(const std::string forced_bytes, matcher_.forced_bytes(kMostForcedBytes));
  const std::string_view forced = whole_characters(forced_bytes);
  // After a token that ended inside a character, the forced bytes begin with its rest: no text
  // to encode.
  if (forced.empty() || unicode::find_invalid_utf8(forced)) return Status::ok();
  EncodeOptions options;
  options.add_special_tokens = false;
  OG_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, tokenizer_.encode(forced, options));
  // Tokens whose bytes are not the forced text's next ones end the draft: a special token the
  // text spells, a space a SentencePiece encoding puts before the first word.
  size_t at = 0;
  for (const int32_t id : ids) {
    if (static_cast<int32_t>(draft.tokens.size()) == count) break;
    const std::string& bytes = constraint_->vocabulary().token_bytes(id);
    if (bytes.empty() || forced.substr(at, bytes.size()) != bytes) break;
    at += bytes.size();
    draft.tokens.push_back(id);
  }
  return Status::ok();
}

}  // namespace onnx_genai::genai
