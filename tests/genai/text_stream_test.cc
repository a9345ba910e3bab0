// genai::TextStream (src/genai/text_stream.h) on the default model's tokenizer: an id the model
// can emit past the tokenizer's vocabulary (a padded vocabulary, as Qwen's 151,936 logits over
// 151,669 tokens) adds no text and stops nothing, as Hugging Face's decoders skip it; the text of
// the tokens around it is theirs alone; a negative id stays an error naming it.
#include <gtest/gtest.h>

#include <filesystem>

#include "genai/text_stream.h"

namespace onnx_genai {
namespace {

TEST(TextStream, IdsPastTheTokenizersVocabularyHaveNoText) {
  const auto dir = std::filesystem::path(OG_SOURCE_DIR) / "models/debian-prose-11m";
  auto tokenizer = Tokenizer::load(dir.string());
  ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.status().message();
  const std::vector<int32_t> ids = (*tokenizer)->encode("In the beginning God created", {.add_special_tokens = false}).value();
  const std::vector<std::string> stops;
  genai::TextStream stream(**tokenizer, stops, /*skip_special_tokens=*/true);
  const int32_t past = (*tokenizer)->vocab_size() + 3;
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto stopped = stream.put(ids[i], true, text);
    ASSERT_TRUE(stopped.is_ok()) << stopped.status().message();
    if (i == 1) {
      auto padded = stream.put(past, true, text);
      ASSERT_TRUE(padded.is_ok()) << padded.status().message();
      EXPECT_FALSE(*padded);
    }
  }
  ASSERT_TRUE(stream.finish(true, text).is_ok());
  EXPECT_EQ(text, (*tokenizer)->decode(ids).value());
  std::vector<int32_t> with_padding = ids;
  with_padding.insert(with_padding.begin() + 2, past);
  EXPECT_TRUE(stream.replay(with_padding).is_ok());
  auto negative = stream.put(-4, true, text);
  ASSERT_FALSE(negative.is_ok());
  EXPECT_NE(negative.status().message().find("token id -4"), std::string::npos) << negative.status().message();
}

}  // namespace
}  // namespace onnx_genai
