// Fuzz tests, meant to run under ASan/UBSan (-DOG_SANITIZE=ON) as well as in the normal build.
//
// Loader: deterministic mutants of real tokenizer.json files (byte flips, truncation, inserted
// and deleted bytes, and JSON-level edits: wrong types, missing keys, huge/negative ids, bad
// regexes, unknown component types, deep nesting, swapped subtrees). Every mutant must load
// or fail with a Status; a mutant that loads is then used to encode and decode.
// Runtime: random bytes, random valid UTF-8 and random id sequences through real tokenizers.
// Invariants checked: invalid UTF-8 input is rejected and valid input accepted; decode fails
// exactly when an id is out of range; decoded text and every streamed piece is valid UTF-8;
// streamed pieces plus flush() equal decode() of the same ids.
//
// The seeds are real tokenizers (llama2, qwen3, llama3) shrunk to their first few hundred
// tokens, so that one load costs well under a millisecond, plus small hand-written ones for the
// components those files do not use; a few hundred mutants run on the full llama2 file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "onnx_genai/tokenizer.h"
#include "tokenizer/unicode.h"

namespace onnx_genai {
namespace {

using Json = nlohmann::json;
using Rng = std::mt19937_64;

std::string model_file(const std::string& name, const char* file = "tokenizer.json") {
  return std::string(OG_TOKENIZER_MODELS_DIR) + "/tokenizer-" + name + "/models/" + file;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// An independent UTF-8 check (not the library's): well-formed per Unicode Table 3-7.
bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b0 < 0x80) {
      ++i;
      continue;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      need = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      need = 2;
      lo = b0 == 0xE0 ? 0xA0 : 0x80;
      hi = b0 == 0xED ? 0x9F : 0xBF;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      need = 3;
      lo = b0 == 0xF0 ? 0x90 : 0x80;
      hi = b0 == 0xF4 ? 0x8F : 0xBF;
    } else {
      return false;
    }
    for (int k = 1; k <= need; ++k, lo = 0x80, hi = 0xBF) {
      if (i + k >= s.size()) return false;
      const auto b = static_cast<uint8_t>(s[i + k]);
      if (b < lo || b > hi) return false;
    }
    i += need + 1;
  }
  return true;
}

size_t pick(Rng& rng, size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

template <typename T>
const T& pick(Rng& rng, const std::vector<T>& items) {
  return items[pick(rng, items.size())];
}

// Random valid UTF-8 weighted towards what tokenizers treat specially: whitespace runs,
// digits, combining marks, CJK, RTL scripts, emoji with ZWJ and variation selectors, and
// special-token strings.
std::string random_utf8(Rng& rng, size_t max_chars) {
  static const std::vector<std::pair<char32_t, char32_t>> kRanges = {
      {0x20, 0x7E},       {0x20, 0x7E},     {0x30, 0x39},     {0x09, 0x0D},     {0xA0, 0xFF},
      {0x0300, 0x036F},   {0x0391, 0x03C9}, {0x0400, 0x04FF}, {0x0600, 0x06FF}, {0x0900, 0x097F},
      {0x0E00, 0x0E7F},   {0x1100, 0x11FF}, {0x2000, 0x206F}, {0x3000, 0x303F}, {0x3040, 0x30FF},
      {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3}, {0xFE00, 0xFE0F}, {0xFF00, 0xFFEF}, {0xFFF0, 0xFFFF},
      {0x1F300, 0x1FAFF}, {0x1F1E6, 0x1F1FF}, {0x10000, 0x10FFFF}};
  static const std::vector<std::string> kPieces = {"<|im_start|>", "<|endoftext|>", "<s>", "</s>", "<unk>",
                                                   "\xE2\x80\x8D", "\xE2\x96\x81", " ", "  ", "\r\n", "'s", "'ll"};
  std::string out;
  const size_t chars = pick(rng, max_chars + 1);
  for (size_t i = 0; i < chars; ++i) {
    if (pick(rng, 10) == 0) {
      out += pick(rng, kPieces);
      continue;
    }
    const auto& [lo, hi] = pick(rng, kRanges);
    const char32_t cp = lo + static_cast<char32_t>(pick(rng, hi - lo + 1));
    if (cp >= 0xD800 && cp < 0xE000) continue;  // surrogates are not characters
    unicode::append_utf8(out, cp);
  }
  return out;
}

std::string random_bytes(Rng& rng, size_t max_bytes) {
  static const std::string kInteresting("\x80\xBF\xC0\xC1\xC2\xDF\xE0\xED\xEF\xF0\xF4\xF5\xFF\x00 a<|>\\\"", 21);
  std::string out(pick(rng, max_bytes + 1), '\0');
  for (char& c : out) c = pick(rng, 2) ? static_cast<char>(pick(rng, 256)) : kInteresting[pick(rng, kInteresting.size())];
  return out;
}

// ---- Seeds --------------------------------------------------------------------------------

// A real tokenizer.json cut down to its first `keep` vocabulary ids (and the merges among
// them); added tokens are renumbered to follow, with the post-processor's ids to match.
Json shrink(Json doc, int64_t keep) {
  Json& model = doc["model"];
  Json vocab = Json::object();
  for (const auto& [token, id] : model["vocab"].items()) {
    if (id.get<int64_t>() < keep) vocab[token] = id;
  }
  Json merges = Json::array();
  for (const Json& merge : model["merges"]) {
    std::string left, right;
    if (merge.is_array()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ', 1);
      left = text.substr(0, space);
      right = text.substr(space + 1);
    }
    if (vocab.contains(left) && vocab.contains(right) && vocab.contains(left + right)) merges.push_back(merge);
  }
  model["vocab"] = std::move(vocab);
  model["merges"] = std::move(merges);
  std::map<int64_t, int64_t> renumbered;
  for (Json& token : doc["added_tokens"]) {
    const int64_t id = token["id"].get<int64_t>();
    if (id >= keep) token["id"] = renumbered[id] = keep + static_cast<int64_t>(renumbered.size());
  }
  Json& post = doc["post_processor"];
  if (post.is_object() && post.contains("special_tokens")) {
    for (auto& [name, entry] : post["special_tokens"].items()) {
      for (Json& id : entry["ids"]) {
        if (renumbered.count(id.get<int64_t>())) id = renumbered[id.get<int64_t>()];
      }
    }
  }
  return doc;
}

// Hand-written seeds for components the real files do not use.
const char* const kHandWrittenSeeds[] = {
    R"({"normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "lowercase": true,
                       "strip_accents": null},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "BertPreTokenizer"}, {"type": "Digits",
                          "individual_digits": true}, {"type": "Punctuation", "behavior": "Contiguous"}]},
        "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 1], "sep": ["[SEP]", 2]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "added_tokens": [{"id": 9, "content": "[MASK]", "special": true, "lstrip": true, "rstrip": true}],
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 20,
                  "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "play": 3, "##ing": 4, "cafe": 5, "!": 6, "中": 7,
                            "##s": 8, "1": 10, "a": 11, "##a": 12}}})",
    R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "Precompiled", "precompiled_charsmap": null},
                       {"type": "Strip", "strip_left": true, "strip_right": true}, {"type": "NFKD"},
                       {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
                    {"type": "Replace", "pattern": {"Regex": "x+"}, "content": "y"}]},
        "added_tokens": [{"id": 12, "content": "<eos>", "special": true}],
        "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": true,
                  "vocab": [["<unk>", 0.0], ["▁", -2.0], ["▁he", -3.0], ["llo", -3.0], ["▁hello", -5.5], ["h", -4.0],
                            ["e", -4.0], ["l", -4.0], ["o", -4.0], ["<0xE4>", -9.0], ["<0xBD>", -9.0], ["<0xA0>", -9.0]]}})",
    R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {"type": "StripAccents"},
                       {"type": "Prepend", "prepend": "_"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Whitespace"},
                          {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithNext", "invert": true},
                          {"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}]},
        "post_processor": {"type": "Sequence", "processors": [{"type": "ByteLevel"},
                           {"type": "RobertaProcessing", "cls": ["<s>", 0], "sep": ["</s>", 1]}]},
        "decoder": {"type": "Sequence", "decoders": [{"type": "ByteLevel"}, {"type": "BPEDecoder", "suffix": "</w>"},
                    {"type": "Strip", "content": "_", "start": 2, "stop": 1}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "unk_token": "<unk>", "continuing_subword_prefix": "##", "end_of_word_suffix": "</w>",
                  "fuse_unk": true, "vocab": {"<s>": 0, "</s>": 1, "<unk>": 2, "a": 3, "##b": 4, "ab": 5, "c</w>": 6,
                  "##c</w>": 7, "abc</w>": 8, "Ġ": 9, "_": 10},
                  "merges": ["a ##b", "ab ##c</w>"]}})",
};

const char* const kConfigSeed = R"({"bos_token": "<s>", "eos_token": {"content": "</s>", "special": true},
    "clean_up_tokenization_spaces": false, "additional_special_tokens": ["<unk>", "<|im_start|>"]})";

// One seed: its text, its parsed form, and the JSON pointers of its nodes.
struct Seed {
  std::string text;
  Json doc;
  std::vector<Json::json_pointer> nodes;  // every node below the root
  std::vector<Json::json_pointer> components;  // the nodes outside the vocabulary and merges
};

void collect_nodes(const Json& node, const Json::json_pointer& path, Seed& seed) {
  if (!path.empty()) {
    seed.nodes.push_back(path);
    const std::string text = path.to_string();
    if (text.rfind("/model/vocab/", 0) != 0 && text.rfind("/model/merges/", 0) != 0) seed.components.push_back(path);
  }
  if (node.is_object()) {
    for (const auto& [key, child] : node.items()) collect_nodes(child, path / key, seed);
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) collect_nodes(node[i], path / i, seed);
  }
}

Seed make_seed(Json doc) {
  Seed seed;
  seed.text = doc.dump();
  seed.doc = std::move(doc);
  collect_nodes(seed.doc, Json::json_pointer(), seed);
  return seed;
}

// ---- Mutations ----------------------------------------------------------------------------

std::string mutate_bytes(Rng& rng, std::string text) {
  if (text.empty()) return random_bytes(rng, 8);
  switch (pick(rng, 5)) {
    case 0:  // flip bits in a few bytes
      for (size_t n = 1 + pick(rng, 8); n > 0; --n) text[pick(rng, text.size())] ^= static_cast<char>(1 + pick(rng, 255));
      return text;
    case 1:  // truncate
      return text.substr(0, pick(rng, text.size()));
    case 2:  // insert bytes, often invalid UTF-8 or JSON syntax
      return text.insert(pick(rng, text.size() + 1), random_bytes(rng, 6));
    case 3: {  // delete a range
      const size_t at = pick(rng, text.size());
      return text.erase(at, 1 + pick(rng, std::min<size_t>(64, text.size() - at)));
    }
    default: {  // duplicate a range
      const size_t at = pick(rng, text.size());
      const std::string range = text.substr(at, 1 + pick(rng, 64));
      return text.insert(pick(rng, text.size() + 1), range);
    }
  }
}

Json odd_value(Rng& rng) {
  static const std::vector<Json> kOdd = {
      nullptr, true, false, 0, -1, 1.5, -1e300, 1e300, int64_t{2147483647}, int64_t{2147483648},
      int64_t{4294967296}, int64_t{-2147483648LL}, std::numeric_limits<int64_t>::min(),
      std::numeric_limits<uint64_t>::max(), "", "x", "<0xZZ>", Json::array(), Json::object(), Json::array({1, 2}),
      Json{{"type", "Sequence"}}, Json{{"Regex", "("}}, Json{{"String", ""}}};
  return pick(rng, kOdd);
}

Json bad_id(Rng& rng) {
  static const std::vector<Json> kIds = {-1, -2, int64_t{-2147483648LL}, 2147483647, 16777215, 16777216,
                                         int64_t{1} << 40, std::numeric_limits<uint64_t>::max(), 0, 1, 700, 1e10};
  return pick(rng, kIds);
}

Json bad_pattern(Rng& rng) {
  static const std::vector<std::string> kPatterns = {
      "(", ")", "[a-", "[]", "\\", "\\p{Nonsense}", "(?<", "a{99999999}", "(?i:", "x**", "((((((((((", "[[:alpha:]",
      "(a+)+$", "(?=a)*", "\\u12", "\\x{110000}", "[\\S]", "(?>a+)+b", "\\p{L", "", ".*", "(?<!a+)b", "\\1(a)",
      "(?R)", "\xE2\x96\x81|\\s+", "\\E\\Q"};
  const std::string& pattern = pick(rng, kPatterns);
  return pick(rng, 4) == 0 ? Json{{"String", pattern}} : Json{{"Regex", pattern}};
}

// Replaces the first `marker` string in `text` by `depth` nested arrays, written as text: a
// DOM that deep would overflow the stack of nlohmann's own (recursive) dump and copy.
std::string nest_at(std::string text, const std::string& marker, size_t depth) {
  const size_t at = text.find('"' + marker + '"');
  if (at == std::string::npos) return text;
  return text.replace(at, marker.size() + 2, std::string(depth, '[') + "1" + std::string(depth, ']'));
}

std::string random_type(Rng& rng) {
  static const std::vector<std::string> kTypes = {
      "BPE", "WordPiece", "Unigram", "WordLevel", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents",
      "Precompiled", "Prepend", "Strip", "BertNormalizer", "Replace", "Sequence", "ByteLevel", "Metaspace", "Split",
      "Digits", "Punctuation", "WhitespaceSplit", "Whitespace", "BertPreTokenizer", "TemplateProcessing",
      "BertProcessing", "RobertaProcessing", "ByteFallback", "Fuse", "BPEDecoder", "CTC", "Frobnicate", ""};
  return pick(rng, kTypes);
}

// One JSON-level edit at a random node (components are picked more often than vocab entries);
// returns the edited document as text.
std::string mutate_json(Rng& rng, const Seed& seed) {
  static const std::string kDeepMarker = "@@deep-nesting@@";
  size_t depth = 0;
  Json doc = seed.doc;
  const auto& nodes = (pick(rng, 4) != 0 && !seed.components.empty()) ? seed.components : seed.nodes;
  const Json::json_pointer& path = pick(rng, nodes);
  Json& node = doc[path];
  switch (pick(rng, 9)) {
    case 0:
      node = odd_value(rng);
      break;
    case 1:  // drop the key (or element) holding this node
      if (Json& parent = doc[path.parent_pointer()]; parent.is_object()) {
        parent.erase(path.back());
      } else if (parent.is_array()) {
        parent.erase(std::stoul(path.back()));
      }
      break;
    case 2: {  // an unknown or misplaced component type, on the nearest object
      Json::json_pointer at = path;
      while (!doc[at].is_object()) at = at.parent_pointer();
      doc[at]["type"] = random_type(rng);
      break;
    }
    case 3:
      node = bad_pattern(rng);
      break;
    case 4:
      node = bad_id(rng);
      break;
    case 5:
      node = kDeepMarker;
      depth = pick(rng, 2) ? 300 : 100000;  // the loader's limit is 256
      break;
    case 6:  // another node's subtree in this place
      node = seed.doc[pick(rng, nodes)];
      break;
    case 7:
      node = random_utf8(rng, pick(rng, 4) ? 8 : 2000);
      break;
    default:  // a vocabulary entry or added token that collides with existing ones
      if (Json& vocab = doc["model"]["vocab"]; pick(rng, 2)) {
        if (vocab.is_object()) vocab[random_utf8(rng, 3)] = bad_id(rng);
        if (vocab.is_array()) vocab.push_back({random_utf8(rng, 3), odd_value(rng)});
      } else if (doc["added_tokens"].is_array()) {
        doc["added_tokens"].push_back({{"id", bad_id(rng)}, {"content", random_utf8(rng, 4)}, {"special", true},
                                       {"normalized", pick(rng, 2) == 0}, {"lstrip", true}, {"single_word", true}});
      }
      break;
  }
  return depth == 0 ? doc.dump() : nest_at(doc.dump(), kDeepMarker, depth);
}

// ---- Use of a loaded tokenizer ------------------------------------------------------------

// Streams `ids`; every piece must be valid UTF-8, and for tokenizers whose decoders are
// prefix-stable (`check_join`), pieces + flush() must equal decode(valid ids).
void check_streaming(const Tokenizer& tokenizer, std::span<const int32_t> ids, const DecodeOptions& options,
                     bool check_join) {
  StreamingDetokenizer stream(tokenizer, options);
  std::vector<int32_t> valid;
  std::string joined;
  for (const int32_t id : ids) {
    auto piece = stream.put(id);
    const bool in_range = id >= 0 && id < tokenizer.vocab_size();
    ASSERT_EQ(piece.is_ok(), in_range) << "id " << id;
    if (!in_range) continue;
    valid.push_back(id);
    ASSERT_TRUE(is_valid_utf8(*piece)) << "streamed piece is not valid UTF-8 after id " << id;
    joined += *piece;
  }
  auto tail = stream.flush();
  ASSERT_TRUE(tail.is_ok());
  ASSERT_TRUE(is_valid_utf8(*tail));
  joined += *tail;
  if (!check_join) return;
  auto whole = tokenizer.decode(valid, options);
  ASSERT_TRUE(whole.is_ok());
  ASSERT_EQ(joined, *whole);
}

std::vector<int32_t> random_ids(Rng& rng, int32_t vocab_size, size_t max_count) {
  std::vector<int32_t> ids(pick(rng, max_count + 1));
  for (int32_t& id : ids) {
    switch (pick(rng, 16)) {
      case 0: id = -1 - static_cast<int32_t>(pick(rng, 3)); break;
      case 1: id = vocab_size + static_cast<int32_t>(pick(rng, 3)); break;
      case 2: id = pick(rng, 2) ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min(); break;
      default: id = static_cast<int32_t>(pick(rng, static_cast<size_t>(std::max(vocab_size, 1))));
    }
  }
  return ids;
}

// Decode fails exactly when an id is out of range; otherwise the text is valid UTF-8.
void check_decode(const Tokenizer& tokenizer, std::span<const int32_t> ids, const DecodeOptions& options) {
  const bool all_valid = std::all_of(ids.begin(), ids.end(), [&](int32_t id) { return id >= 0 && id < tokenizer.vocab_size(); });
  auto text = tokenizer.decode(ids, options);
  ASSERT_EQ(text.is_ok(), all_valid);
  if (all_valid) {
    ASSERT_TRUE(is_valid_utf8(*text));
  }
}

// Exercises a tokenizer loaded from a mutant: nothing may crash; outputs stay valid UTF-8.
void exercise(const Tokenizer& tokenizer, Rng& rng) {
  const std::string text = "Hello world <|im_start|> héllo 你好 123 <s> 👍🏽 " + random_utf8(rng, 12);
  auto ids = tokenizer.encode(text);
  if (ids.is_ok()) {
    for (const int32_t id : *ids) {
      // An out-of-range id here comes from the file itself (e.g. a post-processor id).
      if (id < 0 || id >= tokenizer.vocab_size()) ADD_FAILURE() << "encode produced id " << id << " outside the vocabulary";
    }
    check_decode(tokenizer, *ids, {});
  }
  // Every token of the (small) vocabulary at once: a token with broken text must not leak.
  std::vector<int32_t> all(std::min(tokenizer.vocab_size(), 4096));
  for (size_t id = 0; id < all.size(); ++id) all[id] = static_cast<int32_t>(id);
  check_decode(tokenizer, all, {});
  const std::vector<int32_t> random = random_ids(rng, tokenizer.vocab_size(), 12);
  check_decode(tokenizer, random, {.skip_special_tokens = true});
  check_streaming(tokenizer, random, {}, /*check_join=*/false);
}

// ---- Tests --------------------------------------------------------------------------------

class TokenizerLoaderFuzz : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const auto& [name, keep] : {std::pair<const char*, int64_t>{"llama2", 700}, {"qwen3", 600}, {"llama3", 600}}) {
      Json doc = Json::parse(read_file(model_file(name)), nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(doc.is_discarded()) << name;
      if (std::string(name) == "llama2") llama2_full_ = doc.dump();
      seeds_.push_back(make_seed(shrink(std::move(doc), keep)));
    }
    for (const char* text : kHandWrittenSeeds) {
      Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(doc.is_discarded()) << text;
      seeds_.push_back(make_seed(std::move(doc)));
    }
    config_seed_ = make_seed(Json::parse(kConfigSeed));
  }

  static inline std::vector<Seed> seeds_;
  static inline Seed config_seed_;
  static inline std::string llama2_full_;
};

TEST_F(TokenizerLoaderFuzz, EverySeedLoads) {
  for (const Seed& seed : seeds_) {
    auto tokenizer = Tokenizer::from_json(seed.text, config_seed_.text);
    ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.status().message() << "\n" << seed.text.substr(0, 200);
    Rng rng(1);
    exercise(**tokenizer, rng);
  }
}

TEST_F(TokenizerLoaderFuzz, MutantsLoadOrFailCleanly) {
  constexpr int kSmallMutants = 5000;
  constexpr int kLargeMutants = 100;  // of the full llama2 file: 32k tokens, 59k merges
  Rng rng(20240611);
  int loaded = 0, failed = 0;
  auto attempt = [&](const std::string& json, const std::string& config) {
    auto tokenizer = Tokenizer::from_json(json, config);
    if (!tokenizer.is_ok()) {
      ++failed;
      EXPECT_FALSE(tokenizer.status().message().empty());
      return;
    }
    ++loaded;
    exercise(**tokenizer, rng);
  };
  for (int i = 0; i < kSmallMutants; ++i) {
    const Seed& seed = seeds_[i % seeds_.size()];
    std::string config = config_seed_.text;
    std::string json;
    switch (pick(rng, 8)) {
      case 0: case 1: case 2: json = mutate_bytes(rng, seed.text); break;
      case 7:  // the tokenizer_config.json instead
        json = seed.text;
        config = pick(rng, 2) ? mutate_bytes(rng, config) : mutate_json(rng, config_seed_);
        break;
      default: json = mutate_json(rng, seed); break;
    }
    attempt(json, config);
  }
  for (int i = 0; i < kLargeMutants; ++i) attempt(mutate_bytes(rng, llama2_full_), "");
  // Both outcomes must be well represented, or the mutations are too weak or too strong.
  EXPECT_GT(loaded, 1000);
  EXPECT_GT(failed, 1000);
  std::printf("loader mutants: %d loaded, %d rejected\n", loaded, failed);
}

TEST(TokenizerInputFuzz, RandomInputThroughRealTokenizers) {
  constexpr int kRoundsPerTokenizer = 17000;  // x 2 tokenizers x 3 inputs (bytes, UTF-8, ids)
  int operations = 0;
  for (const char* name : {"llama2", "qwen3"}) {
    auto loaded = Tokenizer::load(model_file(name));
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
    const Tokenizer& tokenizer = **loaded;
    Rng rng(7);
    for (int i = 0; i < kRoundsPerTokenizer; ++i) {
      const std::string bytes = random_bytes(rng, 24);
      auto from_bytes = tokenizer.encode(bytes, {.add_special_tokens = pick(rng, 2) == 0});
      ASSERT_EQ(from_bytes.is_ok(), is_valid_utf8(bytes)) << name << ": encode of random bytes";

      const std::string text = random_utf8(rng, 24);
      auto ids = tokenizer.encode(text);
      ASSERT_TRUE(ids.is_ok()) << name << ": " << ids.status().message();
      check_decode(tokenizer, *ids, {.skip_special_tokens = pick(rng, 2) == 0});
      check_streaming(tokenizer, *ids, {}, /*check_join=*/true);

      const std::vector<int32_t> random = random_ids(rng, tokenizer.vocab_size(), 24);
      check_decode(tokenizer, random, {});
      check_streaming(tokenizer, random, {.skip_special_tokens = pick(rng, 2) == 0}, /*check_join=*/true);
      operations += 3;
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GE(operations, 100000);
}

}  // namespace
}  // namespace onnx_genai
