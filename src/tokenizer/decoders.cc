// Decoders: turn the token strings of a sequence back into text, stage by stage.
#include "tokenizer/byte_level.h"
#include "tokenizer/components.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace onnx_genai::tokenizer {
namespace {

void replace_all_literal(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t previous = 0;
  for (size_t hit = text.find(from); hit != std::string::npos; hit = text.find(from, previous)) {
    out.append(text, previous, hit - previous);
    out.append(to);
    previous = hit + from.size();
  }
  if (previous == 0) return;
  out.append(text, previous);
  text = std::move(out);
}

// Byte-level tokens become bytes again; runs of them are decoded as (lossy) UTF-8. Added
// tokens pass through verbatim, as in the reference.
class ByteLevelDecoder : public Decoder {
 public:
  ByteLevelDecoder(const std::unordered_set<std::string>* added, bool raw) : added_(added), raw_(raw) {}

  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (!bytes.empty()) out.push_back(raw_ ? bytes : unicode::decode_lossy(bytes));
      bytes.clear();
    };
    for (const std::string& token : tokens) {
      if (added_ != nullptr && added_->count(token)) {
        flush();
        out.push_back(token);
        continue;
      }
      for (size_t i = 0; i < token.size();) {
        const int byte = char_to_byte(unicode::next_code_point(token, i));
        bytes.push_back(static_cast<char>(byte < 0 ? 0 : byte));  // the reference maps strays to 0
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  const std::unordered_set<std::string>* added_;
  bool raw_;
};

// Consecutive <0xXX> tokens are gathered and decoded as (lossy) UTF-8.
class ByteFallbackDecoder : public Decoder {
 public:
  explicit ByteFallbackDecoder(bool raw) : raw_(raw) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    for (std::string& token : tokens) {
      const int byte = parse_byte_token(token);
      if (byte >= 0) {
        bytes.push_back(static_cast<char>(byte));
        continue;
      }
      if (!bytes.empty()) out.push_back(raw_ ? bytes : unicode::decode_lossy(bytes));
      bytes.clear();
      out.push_back(std::move(token));
    }
    if (!bytes.empty()) out.push_back(raw_ ? bytes : unicode::decode_lossy(bytes));
    tokens = std::move(out);
  }

 private:
  bool raw_;
  static int parse_byte_token(const std::string& token) {
    if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
    int value = 0;
    for (int k = 3; k < 5; ++k) {
      const char c = token[k];
      const int digit = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                      : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
      if (digit < 0) return -1;
      value = value * 16 + digit;
    }
    return value;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const std::string& t : tokens) joined += t;
    tokens.assign(1, std::move(joined));
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Regex regex, std::string content) : regex_(std::move(regex)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<Match> matches;
    for (std::string& token : tokens) {
      matches.clear();
      if (!regex_.find_all(token, matches).is_ok() || matches.empty()) continue;
      std::string out;
      size_t previous = 0;
      for (const Match& m : matches) {
        out.append(token, previous, m.begin - previous);
        out += content_;
        previous = m.end;
      }
      out.append(token, previous);
      token = std::move(out);
    }
  }

 private:
  Regex regex_;
  std::string content_;
};

// Removes up to `start` leading and `stop` trailing copies of `content` from every token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, int start, int stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (content_.empty()) return;
    for (std::string& token : tokens) {
      size_t begin = 0, end = token.size();
      for (int i = 0; i < start_ && token.compare(begin, content_.size(), content_) == 0; ++i) begin += content_.size();
      for (int i = 0; i < stop_ && end >= begin + content_.size() &&
                      token.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i) {
        end -= content_.size();
      }
      token = token.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  int start_;
  int stop_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      replace_all_literal(tokens[i], replacement_, " ");
      if (i == 0 && strip_first_ && !tokens[i].empty() && tokens[i][0] == ' ') tokens[i].erase(0, 1);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class WordPieceDecoder : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      if (i != 0) {
        if (!prefix_.empty() && token.compare(0, prefix_.size(), prefix_) == 0) {
          token.erase(0, prefix_.size());
        } else {
          token.insert(0, 1, ' ');
        }
      }
      if (cleanup_) token = clean_up_tokenization(std::move(token));
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

// BPEDecoder: the end-of-word suffix becomes a space, except after the last token.
class BpeSuffixDecoder : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) replace_all_literal(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

int json_int_or(const Json& config, const char* key, int fallback) {
  auto it = config.find(key);
  return (it != config.end() && it->is_number_integer()) ? it->get<int>() : fallback;
}

}  // namespace

// transformers' clean_up_tokenization: drops the space before punctuation and contractions.
std::string clean_up_tokenization(std::string text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) replace_all_literal(text, from, to);
  return text;
}

Result<std::unique_ptr<Decoder>> create_decoder(const Json& config, const DecoderContext& context) {
  if (config.is_null()) return std::unique_ptr<Decoder>();
  if (!config.is_object()) return OG_ERROR("decoder: expected an object, got ", config.dump());
  OG_ASSIGN_OR_RETURN(const std::string type, json_string(config, "type", "decoder"));
  std::unique_ptr<Decoder> decoder;
  if (type == "ByteLevel") {
    decoder = std::make_unique<ByteLevelDecoder>(context.added_tokens, context.raw_bytes);
  } else if (type == "ByteFallback") {
    decoder = std::make_unique<ByteFallbackDecoder>(context.raw_bytes);
  } else if (type == "Fuse") {
    decoder = std::make_unique<FuseDecoder>();
  } else if (type == "Strip") {
    decoder = std::make_unique<StripDecoder>(json_string_or(config, "content", " "), json_int_or(config, "start", 0),
                                             json_int_or(config, "stop", 0));
  } else if (type == "Replace") {
    auto pattern = config.find("pattern");
    if (pattern == config.end()) return OG_ERROR("Replace decoder: missing \"pattern\"");
    OG_ASSIGN_OR_RETURN(Regex regex, compile_pattern(*pattern, "Replace decoder"));
    decoder = std::make_unique<ReplaceDecoder>(std::move(regex), json_string_or(config, "content", ""));
  } else if (type == "Metaspace") {
    const std::string scheme = json_string_or(config, "prepend_scheme", "");
    const bool strip_first = scheme.empty() ? json_bool_or(config, "add_prefix_space", true) : scheme != "never";
    decoder = std::make_unique<MetaspaceDecoder>(json_string_or(config, "replacement", "\xE2\x96\x81"), strip_first);
  } else if (type == "WordPiece") {
    decoder = std::make_unique<WordPieceDecoder>(json_string_or(config, "prefix", "##"), json_bool_or(config, "cleanup", true));
  } else if (type == "BPEDecoder") {
    decoder = std::make_unique<BpeSuffixDecoder>(json_string_or(config, "suffix", "</w>"));
  } else if (type == "Sequence") {
    auto list = config.find("decoders");
    if (list == config.end() || !list->is_array()) return OG_ERROR("Sequence decoder: missing \"decoders\" array");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const Json& item : *list) {
      OG_ASSIGN_OR_RETURN(auto step, create_decoder(item, context));
      if (step) steps.push_back(std::move(step));
    }
    decoder = std::make_unique<SequenceDecoder>(std::move(steps));
  } else {
    return OG_ERROR("unknown decoder type \"", type, "\"");
  }
  return decoder;
}

}  // namespace onnx_genai::tokenizer
