// Normalizers: rewrite a text section before pre-tokenization.
#include <functional>

#include "tokenizer/components.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace onnx_genai::tokenizer {
namespace {

// Replaces every match of `regex` in `text` by `content`.
Result<std::string> replace_all(const Regex& regex, std::string_view text, std::string_view content) {
  std::vector<Match> matches;
  OG_RETURN_IF_ERROR(regex.find_all(text, matches));
  std::string out;
  out.reserve(text.size());
  size_t previous = 0;
  for (const Match& m : matches) {
    out.append(text.substr(previous, m.begin - previous));
    out.append(content);
    previous = m.end;
  }
  out.append(text.substr(previous));
  return out;
}

// A normalizer that is a plain function of the text.
class FunctionNormalizer : public Normalizer {
 public:
  explicit FunctionNormalizer(std::function<std::string(std::string_view)> fn) : fn_(std::move(fn)) {}
  Result<std::string> normalize(std::string_view text) const override { return fn_(text); }

 private:
  std::function<std::string(std::string_view)> fn_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(Regex regex, std::string content) : regex_(std::move(regex)), content_(std::move(content)) {}
  Result<std::string> normalize(std::string_view text) const override { return replace_all(regex_, text, content_); }

 private:
  Regex regex_;
  std::string content_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  Result<std::string> normalize(std::string_view text) const override {
    std::string current(text);
    for (const auto& step : steps_) {
      OG_ASSIGN_OR_RETURN(current, step->normalize(current));
    }
    return current;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

std::string strip_accents(std::string_view text, bool nonspacing_only) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    const char32_t cp = unicode::next_code_point(text, i);
    const bool drop = nonspacing_only ? unicode::category(cp) == unicode::Category::Mn : unicode::is_mark(cp);
    if (!drop) out.append(text.substr(start, i - start));
  }
  return out;
}

bool is_bert_control(char32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  const unicode::Category c = unicode::category(cp);
  return c == unicode::Category::Cc || c == unicode::Category::Cf || c == unicode::Category::Co ||
         c == unicode::Category::Cs;
}

// Only BMP code points count: the reference walks UTF-16 code units here.
bool is_chinese_char(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0xF900 && cp <= 0xFAFF);
}

std::string bert_normalize(std::string_view text, bool clean_text, bool chinese_chars, bool lowercase,
                           int strip_accents_mode) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    const char32_t cp = unicode::next_code_point(text, i);
    if (clean_text) {
      if (cp == 0 || cp == 0xFFFD || is_bert_control(cp)) continue;
      if (cp < 0x10000 && unicode::is_js_space(cp)) {
        out += ' ';
        continue;
      }
    }
    if (chinese_chars && is_chinese_char(cp)) {
      out += ' ';
      out.append(text.substr(start, i - start));
      out += ' ';
      continue;
    }
    out.append(text.substr(start, i - start));
  }
  // strip_accents: 1 = true, 0 = false, -1 = unset (follows lowercase).
  const bool strip = strip_accents_mode == 1 || (lowercase && strip_accents_mode != 0);
  if (lowercase) out = unicode::to_lower(out);
  if (strip) out = strip_accents(unicode::normalize(out, unicode::Form::kNFD), /*nonspacing_only=*/true);
  return out;
}

// The JavaScript reference's stand-in for a SentencePiece charsmap: drop control characters,
// map space-like characters to ' ', then NFKC (which it skips across U+FF5E).
std::string precompiled_normalize(std::string_view text) {
  std::string mapped;
  mapped.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    const char32_t cp = unicode::next_code_point(text, i);
    if ((cp >= 0x1 && cp <= 0x8) || cp == 0xB || (cp >= 0xE && cp <= 0x1F) || cp == 0x7F || cp == 0x8F ||
        cp == 0x9F) {
      continue;
    }
    if (cp == 0x9 || cp == 0xA || cp == 0xC || cp == 0xD || cp == 0xA0 || cp == 0x1680 ||
        (cp >= 0x2000 && cp <= 0x200F) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
        cp == 0x2581 || cp == 0x3000 || cp == 0xFEFF || cp == 0xFFFD) {
      mapped += ' ';
      continue;
    }
    mapped.append(text.substr(start, i - start));
  }
  static constexpr std::string_view kWaveDash = "\xEF\xBD\x9E";  // U+FF5E
  std::string out;
  size_t previous = 0;
  for (size_t hit = mapped.find(kWaveDash); hit != std::string::npos; hit = mapped.find(kWaveDash, previous)) {
    out += unicode::normalize(std::string_view(mapped).substr(previous, hit - previous), unicode::Form::kNFKC);
    out += kWaveDash;
    previous = hit + kWaveDash.size();
  }
  out += unicode::normalize(std::string_view(mapped).substr(previous), unicode::Form::kNFKC);
  return out;
}

std::unique_ptr<Normalizer> function_normalizer(std::function<std::string(std::string_view)> fn) {
  return std::make_unique<FunctionNormalizer>(std::move(fn));
}

std::unique_ptr<Normalizer> unicode_normalizer(unicode::Form form) {
  return function_normalizer([form](std::string_view text) { return unicode::normalize(text, form); });
}

int optional_bool(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_boolean()) return -1;
  return it->get<bool>() ? 1 : 0;
}

}  // namespace

Result<std::unique_ptr<Normalizer>> create_normalizer(const Json& config) {
  if (config.is_null()) return std::unique_ptr<Normalizer>();
  if (!config.is_object()) return OG_ERROR("normalizer: expected an object, got ", config.dump());
  OG_ASSIGN_OR_RETURN(const std::string type, json_string(config, "type", "normalizer"));
  if (type == "NFC") return unicode_normalizer(unicode::Form::kNFC);
  if (type == "NFD") return unicode_normalizer(unicode::Form::kNFD);
  if (type == "NFKC") return unicode_normalizer(unicode::Form::kNFKC);
  if (type == "NFKD") return unicode_normalizer(unicode::Form::kNFKD);
  if (type == "Lowercase") return function_normalizer([](std::string_view t) { return unicode::to_lower(t); });
  if (type == "StripAccents") return function_normalizer([](std::string_view t) { return strip_accents(t, false); });
  if (type == "Precompiled") return function_normalizer(precompiled_normalize);
  if (type == "Prepend") {
    OG_ASSIGN_OR_RETURN(std::string prepend, json_string(config, "prepend", "Prepend normalizer"));
    return function_normalizer([prepend](std::string_view t) { return prepend + std::string(t); });
  }
  if (type == "Strip") {
    const bool left = json_bool_or(config, "strip_left", false);
    const bool right = json_bool_or(config, "strip_right", false);
    return function_normalizer([left, right](std::string_view t) {
      if (left) t = js_trim_start(t);
      if (right) t = js_trim_end(t);
      return std::string(t);
    });
  }
  if (type == "BertNormalizer") {
    const bool clean_text = json_bool_or(config, "clean_text", false);
    const bool chinese = json_bool_or(config, "handle_chinese_chars", false);
    const bool lowercase = json_bool_or(config, "lowercase", false);
    const int strip = optional_bool(config, "strip_accents");
    return function_normalizer([=](std::string_view t) { return bert_normalize(t, clean_text, chinese, lowercase, strip); });
  }
  if (type == "Replace") {
    auto pattern = config.find("pattern");
    if (pattern == config.end()) return OG_ERROR("Replace normalizer: missing \"pattern\"");
    OG_ASSIGN_OR_RETURN(Regex regex, compile_pattern(*pattern, "Replace normalizer"));
    return std::unique_ptr<Normalizer>(
        std::make_unique<ReplaceNormalizer>(std::move(regex), json_string_or(config, "content", "")));
  }
  if (type == "Sequence") {
    auto list = config.find("normalizers");
    if (list == config.end() || !list->is_array()) return OG_ERROR("Sequence normalizer: missing \"normalizers\" array");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const Json& item : *list) {
      OG_ASSIGN_OR_RETURN(auto step, create_normalizer(item));
      if (step) steps.push_back(std::move(step));
    }
    return std::unique_ptr<Normalizer>(std::make_unique<SequenceNormalizer>(std::move(steps)));
  }
  return OG_ERROR("unknown normalizer type \"", type, "\"");
}

}  // namespace onnx_genai::tokenizer
