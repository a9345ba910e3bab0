// Unit tests: bad input, small hand-checked tokenizers for the components the real
// tokenizer.json files do not exercise, and the streaming detokenizer.
#include <gtest/gtest.h>

#include "onnx_genai/tokenizer.h"

namespace onnx_genai {
namespace {

std::string model_dir(const std::string& name) {
  return std::string(OG_TOKENIZER_MODELS_DIR) + "/tokenizer-" + name + "/models";
}

std::unique_ptr<Tokenizer> from_json(const std::string& json, const std::string& config = "") {
  auto result = Tokenizer::from_json(json, config);
  EXPECT_TRUE(result.is_ok()) << result.status().message();
  return result.is_ok() ? std::move(result).value() : nullptr;
}

std::string load_error(const std::string& json) {
  auto result = Tokenizer::from_json(json);
  EXPECT_FALSE(result.is_ok());
  return result.is_ok() ? "" : result.status().message();
}

// A tiny BPE: letters a-c, their merges, and a byte-level alphabet is not needed.
const char* kTinyBpe = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "<unk>": 5},
    "merges": ["a b", "ab c"], "unk_token": "<unk>"}})";

// ---- Bad input --------------------------------------------------------------------------

TEST(TokenizerBadInput, MalformedJsonIsAnError) {
  EXPECT_NE(load_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, )").find("JSON"), std::string::npos);
  EXPECT_NE(load_error("").find("JSON"), std::string::npos);
  EXPECT_NE(load_error("[1, 2]").find("JSON"), std::string::npos);
  EXPECT_NE(load_error(R"({"normalizer": null})").find("missing \"model\""), std::string::npos);
  EXPECT_NE(load_error(R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})").find("integer"),
            std::string::npos);
}

TEST(TokenizerBadInput, UnknownComponentTypesAreNamed) {
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}, "merges": []})";
  EXPECT_NE(load_error("{" + model + R"(, "normalizer": {"type": "Frobnicate"}})").find("normalizer type \"Frobnicate\""),
            std::string::npos);
  EXPECT_NE(load_error("{" + model + R"(, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Zap"}]}})")
                .find("pre_tokenizer type \"Zap\""),
            std::string::npos);
  EXPECT_NE(load_error("{" + model + R"(, "decoder": {"type": "Blorp"}})").find("decoder type \"Blorp\""), std::string::npos);
  EXPECT_NE(load_error("{" + model + R"(, "post_processor": {"type": "Wrap"}})").find("post_processor type \"Wrap\""),
            std::string::npos);
  EXPECT_NE(load_error(R"({"model": {"type": "Quantum", "vocab": {}}})").find("model type \"Quantum\""), std::string::npos);
}

TEST(TokenizerBadInput, BadRegexAndMergesAreReported) {
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}, "merges": []})";
  EXPECT_NE(load_error("{" + model + R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(ab"}, "behavior": "Isolated"}})")
                .find("Split pre_tokenizer"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a z"]}})").find("not in the vocab"),
            std::string::npos);
}

TEST(TokenizerBadInput, IdsOutsideTheVocabularyAreRejectedAtLoad) {
  // Ids index dense tables: a huge one must be an error, not a multi-gigabyte allocation.
  EXPECT_NE(load_error(R"({"model": {"type": "BPE", "vocab": {"a": 1099511627776}, "merges": []}})").find("out of range"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})").find("out of range"),
            std::string::npos);
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []})";
  EXPECT_NE(load_error("{" + model + R"(, "added_tokens": [{"id": 4294967296, "content": "<x>"}]})").find("added_tokens[0]"),
            std::string::npos);
  // A post-processor id must name a token, or encode would hand the model an id it lacks.
  const std::string roberta = R"(, "post_processor": {"type": "RobertaProcessing", "cls": ["<s>", 7], "sep": ["b", 1]}})";
  EXPECT_NE(load_error("{" + model + roberta).find("id 7 is outside the vocabulary (size 2)"), std::string::npos);
  const std::string templ = R"(, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}},
      {"Sequence": {"id": "A"}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [-3], "tokens": ["<s>"]}}}})";
  EXPECT_NE(load_error("{" + model + templ).find("id -3 is outside the vocabulary"), std::string::npos);
}

TEST(TokenizerBadInput, InvalidUtf8AndDeepNestingInTheFileAreErrors) {
  EXPECT_NE(load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\xC3\": 0}, \"merges\": []}}").find("invalid UTF-8"),
            std::string::npos);
  std::string deep = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": )";
  deep += std::string(300, '[') + std::string(300, ']') + "}";
  EXPECT_NE(load_error(deep).find("nesting deeper than 256"), std::string::npos);
}

TEST(TokenizerBadInput, InvalidUtf8InputIsAnErrorWithItsOffset) {
  auto tokenizer = from_json(kTinyBpe);
  ASSERT_TRUE(tokenizer);
  for (const std::string& bad : {std::string("ab\xff"), std::string("a\xc3"), std::string("\xed\xa0\x80"),
                                std::string("ab\xc0\xaf"), std::string("\xf4\x90\x80\x80")}) {
    auto ids = tokenizer->encode(bad);
    ASSERT_FALSE(ids.is_ok());
    EXPECT_NE(ids.status().message().find("not valid UTF-8"), std::string::npos) << ids.status().message();
  }
  auto ids = tokenizer->encode("ab\xff");
  EXPECT_NE(ids.status().message().find("byte offset 2"), std::string::npos) << ids.status().message();
}

TEST(TokenizerBadInput, OutOfRangeIdsFailToDecode) {
  auto tokenizer = from_json(kTinyBpe);
  ASSERT_TRUE(tokenizer);
  const std::vector<int32_t> ids = {0, 99};
  EXPECT_FALSE(tokenizer->decode(ids).is_ok());
  const std::vector<int32_t> negative = {-1};
  EXPECT_FALSE(tokenizer->decode(negative).is_ok());
}

TEST(TokenizerBadInput, MissingFileIsAnError) {
  auto result = Tokenizer::load("/nonexistent/dir");
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("/nonexistent/dir/tokenizer.json"), std::string::npos);
}

// ---- Hand-checked small tokenizers --------------------------------------------------------

TEST(TokenizerModels, BpeAppliesMergesByRankAndFallsBackToUnknown) {
  auto tokenizer = from_json(kTinyBpe);
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(*tokenizer->encode("abc"), (std::vector<int32_t>{4}));
  EXPECT_EQ(*tokenizer->encode("abab"), (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(*tokenizer->encode("cab"), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(*tokenizer->encode("axb"), (std::vector<int32_t>{0, 5, 1}));
}

TEST(TokenizerModels, WordPieceWithBertComponents) {
  auto tokenizer = from_json(R"({
    "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "lowercase": true},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 1], "sep": ["[SEP]", 2]},
    "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "play": 3, "##ing": 4, "cafe": 5, "!": 6, "中": 7, "##s": 8}}})");
  ASSERT_TRUE(tokenizer);
  // "Café" lowercases and loses its accent; "中" is isolated; "xyz" is unknown as a whole word.
  EXPECT_EQ(*tokenizer->encode("Playing CAFÉ! 中 xyz plays"), (std::vector<int32_t>{1, 3, 4, 5, 6, 7, 0, 3, 8, 2}));
  EXPECT_EQ(*tokenizer->encode("playing", {.add_special_tokens = false}), (std::vector<int32_t>{3, 4}));
  const std::vector<int32_t> ids = {3, 4, 5, 6};
  EXPECT_EQ(*tokenizer->decode(ids), "playing cafe!");
}

TEST(TokenizerModels, UnigramPicksTheBestScoringSegmentation) {
  auto tokenizer = from_json(R"({
    "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
    "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
    "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["▁", -2.0], ["▁he", -3.0], ["llo", -3.0],
              ["▁hello", -5.5], ["h", -4.0], ["e", -4.0], ["l", -4.0], ["o", -4.0], ["▁w", -3.0], ["orld", -3.0]]}})");
  ASSERT_TRUE(tokenizer);
  // "▁hello" alone (-5.5) beats "▁he"+"llo" (-6.0); "▁world" = "▁w"+"orld"; "z" is unknown.
  EXPECT_EQ(*tokenizer->encode("hello world"), (std::vector<int32_t>{4, 9, 10}));
  EXPECT_EQ(*tokenizer->encode("hez"), (std::vector<int32_t>{2, 0}));
  const std::vector<int32_t> ids = {4, 9, 10};
  EXPECT_EQ(*tokenizer->decode(ids), "hello world");
}

TEST(TokenizerNormalizers, UnicodeFormsAndLowercase) {
  const std::string model = R"("model": {"type": "WordPiece", "unk_token": "?", "vocab": {"?": 0}})";
  struct Case {
    const char* normalizer;
    const char* input;
    const char* expected_token;  // the single WordPiece token the normalized text must equal
  };
  // Hand-checked against Unicode's normalization charts.
  const Case cases[] = {
      {R"({"type": "NFC"})", "e\xCC\x81", "\xC3\xA9"},                       // e + U+0301 -> é
      {R"({"type": "NFD"})", "\xC3\xA9", "e\xCC\x81"},                       // é -> e + U+0301
      {R"({"type": "NFKC"})", "\xEF\xAC\x81", "fi"},                         // U+FB01 ligature
      {R"({"type": "NFKD"})", "\xE1\xBA\x9B\xCC\xA3", "s\xCC\xA3\xCC\x87"},  // U+1E9B U+0323
      {R"({"type": "NFC"})", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"},  // Hangul L V T -> 각
      {R"({"type": "Lowercase"})", "\xCE\x9F\xCE\xA3", "\xCE\xBF\xCF\x82"},  // ΟΣ -> ος (final sigma)
      {R"({"type": "StripAccents"})", "a\xCC\x81", "a"},
  };
  for (const Case& c : cases) {
    const std::string json = std::string("{") + model + R"(, "normalizer": )" + c.normalizer + "}";
    auto result = Tokenizer::from_json(json);
    ASSERT_TRUE(result.is_ok()) << result.status().message();
    auto& tokenizer = *result;
    // Add the expected text as a vocabulary token via a second tokenizer with it in vocab.
    const std::string with_token = std::string("{") + R"("model": {"type": "WordPiece", "unk_token": "?", "vocab": {"?": 0, ")" +
                                   c.expected_token + R"(": 1}}, "normalizer": )" + c.normalizer + "}";
    auto expecting = Tokenizer::from_json(with_token);
    ASSERT_TRUE(expecting.is_ok()) << expecting.status().message();
    EXPECT_EQ(*(*expecting)->encode(c.input), (std::vector<int32_t>{1})) << c.normalizer << " " << c.input;
    EXPECT_EQ(*tokenizer->encode(c.input), (std::vector<int32_t>{0}));
  }
}

TEST(TokenizerAddedTokens, LstripRstripAndSingleWord) {
  auto tokenizer = from_json(R"({
    "added_tokens": [{"id": 3, "content": "<m>", "special": true, "lstrip": true, "rstrip": true},
                     {"id": 4, "content": "cat", "special": false, "single_word": true, "normalized": false}],
    "pre_tokenizer": {"type": "WhitespaceSplit"},
    "model": {"type": "WordPiece", "unk_token": "?", "vocab": {"?": 0, "a": 1, "b": 2, "concat": 5}}})");
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(*tokenizer->encode("a  <m>   b"), (std::vector<int32_t>{1, 3, 2}));
  EXPECT_EQ(*tokenizer->encode("a cat b"), (std::vector<int32_t>{1, 4, 2}));
  EXPECT_EQ(*tokenizer->encode("concat"), (std::vector<int32_t>{5}));  // not a word of its own
  EXPECT_TRUE(tokenizer->is_special(3));
  EXPECT_FALSE(tokenizer->is_special(4));
}

// ---- Streaming detokenizer ----------------------------------------------------------------

TEST(StreamingDetokenizer, HoldsBackPartialUtf8FromByteTokens) {
  auto loaded = Tokenizer::load(model_dir("llama2"));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  const Tokenizer& tokenizer = **loaded;
  // "▁" then the three byte-fallback tokens of U+4F60 "你" (E4 BD A0) one at a time.
  const std::vector<int32_t> ids = {*tokenizer.token_to_id("\xE2\x96\x81" "a"), *tokenizer.token_to_id("<0xE4>"),
                                    *tokenizer.token_to_id("<0xBD>"), *tokenizer.token_to_id("<0xA0>"),
                                    *tokenizer.token_to_id("!")};
  StreamingDetokenizer stream(tokenizer);
  EXPECT_EQ(*stream.put(ids[0]), "a");
  EXPECT_EQ(*stream.put(ids[1]), "");
  EXPECT_EQ(*stream.put(ids[2]), "");
  EXPECT_EQ(*stream.put(ids[3]), "\xE4\xBD\xA0");
  EXPECT_EQ(*stream.put(ids[4]), "!");
  EXPECT_EQ(*stream.flush(), "");
}

TEST(StreamingDetokenizer, ByteLevelPiecesConcatenateToTheFullDecode) {
  auto loaded = Tokenizer::load(model_dir("qwen3"));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  const Tokenizer& tokenizer = **loaded;
  const std::string text = "Emoji 👨‍👩‍👧‍👦 and 你好, <|im_start|>user\nnaïve  café 🇯🇵!";
  auto ids = tokenizer.encode(text);
  ASSERT_TRUE(ids.is_ok());
  StreamingDetokenizer stream(tokenizer);
  std::string joined;
  for (int32_t id : *ids) {
    auto piece = stream.put(id);
    ASSERT_TRUE(piece.is_ok());
    // Every emitted piece is whole UTF-8 characters: decoding it as bytes changes nothing.
    EXPECT_EQ(piece->find("\xEF\xBF\xBD"), std::string::npos) << "partial character emitted";
    joined += *piece;
  }
  joined += *stream.flush();
  EXPECT_EQ(joined, text);
  EXPECT_FALSE(stream.put(-5).is_ok());
}

TEST(StreamingDetokenizer, FlushEmitsAnIncompleteTailAsReplacement) {
  auto loaded = Tokenizer::load(model_dir("llama2"));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  StreamingDetokenizer stream(**loaded);
  EXPECT_EQ(*stream.put(*(*loaded)->token_to_id("<0xE4>")), "");
  EXPECT_EQ(*stream.flush(), "\xEF\xBF\xBD");
}

// token_bytes: what a token adds to a text it continues, byte tokens as raw bytes. The
// reference is decode() itself: the tokens of an encoded text spell its decoded text (up to the
// leading space a SentencePiece decoder drops from a sequence's first token).
TEST(TokenBytes, SpellWhatDecodeAppends) {
  for (const char* name : {"qwen3", "llama2", "gemma3"}) {
    auto tok = Tokenizer::load(model_dir(name));
    ASSERT_TRUE(tok.is_ok()) << tok.status().message();
    const Tokenizer& t = **tok;
    const auto ids = t.encode("Hello, wörld! 你好 {\"k\": [1, 2]}\n\tend", EncodeOptions{false});
    ASSERT_TRUE(ids.is_ok());
    std::string spelled;
    for (const int32_t id : *ids) spelled += t.token_bytes(id);
    DecodeOptions raw;
    raw.clean_up_tokenization_spaces = false;
    const auto decoded = t.decode(*ids, raw);
    ASSERT_TRUE(decoded.is_ok());
    // SentencePiece decoders drop the first token's leading space; token_bytes keeps it.
    EXPECT_EQ(spelled.substr(spelled.size() - decoded->size()), *decoded) << name;
    EXPECT_LE(spelled.size() - decoded->size(), 1u) << name;
  }
  auto llama2 = Tokenizer::load(model_dir("llama2"));
  ASSERT_TRUE(llama2.is_ok());
  EXPECT_EQ((*llama2)->token_bytes(*(*llama2)->token_to_id("<0x0A>")), "\n");
  EXPECT_EQ((*llama2)->token_bytes(*(*llama2)->token_to_id("<0xE4>")), "\xE4");  // half a character
  EXPECT_EQ((*llama2)->token_bytes(*(*llama2)->token_to_id("\xE2\x96\x81the")), " the");
  auto qwen3 = Tokenizer::load(model_dir("qwen3"));
  ASSERT_TRUE(qwen3.is_ok());
  EXPECT_EQ((*qwen3)->token_bytes(*(*qwen3)->token_to_id("\xC4\xA0the")), " the");  // Ġthe
  EXPECT_EQ((*qwen3)->token_bytes(-1), "");
}

}  // namespace
}  // namespace onnx_genai
