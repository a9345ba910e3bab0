// Model dispatch and the two non-BPE models: Unigram (Viterbi over vocabulary scores) and
// WordPiece (greedy longest match with a continuing-subword prefix).
#include <algorithm>
#include <limits>

#include "tokenizer/components.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/unicode.h"

namespace onnx_genai::tokenizer {
namespace {

class UnigramModel : public Model {
 public:
  UnigramModel(const Vocabulary& vocab, std::vector<double> scores, size_t max_token_bytes, bool byte_fallback)
      : vocab_(vocab), scores_(std::move(scores)), max_token_bytes_(max_token_bytes), byte_fallback_(byte_fallback) {
    double min_score = std::numeric_limits<double>::infinity();
    for (double s : scores_) min_score = std::min(min_score, s);
    unk_score_ = min_score - 10.0;  // SentencePiece's kUnkPenalty
    if (byte_fallback_) {
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        byte_ids_[b] = vocab_.find(name);
      }
    }
  }

  Status encode(std::string_view word, std::vector<int32_t>& ids) const override {
    const size_t n = word.size();
    // best[i]: score of the best segmentation of word[0, i); from/id: the last piece of it.
    std::vector<double> best(n + 1, -std::numeric_limits<double>::infinity());
    std::vector<uint32_t> from(n + 1, 0);
    std::vector<int32_t> piece(n + 1, -1);
    best[0] = 0;
    for (size_t start = 0; start < n;) {
      const size_t char_end = start + unicode::sequence_length(static_cast<uint8_t>(word[start]));
      if (best[start] > -std::numeric_limits<double>::infinity()) {
        bool has_single_char = false;
        for (size_t end = char_end; end <= n && end - start <= max_token_bytes_;) {
          const int32_t id = vocab_.find(word.substr(start, end - start));
          if (id >= 0 && id < static_cast<int32_t>(scores_.size())) {
            relax(best, from, piece, start, end, id, id == vocab_.unk_id ? unk_score_ : scores_[id]);
            has_single_char = has_single_char || end == char_end;
          }
          if (end == n) break;
          end += unicode::sequence_length(static_cast<uint8_t>(word[end]));
        }
        if (!has_single_char) relax(best, from, piece, start, char_end, -1, unk_score_);
      }
      start = char_end;
    }
    std::vector<std::pair<size_t, int32_t>> path;  // (start, id)
    for (size_t end = n; end > 0; end = from[end]) path.emplace_back(from[end], piece[end]);
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      if (it->second >= 0) {
        ids.push_back(it->second);
        continue;
      }
      const size_t start = it->first;
      const std::string_view text = word.substr(start, unicode::sequence_length(static_cast<uint8_t>(word[start])));
      if (byte_fallback_ && std::all_of(text.begin(), text.end(), [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; })) {
        for (char c : text) ids.push_back(byte_ids_[static_cast<uint8_t>(c)]);
      } else if (vocab_.unk_id >= 0) {
        ids.push_back(vocab_.unk_id);
      }
    }
    return Status::ok();
  }

  bool fuses_unknown() const override { return true; }

 private:
  // Strictly better only: on ties the earlier start wins, as in the reference lattice.
  static void relax(std::vector<double>& best, std::vector<uint32_t>& from, std::vector<int32_t>& piece,
                    size_t start, size_t end, int32_t id, double score) {
    if (best[start] + score > best[end]) {
      best[end] = best[start] + score;
      from[end] = static_cast<uint32_t>(start);
      piece[end] = id;
    }
  }

  const Vocabulary& vocab_;
  std::vector<double> scores_;
  size_t max_token_bytes_;
  bool byte_fallback_;
  double unk_score_ = 0;
  int32_t byte_ids_[256] = {};
};

class WordPieceModel : public Model {
 public:
  WordPieceModel(const Vocabulary& vocab, std::string prefix, size_t max_chars)
      : vocab_(vocab), prefix_(std::move(prefix)), max_chars_(max_chars) {}

  Status encode(std::string_view word, std::vector<int32_t>& ids) const override {
    std::vector<size_t> boundaries;  // byte offsets of character starts, plus the end
    for (size_t i = 0; i < word.size(); i += unicode::sequence_length(static_cast<uint8_t>(word[i]))) {
      boundaries.push_back(i);
    }
    boundaries.push_back(word.size());
    if (boundaries.size() - 1 > max_chars_) {
      push_unknown(ids);
      return Status::ok();
    }
    const size_t first = ids.size();
    std::string candidate;
    for (size_t start = 0; start + 1 < boundaries.size();) {
      int32_t found = -1;
      size_t end = boundaries.size() - 1;
      for (; end > start; --end) {
        candidate.assign(start > 0 ? prefix_ : "");
        candidate.append(word.substr(boundaries[start], boundaries[end] - boundaries[start]));
        found = vocab_.find(candidate);
        if (found >= 0) break;
      }
      if (found < 0) {
        ids.resize(first);
        push_unknown(ids);
        return Status::ok();
      }
      ids.push_back(found);
      start = end;
    }
    return Status::ok();
  }

 private:
  void push_unknown(std::vector<int32_t>& ids) const {
    if (vocab_.unk_id >= 0) ids.push_back(vocab_.unk_id);
  }

  const Vocabulary& vocab_;
  std::string prefix_;
  size_t max_chars_;
};

}  // namespace

Result<std::unique_ptr<Model>> create_unigram_model(const Json& config, Vocabulary& vocab) {
  auto list = config.find("vocab");
  if (list == config.end() || !list->is_array()) return OG_ERROR("Unigram model: \"vocab\" must be an array");
  std::vector<double> scores;
  scores.reserve(list->size());
  size_t max_token_bytes = 1;
  for (const Json& entry : *list) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number()) {
      return OG_ERROR("Unigram model: vocab entry ", scores.size(), " is not [piece, score]");
    }
    const std::string piece = entry[0].get<std::string>();
    max_token_bytes = std::max(max_token_bytes, piece.size());
    // The first occurrence of a duplicated piece keeps its id, as a lookup map would.
    if (vocab.find(piece) < 0) {
      OG_RETURN_IF_ERROR(vocab.set(piece, static_cast<int64_t>(scores.size())).with_context("Unigram model"));
    } else {
      OG_RETURN_IF_ERROR(vocab.resize(static_cast<int64_t>(scores.size()) + 1).with_context("Unigram model"));
    }
    scores.push_back(entry[1].get<double>());
  }
  if (auto unk = config.find("unk_id"); unk != config.end() && unk->is_number_integer()) {
    const int64_t unk_id = unk->get<int64_t>();
    if (unk_id < 0 || unk_id >= static_cast<int64_t>(scores.size())) {
      return OG_ERROR("Unigram model: unk_id ", unk_id, " out of range");
    }
    vocab.unk_id = static_cast<int32_t>(unk_id);
  }
  return std::unique_ptr<Model>(std::make_unique<UnigramModel>(vocab, std::move(scores), max_token_bytes,
                                                               json_bool_or(config, "byte_fallback", false)));
}

Result<std::unique_ptr<Model>> create_wordpiece_model(const Json& config, Vocabulary& vocab) {
  auto map = config.find("vocab");
  if (map == config.end() || !map->is_object()) return OG_ERROR("WordPiece model: \"vocab\" must be an object");
  for (const auto& [token, id] : map->items()) {
    if (!id.is_number_integer()) return OG_ERROR("WordPiece model: bad id for \"", token, "\"");
    OG_RETURN_IF_ERROR(vocab.set(token, id.get<int64_t>()).with_context("WordPiece model"));
  }
  vocab.unk_id = vocab.find(json_string_or(config, "unk_token", "[UNK]"));
  size_t max_chars = 100;
  if (auto it = config.find("max_input_chars_per_word"); it != config.end() && it->is_number_unsigned()) {
    max_chars = it->get<size_t>();
  }
  return std::unique_ptr<Model>(
      std::make_unique<WordPieceModel>(vocab, json_string_or(config, "continuing_subword_prefix", "##"), max_chars));
}

Result<std::unique_ptr<Model>> load_model(const ModelMembers& members, Vocabulary& vocab) {
  auto member = [&](const char* key) {
    auto it = members.find(key);
    return it == members.end() ? std::string_view() : it->second;
  };
  std::string type;
  if (const std::string_view raw = member("type"); !raw.empty()) {
    JsonReader reader(raw);
    if (reader.peek('"')) {
      OG_ASSIGN_OR_RETURN(type, reader.read_string());
    }
  }
  // Files without a type: infer it from the shape of the vocabulary, as the reference does.
  if (type.empty()) {
    const std::string_view vocab_text = member("vocab");
    type = (!vocab_text.empty() && vocab_text[0] == '[') ? "Unigram" : !member("merges").empty() ? "BPE" : "WordPiece";
  }
  if (type == "BPE") return load_bpe_model(members, vocab);
  if (type != "Unigram" && type != "WordPiece") return OG_ERROR("unknown model type \"", type, "\"");
  Json config = Json::object();
  for (const auto& [key, raw] : members) {
    config[key] = Json::parse(raw, nullptr, /*allow_exceptions=*/false);
    if (config[key].is_discarded()) return OG_ERROR(type, " model: field \"", key, "\" is not valid JSON");
  }
  if (type == "Unigram") return create_unigram_model(config, vocab);
  return create_wordpiece_model(config, vocab);
}

}  // namespace onnx_genai::tokenizer
