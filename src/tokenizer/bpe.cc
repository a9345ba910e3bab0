// Byte-pair encoding: repeatedly merge the adjacent pair with the lowest merge rank (ties go
// to the leftmost pair), as Hugging Face's BPE model does. Merges live in an open-addressing
// table keyed by the pair of token ids; finished words are cached.
#include <algorithm>
#include <mutex>
#include <queue>
#include <span>

#include "tokenizer/components.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/unicode.h"

namespace onnx_genai::tokenizer {
namespace {

// (left id, right id) -> (rank, merged id), open addressing with linear probing.
class MergeTable {
 public:
  void reserve(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    slots_.assign(capacity, Slot{kEmpty, 0, 0});
    count_ = 0;
  }
  // Keeps the first (lowest-rank) entry when a pair repeats. Grows at half load.
  void insert(int32_t left, int32_t right, int32_t rank, int32_t merged) {
    if ((count_ + 1) * 2 > slots_.size()) grow();
    const uint64_t key = make_key(left, right);
    for (size_t i = hash(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = Slot{key, rank, merged};
        ++count_;
        return;
      }
      if (slots_[i].key == key) return;
    }
  }
  void prefetch(int32_t left, int32_t right) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash(make_key(left, right))]);
  }
  // Rank and merged id, or false when the pair never merges.
  bool find(int32_t left, int32_t right, int32_t& rank, int32_t& merged) const {
    const uint64_t key = make_key(left, right);
    for (size_t i = hash(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == key) {
        rank = slots_[i].rank;
        merged = slots_[i].merged;
        return true;
      }
      if (slots_[i].key == kEmpty) return false;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ULL;
  struct Slot {
    uint64_t key;
    int32_t rank;
    int32_t merged;
  };
  static uint64_t make_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  size_t hash(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ULL >> 20) & (slots_.size() - 1); }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(16, old.size() * 2), Slot{kEmpty, 0, 0});
    for (const Slot& slot : old) {
      if (slot.key == kEmpty) continue;
      size_t i = hash(slot.key);
      while (slots_[i].key != kEmpty) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = slot;
    }
  }
  std::vector<Slot> slots_;
  size_t count_ = 0;
};

struct BpeOptions {
  std::string unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel : public Model {
 public:
  BpeModel(const Vocabulary& vocab, MergeTable merges, BpeOptions options)
      : vocab_(vocab), merges_(std::move(merges)), options_(std::move(options)) {
    for (int b = 0; b < 256 && options_.byte_fallback; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      byte_ids_[b] = vocab_.find(name);
    }
  }

  Status encode(std::string_view word, std::vector<int32_t>& ids) const override {
    if (word.empty()) return Status::ok();
    if (options_.ignore_merges) {
      if (const int32_t id = vocab_.find(word); id >= 0) {
        ids.push_back(id);
        return Status::ok();
      }
    }
    if (word.size() <= kMaxCachedWordBytes) {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      if (auto it = cache_.find(word); it != cache_.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return Status::ok();
      }
    }
    const size_t first = ids.size();
    merge_word(word, ids);
    if (word.size() <= kMaxCachedWordBytes) {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      if (cache_.size() >= kMaxCachedWords) cache_.clear();
      cache_.emplace(std::string(word), std::vector<int32_t>(ids.begin() + first, ids.end()));
    }
    return Status::ok();
  }

  bool fuses_unknown() const override { return options_.fuse_unk; }
  std::string_view end_of_word_suffix() const override { return options_.end_of_word_suffix; }

 private:
  static constexpr size_t kMaxCachedWordBytes = 256;
  static constexpr size_t kMaxCachedWords = 1 << 16;

  struct Symbol {
    int32_t id;      // -1: a character the vocabulary lacks (never merges)
    uint32_t begin;  // byte range in the word, for byte fallback
    uint32_t length;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };

  void merge_word(std::string_view word, std::vector<int32_t>& ids) const {
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    std::string piece;
    for (size_t i = 0; i < word.size();) {
      const size_t start = i;
      i += unicode::sequence_length(static_cast<uint8_t>(word[i]));
      piece.clear();
      if (start > 0) piece += options_.continuing_subword_prefix;
      piece.append(word.substr(start, i - start));
      if (i >= word.size()) piece += options_.end_of_word_suffix;
      const int32_t index = static_cast<int32_t>(symbols.size());
      symbols.push_back({vocab_.find(piece), static_cast<uint32_t>(start), static_cast<uint32_t>(i - start),
                         index - 1, i < word.size() ? index + 1 : -1});
    }
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    auto push_pair = [&](int32_t pos) {
      const int32_t next = symbols[pos].next;
      if (next < 0 || symbols[pos].id < 0 || symbols[next].id < 0) return;
      int32_t rank, merged;
      if (merges_.find(symbols[pos].id, symbols[next].id, rank, merged)) queue.push({rank, pos, merged});
    };
    for (int32_t pos = 0; pos + 1 < static_cast<int32_t>(symbols.size()); ++pos) push_pair(pos);
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& left = symbols[top.pos];
      if (left.length == 0 || left.next < 0) continue;
      Symbol& right = symbols[left.next];
      int32_t rank, merged;
      if (!merges_.find(left.id, right.id, rank, merged) || merged != top.merged) continue;
      left.id = merged;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (left.next >= 0) symbols[left.next].prev = top.pos;
      if (left.prev >= 0) push_pair(left.prev);
      push_pair(top.pos);
    }
    for (int32_t pos = 0; pos >= 0 && !symbols.empty(); pos = symbols[pos].next) {
      const Symbol& s = symbols[pos];
      if (s.id >= 0) {
        ids.push_back(s.id);
      } else {
        emit_unknown(word.substr(s.begin, s.length), ids);
      }
    }
  }

  // A character outside the vocabulary: its bytes as <0xXX> tokens when every one exists,
  // else the unknown token, else nothing (as the reference does).
  void emit_unknown(std::string_view text, std::vector<int32_t>& ids) const {
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : text) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (char c : text) ids.push_back(byte_ids_[static_cast<uint8_t>(c)]);
        return;
      }
    }
    if (vocab_.unk_id >= 0) ids.push_back(vocab_.unk_id);
  }

  const Vocabulary& vocab_;
  MergeTable merges_;
  BpeOptions options_;
  int32_t byte_ids_[256] = {};
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

// Strings gathered in one buffer for a batched vocabulary call; views are made once the batch
// is complete, since appending may move the buffer.
class StringBatch {
 public:
  // Adds the concatenation of `head` and `tail` as one string.
  void add(std::string_view head, std::string_view tail = {}) {
    spans_.emplace_back(text_.size(), head.size() + tail.size());
    text_.append(head).append(tail);
  }
  size_t size() const { return spans_.size(); }
  std::span<const std::string_view> views() {
    views_.clear();
    for (const auto& [offset, length] : spans_) views_.push_back(std::string_view(text_).substr(offset, length));
    return views_;
  }
  void clear() {
    text_.clear();
    spans_.clear();
  }

 private:
  std::string text_;
  std::vector<std::pair<size_t, size_t>> spans_;
  std::vector<std::string_view> views_;
};

constexpr size_t kBatchSize = 256;

// Entries in a JSON list of `total_bytes`, judged from the first `count` taking `consumed_bytes`;
// a little over, so that tables sized from it need not grow.
size_t extrapolate_count(size_t count, size_t consumed_bytes, size_t total_bytes) {
  return total_bytes * count / std::max<size_t>(consumed_bytes, 1) * 9 / 8 + 16;
}

Status read_vocab(JsonReader& reader, size_t text_size, Vocabulary& vocab) {
  StringBatch tokens;
  std::vector<int64_t> ids;
  size_t count = 0;
  auto flush = [&]() -> Status {
    if (count == ids.size()) vocab.reserve(extrapolate_count(count, reader.offset(), text_size), text_size / 2);
    OG_RETURN_IF_ERROR(vocab.set_many(tokens.views(), ids));
    tokens.clear();
    ids.clear();
    return Status::ok();
  };
  std::string token;
  OG_RETURN_IF_ERROR(reader.read_object_into(token, [&]() -> Status {
    OG_ASSIGN_OR_RETURN(const int64_t id, reader.read_integer());
    tokens.add(token);
    ids.push_back(id);
    ++count;
    return ids.size() >= kBatchSize ? flush() : Status::ok();
  }));
  return flush();
}

// Resolves merges (left, right, merged) to ids a batch at a time, so that the vocabulary
// lookups of a batch overlap their cache misses (Vocabulary::find_many).
class MergeResolver {
 public:
  MergeResolver(const Vocabulary& vocab, MergeTable& table) : vocab_(vocab), table_(table) {}

  void add(std::string_view left, std::string_view right, std::string_view merged_right) {
    strings_.add(left);
    strings_.add(right);
    strings_.add(left, merged_right);
  }
  size_t pending() const { return strings_.size() / 3; }

  // Before the first batch, sizes the table for `expected_total` merges.
  Status flush(size_t expected_total) {
    if (rank_ == 0) table_.reserve(expected_total);
    const std::span<const std::string_view> views = strings_.views();
    ids_.resize(views.size());
    vocab_.find_many(views, ids_);
    for (size_t k = 0; k < ids_.size(); k += 3) table_.prefetch(ids_[k], ids_[k + 1]);
    for (size_t k = 0; k < ids_.size(); k += 3) {
      if (ids_[k] < 0 || ids_[k + 1] < 0 || ids_[k + 2] < 0) {
        return OG_ERROR("BPE merges: entry ", rank_, " (\"", views[k], "\", \"", views[k + 1],
                        "\") uses a token not in the vocab");
      }
      table_.insert(ids_[k], ids_[k + 1], rank_++, ids_[k + 2]);
    }
    strings_.clear();
    return Status::ok();
  }

 private:
  const Vocabulary& vocab_;
  MergeTable& table_;
  int32_t rank_ = 0;     // of the next merge to insert
  StringBatch strings_;  // left, right, merged per merge
  std::vector<int32_t> ids_;
};

// Merges come as "left right" strings or as [left, right] pairs; rank = position in the list.
Status read_merges(JsonReader& reader, size_t text_size, const Vocabulary& vocab, const BpeOptions& options,
                   MergeTable& table) {
  const std::string_view prefix = options.continuing_subword_prefix;
  MergeResolver resolver(vocab, table);
  std::string entry, pair_right;
  size_t count = 0;
  OG_RETURN_IF_ERROR(reader.read_array([&]() -> Status {
    std::string_view left, right;
    if (reader.peek('[')) {
      int parts = 0;
      OG_RETURN_IF_ERROR(reader.read_array([&]() -> Status {
        if (parts > 1) return OG_ERROR("BPE merges: entry ", count, " is not a pair");
        return reader.read_string_into(parts++ == 0 ? entry : pair_right);
      }));
      if (parts != 2) return OG_ERROR("BPE merges: entry ", count, " is not a pair");
      left = entry;
      right = pair_right;
    } else {
      OG_RETURN_IF_ERROR(reader.read_string_into(entry));
      const size_t space = entry.find(' ', 1);
      if (space == std::string::npos) return OG_ERROR("BPE merges: entry ", count, " \"", entry, "\" has no space");
      left = std::string_view(entry).substr(0, space);
      right = std::string_view(entry).substr(space + 1);
    }
    ++count;
    // With a continuing-subword prefix, the right part's prefix disappears in the merge.
    const bool strip = !prefix.empty() && right.starts_with(prefix);
    resolver.add(left, right, right.substr(strip ? prefix.size() : 0));
    if (resolver.pending() < kBatchSize) return Status::ok();
    return resolver.flush(extrapolate_count(count, reader.offset(), text_size));
  }));
  return resolver.flush(count);
}

std::string optional_string(const Json& config, const char* key) {
  auto it = config.find(key);
  return (it != config.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

}  // namespace

Result<std::unique_ptr<Model>> load_bpe_model(const ModelMembers& members, Vocabulary& vocab) {
  // Small fields go through nlohmann; vocab and merges are read in place (they are most of
  // the file and a DOM for them costs more than the 150 ms load budget).
  Json config = Json::object();
  std::string_view vocab_text, merges_text;
  for (const auto& [key, raw] : members) {
    if (key == "vocab") {
      vocab_text = raw;
    } else if (key == "merges") {
      merges_text = raw;
    } else {
      config[key] = Json::parse(raw, nullptr, /*allow_exceptions=*/false);
      if (config[key].is_discarded()) return OG_ERROR("BPE model: field \"", key, "\" is not valid JSON");
    }
  }
  if (vocab_text.empty()) return OG_ERROR("BPE model: missing \"vocab\"");
  BpeOptions options;
  options.unk_token = optional_string(config, "unk_token");
  options.continuing_subword_prefix = optional_string(config, "continuing_subword_prefix");
  options.end_of_word_suffix = optional_string(config, "end_of_word_suffix");
  options.fuse_unk = json_bool_or(config, "fuse_unk", false);
  options.byte_fallback = json_bool_or(config, "byte_fallback", false);
  options.ignore_merges = json_bool_or(config, "ignore_merges", false);
  if (auto dropout = config.find("dropout"); dropout != config.end() && dropout->is_number() && dropout->get<double>() > 0) {
    return OG_ERROR("BPE model: dropout is not supported (inference tokenization is deterministic)");
  }

  JsonReader vocab_reader(vocab_text);
  OG_RETURN_IF_ERROR(read_vocab(vocab_reader, vocab_text.size(), vocab).with_context("BPE vocab"));
  if (!options.unk_token.empty()) vocab.unk_id = vocab.find(options.unk_token);
  MergeTable merges;
  if (!merges_text.empty()) {
    JsonReader merges_reader(merges_text);
    OG_RETURN_IF_ERROR(read_merges(merges_reader, merges_text.size(), vocab, options, merges));
  } else {
    merges.reserve(0);
  }
  return std::unique_ptr<Model>(std::make_unique<BpeModel>(vocab, std::move(merges), std::move(options)));
}

}  // namespace onnx_genai::tokenizer
