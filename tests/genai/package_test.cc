// Model packages: onnxruntime-genai folders and Hugging Face export layouts load; broken ones
// fail with one message naming the file, key or input. Decoder I/O derivation on declared
// inputs/outputs alone (name patterns, config templates, cache disciplines, errors).
#include <gtest/gtest.h>

#include "genai/decoder_io.h"
#include "genai/package.h"
#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using genai::DecoderIo;
using genai::GraphFacts;
using genai::Package;

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void expect_load_error(const std::string& path, const std::vector<std::string>& needles) {
  auto model = genai::Model::load(path);
  ASSERT_FALSE(model.is_ok()) << path;
  const std::string& message = model.status().message();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  for (const std::string& needle : needles) {
    EXPECT_NE(message.find(needle), std::string::npos) << message << "\n  wanted: " << needle;
  }
}

class PackageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new testing::ScopedTempDir();
    const testing::ParityFixture genai{"genai", {"--preset", "llama", "--style", "genai"}, {}, 0, ""};
    const testing::ParityFixture standard{"standard", {"--preset", "llama", "--style", "standard"}, {}, 0, ""};
    genai_dir_ = testing::build_model_or_fail(genai, scratch_->path());
    standard_dir_ = testing::build_model_or_fail(standard, scratch_->path());
  }
  static void TearDownTestSuite() { delete scratch_; }

  void SetUp() override {
    ASSERT_FALSE(genai_dir_.empty());
    ASSERT_FALSE(standard_dir_.empty());
    ASSERT_TRUE(local_.valid());
  }

  // A copy of a built model folder to break.
  fs::path copy_of(const fs::path& dir, const std::string& name) {
    const fs::path copy = local_.path() / name;
    fs::copy(dir, copy, fs::copy_options::recursive);
    return copy;
  }

  static testing::ScopedTempDir* scratch_;
  static fs::path genai_dir_, standard_dir_;
  testing::ScopedTempDir local_;
};

testing::ScopedTempDir* PackageTest::scratch_ = nullptr;
fs::path PackageTest::genai_dir_, PackageTest::standard_dir_;

TEST_F(PackageTest, MissingFolderOrConfig) {
  expect_load_error((local_.path() / "nowhere").string(), {"nowhere", "no such model folder"});
  const fs::path empty = local_.path() / "empty";
  fs::create_directory(empty);
  expect_load_error(empty.string(), {empty.string(), "no genai_config.json or config.json"});
}

TEST_F(PackageTest, GarbledGenaiConfig) {
  const fs::path dir = copy_of(genai_dir_, "garbled");
  write(dir / "genai_config.json", "{\"model\": {\"decoder\": [1, 2,,]}}");
  expect_load_error(dir.string(), {(dir / "genai_config.json").string(), "not valid JSON", "line 1, column"});
  write(dir / "genai_config.json", "[]");
  expect_load_error(dir.string(), {"genai_config.json", "expected a JSON object, got array"});
}

TEST_F(PackageTest, ConfigValueOfTheWrongType) {
  const fs::path dir = copy_of(genai_dir_, "wrong_type");
  nlohmann::json config = read_json(dir / "genai_config.json");
  config["model"]["decoder"]["head_size"] = "abc";
  write(dir / "genai_config.json", config.dump());
  expect_load_error(dir.string(), {"genai_config.json", "model.decoder.head_size must be an integer, got \"abc\""});
  config = read_json(genai_dir_ / "genai_config.json");
  config["model"]["eos_token_id"] = {2, "x"};
  write(dir / "genai_config.json", config.dump());
  expect_load_error(dir.string(), {"model.eos_token_id must be a token id or a list of token ids"});
}

TEST_F(PackageTest, MissingDecoderFile) {
  const fs::path dir = copy_of(genai_dir_, "no_file");
  nlohmann::json config = read_json(dir / "genai_config.json");
  config["model"]["decoder"]["filename"] = "nope.onnx";
  write(dir / "genai_config.json", config.dump());
  expect_load_error(dir.string(), {"nope.onnx", "decoder model file not found"});
}

TEST_F(PackageTest, GarbledGenerationConfig) {
  const fs::path dir = copy_of(genai_dir_, "bad_generation_config");
  write(dir / "generation_config.json", "{\"eos_token_id\": ");
  expect_load_error(dir.string(), {"generation_config.json", "not valid JSON"});
}

TEST_F(PackageTest, UnmappableInputName) {
  const fs::path dir = copy_of(genai_dir_, "renamed");
  nlohmann::json config = read_json(dir / "genai_config.json");
  config["model"]["decoder"]["inputs"]["input_ids"] = "tokens";
  write(dir / "genai_config.json", config.dump());
  expect_load_error(dir.string(), {"model.onnx", "decoder input 'input_ids' [batch_size, sequence_length] cannot be mapped",
                                   "feeds tokens, attention_mask"});
}

TEST_F(PackageTest, GenerationConfigAddsEosIdsAndDefaults) {
  const fs::path dir = copy_of(genai_dir_, "generation_config");
  write(dir / "generation_config.json",
        R"({"eos_token_id": [7, 2], "do_sample": true, "temperature": 0.6, "top_p": 0.9, "max_new_tokens": 33})");
  auto model = genai::Model::load(dir.string());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  EXPECT_EQ((*model)->info().eos_token_ids, (std::vector<int32_t>{2, 7}));  // genai_config's first
  const genai::GeneratorParams params = (*model)->default_params();
  // genai_config.json's search section comes first: do_sample false, temperature 1.
  EXPECT_TRUE(params.sampling.greedy);
  EXPECT_EQ(params.sampling.temperature, 1.0f);
  EXPECT_EQ(params.sampling.top_p, 1.0f);
  EXPECT_EQ(params.max_new_tokens, 33);
  EXPECT_EQ(params.max_length, 256);
}

// The same graph as a Hugging Face export (config.json + onnx/model.onnx) gives the same tokens.
TEST_F(PackageTest, HuggingFaceExportLayout) {
  const fs::path dir = copy_of(standard_dir_, "hf_export");
  fs::remove(dir / "genai_config.json");
  nlohmann::json config = read_json(dir / "model_config.json");
  config["eos_token_id"] = {2, 5};
  config.erase("head_dim");  // derived from hidden_size / num_attention_heads
  write(dir / "config.json", config.dump());
  fs::create_directory(dir / "onnx");
  fs::rename(dir / "model.onnx", dir / "onnx" / "model.onnx");
  auto hf = genai::Model::load(dir.string());
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  const genai::ModelInfo& info = (*hf)->info();
  EXPECT_EQ(info.config_name, "config.json");
  EXPECT_EQ(fs::path(info.model_file), dir / "onnx" / "model.onnx");
  EXPECT_EQ(info.context_length, 256);
  EXPECT_EQ(info.eos_token_ids, (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(info.num_layers, 2);
  EXPECT_FALSE(info.shared_kv_buffer);
  EXPECT_FALSE(info.right_padding);

  auto original = genai::Model::load(standard_dir_.string());
  ASSERT_TRUE(original.is_ok());
  const std::vector<std::vector<int32_t>> prompts = {{5, 17, 300}, {9}};
  auto from_hf = testing::generate_greedy(**hf, prompts, 8);
  auto from_genai = testing::generate_greedy(**original, prompts, 8);
  ASSERT_TRUE(from_hf.is_ok() && from_genai.is_ok());
  EXPECT_EQ(*from_hf, *from_genai);

  fs::rename(dir / "onnx" / "model.onnx", dir / "onnx" / "model_q8.onnx");
  expect_load_error(dir.string(), {"no decoder model file", "model.onnx", "onnx/model_q4.onnx"});
  genai::ModelOptions options;
  options.onnx_file = "onnx/model_q8.onnx";
  EXPECT_TRUE(genai::Model::load(dir.string(), options).is_ok());
}

// --- decoder I/O from declared inputs and outputs --------------------------------------------

IoInfo io(std::string name, DType dtype, std::vector<std::string> dims) {
  IoInfo info;
  info.name = std::move(name);
  info.dtype = dtype;
  info.rank_known = true;
  for (const std::string& d : dims) {
    const bool number = !d.empty() && std::isdigit(static_cast<unsigned char>(d[0]));
    info.dims.push_back(number ? std::stoll(d) : -1);
    info.symbols.push_back(number ? "" : d);
  }
  return info;
}

struct DeclaredIo {
  std::vector<IoInfo> inputs, outputs;
};

// `pattern` with %d = layer and %s = "key" / "value".
std::string cache_name(const std::string& pattern, int64_t layer, bool value) {
  std::string text = pattern;
  text.replace(text.find("%d"), 2, std::to_string(layer));
  if (const size_t s = text.find("%s"); s != std::string::npos) text.replace(s, 2, value ? "value" : "key");
  return text;
}

// input_ids, attention_mask and per-layer caches named by `past` / `present` (with %d and %s for
// key/value), present's sequence dim named `present_seq`.
DeclaredIo decoder(int64_t layers, const std::string& past, const std::string& present,
                   const std::string& present_seq = "total", const std::string& heads = "2") {
  DeclaredIo g;
  g.inputs = {io("input_ids", DType::kI64, {"batch", "seq"}), io("attention_mask", DType::kI64, {"batch", "total"})};
  g.outputs = {io("logits", DType::kF32, {"batch", "seq", "50"})};
  for (int64_t l = 0; l < layers; ++l) {
    for (const bool value : {false, true}) {
      g.inputs.push_back(io(cache_name(past, l, value), DType::kF16, {"batch", heads, "past", "8"}));
      g.outputs.push_back(io(cache_name(present, l, value), DType::kF16, {"batch", heads, present_seq, "8"}));
    }
  }
  return g;
}

Result<DecoderIo> derive(const DeclaredIo& g, const Package& package = {}, const GraphFacts& facts = {}) {
  return genai::derive_decoder_io(g.inputs, g.outputs, package, facts);
}

void expect_error(const Result<DecoderIo>& result, const std::string& needle) {
  ASSERT_FALSE(result.is_ok()) << needle;
  EXPECT_NE(result.status().message().find(needle), std::string::npos) << result.status().message();
}

TEST(DecoderIo, NamePatternsPairPastWithPresent) {
  for (const auto& [past, present] : {std::pair{"past_key_values.%d.%s", "present.%d.%s"},
                                      std::pair{"past_%s_%d", "present_%s_%d"},
                                      std::pair{"model.layers.%d.past_%s", "model.layers.%d.present_%s"}}) {
    const DeclaredIo g = decoder(3, past, present);
    auto result = derive(g);
    ASSERT_TRUE(result.is_ok()) << past << ": " << result.status().message();
    EXPECT_EQ(result->num_layers, 3);
    EXPECT_EQ(result->kv_heads, 2);
    EXPECT_EQ(result->head_size, 8);
    EXPECT_EQ(result->kv_dtype, DType::kF16);
    EXPECT_EQ(result->vocab_size, 50);
    EXPECT_FALSE(result->shared_buffer);
    EXPECT_FALSE(result->right_padding);
    ASSERT_EQ(result->kv.size(), 6u);
    for (size_t i = 0; i < result->kv.size(); ++i) {
      const genai::KvBinding& kv = result->kv[i];
      EXPECT_EQ(kv.layer, static_cast<int64_t>(i / 2));
      EXPECT_EQ(kv.is_value, i % 2 == 1);
      EXPECT_EQ(g.inputs[kv.past_input].name, cache_name(past, kv.layer, kv.is_value));
      EXPECT_EQ(g.outputs[kv.present_output].name, cache_name(present, kv.layer, kv.is_value));
    }
  }
}

TEST(DecoderIo, ConfigTemplates) {
  const DeclaredIo g = decoder(2, "cache_in.%d.%s", "cache_out.%d.%s");
  Package package;
  package.names.past_key = "cache_in.%d.key";
  package.names.past_value = "cache_in.%d.value";
  package.names.present_key = "cache_out.%d.key";
  package.names.present_value = "cache_out.%d.value";
  auto result = derive(g, package);
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  EXPECT_EQ(result->num_layers, 2);
  expect_error(derive(g), "decoder input 'cache_in.0.key'");  // no "past" in the name, no template
}

TEST(DecoderIo, CacheDisciplines) {
  // present's sequence dim carries past's symbol: written in place.
  auto same_symbol = derive(decoder(1, "past_key_values.%d.%s", "present.%d.%s", "past"));
  ASSERT_TRUE(same_symbol.is_ok());
  EXPECT_TRUE(same_symbol->shared_buffer);
  EXPECT_TRUE(same_symbol->right_padding);
  // GroupQueryAttention reads the pasts; genai_config.json may still turn sharing off.
  const DeclaredIo g = decoder(1, "past_key_values.%d.%s", "present.%d.%s");
  GraphFacts facts;
  facts.inputs_read_by_gqa = {"past_key_values.0.key", "past_key_values.0.value"};
  auto gqa = derive(g, {}, facts);
  ASSERT_TRUE(gqa.is_ok());
  EXPECT_TRUE(gqa->shared_buffer);
  Package no_sharing;
  no_sharing.past_present_share_buffer = false;
  auto unshared = derive(g, no_sharing, facts);
  ASSERT_TRUE(unshared.is_ok());
  EXPECT_FALSE(unshared->shared_buffer);
  EXPECT_TRUE(unshared->right_padding);
}

TEST(DecoderIo, Errors) {
  DeclaredIo missing_present = decoder(2, "past_key_values.%d.%s", "present.%d.%s");
  missing_present.outputs.pop_back();
  expect_error(derive(missing_present),
               "decoder input 'past_key_values.1.value' has no matching present output (layer 1 value)");

  DeclaredIo gap = decoder(3, "past_key_values.%d.%s", "present.%d.%s");
  gap.inputs.erase(gap.inputs.begin() + 4, gap.inputs.begin() + 6);  // layer 1
  expect_error(derive(gap), "layer 1's key is missing");

  expect_error(derive(decoder(1, "past_key_values.%d.%s", "present.%d.%s", "total", "heads")),
               "decoder input 'past_key_values.0.key' [batch, heads, past, 8]: the head count (dim 1) is symbolic");
  Package heads;
  heads.num_kv_heads = 4;
  auto configured = derive(decoder(1, "past_key_values.%d.%s", "present.%d.%s", "total", "heads"), heads);
  ASSERT_TRUE(configured.is_ok());
  EXPECT_EQ(configured->kv_heads, 4);

  DeclaredIo extra = decoder(1, "past_key_values.%d.%s", "present.%d.%s");
  extra.inputs.push_back(io("token_type_ids", DType::kI64, {"batch", "seq"}));
  expect_error(derive(extra), "decoder input 'token_type_ids' [batch, seq] cannot be mapped");

  DeclaredIo merged = decoder(1, "past_key_values.%d.%s", "present.%d.%s");  // Optimum merged decoder
  merged.inputs.push_back(io("use_cache_branch", DType::kBool, {"1"}));
  auto branch = derive(merged);
  ASSERT_TRUE(branch.is_ok()) << branch.status().message();
  EXPECT_TRUE(branch->has(genai::InputRole::kUseCacheBranch));
  merged.inputs.back().dtype = DType::kF32;
  expect_error(derive(merged), "decoder input 'use_cache_branch' must be bool, got float32");

  DeclaredIo float_ids = decoder(1, "past_key_values.%d.%s", "present.%d.%s");
  float_ids.inputs[0].dtype = DType::kF32;
  expect_error(derive(float_ids), "decoder input 'input_ids' must be int64 or int32, got float32");

  DeclaredIo no_logits = decoder(1, "past_key_values.%d.%s", "present.%d.%s");
  no_logits.outputs[0].name = "scores";
  expect_error(derive(no_logits), "the decoder has no output named 'logits'");

  DeclaredIo mixed = decoder(2, "past_key_values.%d.%s", "present.%d.%s");
  mixed.inputs[4].dims[3] = 16;
  expect_error(derive(mixed), "decoder input 'past_key_values.1.key' float16 [batch, 2, past, 16] differs");
}

}  // namespace
}  // namespace onnx_genai
