// Pre-tokenizers: split a normalized section into the words the model encodes one by one.
// Where Hugging Face's JavaScript and Rust implementations disagree on a feature that none
// of the conformance tokenizers uses (Split behaviors other than Isolated/Removed, Metaspace
// "split", Punctuation grouping), the Rust semantics are implemented.
#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/components.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace onnx_genai::tokenizer {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t begin;
  size_t end;
  bool is_delimiter;
};

// Applies a split behavior to the spans of `text` (Rust tokenizers' SplitDelimiterBehavior).
void split_spans(std::string_view text, const std::vector<Span>& spans, Behavior behavior,
                 std::vector<std::string>& out) {
  std::vector<std::pair<size_t, size_t>> pieces;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_delimiter) pieces.emplace_back(s.begin, s.end);
      }
      break;
    case Behavior::kIsolated:
      for (const Span& s : spans) pieces.emplace_back(s.begin, s.end);
      break;
    case Behavior::kMergedWithPrevious: {
      bool previous_delimiter = false;
      for (const Span& s : spans) {
        if (s.is_delimiter && !previous_delimiter && !pieces.empty()) {
          pieces.back().second = s.end;
        } else {
          pieces.emplace_back(s.begin, s.end);
        }
        previous_delimiter = s.is_delimiter;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous_delimiter = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_delimiter && !previous_delimiter && !pieces.empty()) {
          pieces.back().first = it->begin;
        } else {
          pieces.emplace_back(it->begin, it->end);
        }
        previous_delimiter = it->is_delimiter;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
    case Behavior::kContiguous: {
      bool previous_delimiter = false;
      for (const Span& s : spans) {
        if (s.is_delimiter == previous_delimiter && !pieces.empty()) {
          pieces.back().second = s.end;
        } else {
          pieces.emplace_back(s.begin, s.end);
        }
        previous_delimiter = s.is_delimiter;
      }
      break;
    }
  }
  for (const auto& [begin, end] : pieces) {
    if (end > begin) out.emplace_back(text.substr(begin, end - begin));
  }
}

// Spans of `text` given the (non-overlapping, ordered) delimiter matches.
std::vector<Span> spans_from_matches(std::string_view text, const std::vector<Match>& matches, bool invert) {
  std::vector<Span> spans;
  size_t previous = 0;
  for (const Match& m : matches) {
    if (m.end == m.begin) continue;
    if (m.begin > previous) spans.push_back({previous, m.begin, invert});
    spans.push_back({m.begin, m.end, !invert});
    previous = m.end;
  }
  if (previous < text.size()) spans.push_back({previous, text.size(), invert});
  return spans;
}

// Splits every piece at the matches of a regex.
class RegexSplit : public PreTokenizer {
 public:
  RegexSplit(Regex regex, Behavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}

  Status pre_tokenize(std::vector<std::string>& pieces, int) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size());
    std::vector<Match> matches;
    for (const std::string& piece : pieces) {
      matches.clear();
      OG_RETURN_IF_ERROR(regex_.find_all(piece, matches));
      split_spans(piece, spans_from_matches(piece, matches, invert_), behavior_, out);
    }
    pieces = std::move(out);
    return Status::ok();
  }

 private:
  Regex regex_;
  Behavior behavior_;
  bool invert_;
};

// Keeps only the matches of a regex (the "find all words" pre-tokenizers).
class RegexMatches : public PreTokenizer {
 public:
  explicit RegexMatches(Regex regex) : regex_(std::move(regex)) {}

  Status pre_tokenize(std::vector<std::string>& pieces, int) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size());
    std::vector<Match> matches;
    for (const std::string& piece : pieces) {
      matches.clear();
      OG_RETURN_IF_ERROR(regex_.find_all(piece, matches));
      for (const Match& m : matches) {
        if (m.end > m.begin) out.push_back(piece.substr(m.begin, m.end - m.begin));
      }
    }
    pieces = std::move(out);
    return Status::ok();
  }

 private:
  Regex regex_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<RegexMatches> words)
      : add_prefix_space_(add_prefix_space), words_(std::move(words)) {}

  Status pre_tokenize(std::vector<std::string>& pieces, int section_index) const override {
    if (add_prefix_space_) {
      for (std::string& piece : pieces) {
        if (piece.empty() || piece[0] != ' ') piece.insert(0, 1, ' ');
      }
    }
    if (words_) OG_RETURN_IF_ERROR(words_->pre_tokenize(pieces, section_index));
    for (std::string& piece : pieces) piece = bytes_to_chars(piece);
    return Status::ok();
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<RegexMatches> words_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}

  Status pre_tokenize(std::vector<std::string>& pieces, int section_index) const override {
    std::vector<std::string> out;
    for (const std::string& piece : pieces) {
      std::string text;
      text.reserve(piece.size() + replacement_.size());
      for (char c : piece) {
        if (c == ' ') {
          text += replacement_;
        } else {
          text += c;
        }
      }
      const bool prepend = scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && section_index == 0);
      if (prepend && text.compare(0, replacement_.size(), replacement_) != 0) text.insert(0, replacement_);
      if (!split_) {
        out.push_back(std::move(text));
        continue;
      }
      // Split before each replacement character (MergedWithNext).
      size_t start = 0;
      for (size_t hit = text.find(replacement_, 1); hit != std::string::npos; hit = text.find(replacement_, hit + 1)) {
        if (hit > start) out.push_back(text.substr(start, hit - start));
        start = hit;
      }
      if (start < text.size()) out.push_back(text.substr(start));
    }
    pieces = std::move(out);
    return Status::ok();
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  Status pre_tokenize(std::vector<std::string>& pieces, int section_index) const override {
    for (const auto& step : steps_) OG_RETURN_IF_ERROR(step->pre_tokenize(pieces, section_index));
    return Status::ok();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

Result<Behavior> parse_behavior(const Json& config, const char* component, Behavior fallback) {
  auto it = config.find("behavior");
  if (it == config.end() || it->is_null()) return fallback;
  const std::string name = it->is_string() ? it->get<std::string>() : it->dump();
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  return OG_ERROR(component, ": unknown behavior \"", name, "\"");
}

Result<std::unique_ptr<PreTokenizer>> regex_split(const std::string& pattern, Behavior behavior, bool invert = false) {
  OG_ASSIGN_OR_RETURN(Regex regex, Regex::compile(pattern));
  return std::unique_ptr<PreTokenizer>(std::make_unique<RegexSplit>(std::move(regex), behavior, invert));
}

// Unicode punctuation plus every ASCII symbol, as Rust's is_punctuation sees it.
const std::string kPunctuation = "\\p{P}\\x{21}-\\x{2F}\\x{3A}-\\x{40}\\x{5B}-\\x{60}\\x{7B}-\\x{7E}";

Result<std::unique_ptr<PreTokenizer>> create_sequence(const Json& config) {
  auto list = config.find("pretokenizers");
  if (list == config.end() || !list->is_array()) return OG_ERROR("Sequence pre_tokenizer: missing \"pretokenizers\" array");
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (const Json& item : *list) {
    OG_ASSIGN_OR_RETURN(auto step, create_pre_tokenizer(item));
    if (step) steps.push_back(std::move(step));
  }
  return std::unique_ptr<PreTokenizer>(std::make_unique<SequencePreTokenizer>(std::move(steps)));
}

Result<std::unique_ptr<PreTokenizer>> create_metaspace(const Json& config) {
  std::string replacement = json_string_or(config, "replacement", "\xE2\x96\x81");
  PrependScheme scheme = json_bool_or(config, "add_prefix_space", true) ? PrependScheme::kAlways : PrependScheme::kNever;
  if (auto it = config.find("prepend_scheme"); it != config.end() && it->is_string()) {
    const std::string name = it->get<std::string>();
    if (name == "always") {
      scheme = PrependScheme::kAlways;
    } else if (name == "first") {
      scheme = PrependScheme::kFirst;
    } else if (name == "never") {
      scheme = PrependScheme::kNever;
    } else {
      return OG_ERROR("Metaspace pre_tokenizer: unknown prepend_scheme \"", name, "\"");
    }
  }
  return std::unique_ptr<PreTokenizer>(
      std::make_unique<MetaspacePreTokenizer>(std::move(replacement), scheme, json_bool_or(config, "split", true)));
}

Result<std::unique_ptr<PreTokenizer>> create_byte_level(const Json& config) {
  std::unique_ptr<RegexMatches> words;
  if (json_bool_or(config, "use_regex", true)) {
    const std::string space = kJsSpaceClass;
    OG_ASSIGN_OR_RETURN(Regex regex, Regex::compile("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + space +
                                                    "\\p{L}\\p{N}]+|[" + space + "]+(?![^" + space + "])|[" +
                                                    space + "]+"));
    words = std::make_unique<RegexMatches>(std::move(regex));
  }
  return std::unique_ptr<PreTokenizer>(
      std::make_unique<ByteLevelPreTokenizer>(json_bool_or(config, "add_prefix_space", false), std::move(words)));
}

}  // namespace

Result<std::unique_ptr<PreTokenizer>> create_pre_tokenizer(const Json& config) {
  if (config.is_null()) return std::unique_ptr<PreTokenizer>();
  if (!config.is_object()) return OG_ERROR("pre_tokenizer: expected an object, got ", config.dump());
  OG_ASSIGN_OR_RETURN(const std::string type, json_string(config, "type", "pre_tokenizer"));
  const std::string space = kWhiteSpaceClass;
  if (type == "Sequence") return create_sequence(config);
  if (type == "ByteLevel") return create_byte_level(config);
  if (type == "Metaspace") return create_metaspace(config);
  if (type == "Split") {
    auto pattern = config.find("pattern");
    if (pattern == config.end()) return OG_ERROR("Split pre_tokenizer: missing \"pattern\"");
    OG_ASSIGN_OR_RETURN(Regex regex, compile_pattern(*pattern, "Split pre_tokenizer"));
    OG_ASSIGN_OR_RETURN(Behavior behavior, parse_behavior(config, "Split pre_tokenizer", Behavior::kIsolated));
    return std::unique_ptr<PreTokenizer>(
        std::make_unique<RegexSplit>(std::move(regex), behavior, json_bool_or(config, "invert", false)));
  }
  if (type == "Digits") {
    const bool individual = json_bool_or(config, "individual_digits", false);
    return regex_split("[0-9]", individual ? Behavior::kIsolated : Behavior::kContiguous);
  }
  if (type == "Punctuation") {
    OG_ASSIGN_OR_RETURN(Behavior behavior, parse_behavior(config, "Punctuation pre_tokenizer", Behavior::kIsolated));
    return regex_split("[" + kPunctuation + "]", behavior);
  }
  if (type == "WhitespaceSplit") return regex_split("[" + space + "]+", Behavior::kRemoved);
  if (type == "Whitespace") {
    const std::string word = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";
    OG_ASSIGN_OR_RETURN(Regex regex, Regex::compile("[" + word + "]+|[^" + word + space + "]+"));
    return std::unique_ptr<PreTokenizer>(std::make_unique<RegexMatches>(std::move(regex)));
  }
  if (type == "BertPreTokenizer") {
    OG_ASSIGN_OR_RETURN(Regex regex, Regex::compile("[^" + space + kPunctuation + "]+|[" + kPunctuation + "]"));
    return std::unique_ptr<PreTokenizer>(std::make_unique<RegexMatches>(std::move(regex)));
  }
  return OG_ERROR("unknown pre_tokenizer type \"", type, "\"");
}

}  // namespace onnx_genai::tokenizer
