// Fuzz test of package parsing, meant to run under ASan/UBSan (-DOG_SANITIZE=ON) as well as in the
// normal build: seeded mutants of the default model's genai_config.json, and of a Hugging Face
// config.json with a generation_config.json, in a folder that links the default model's decoder.
// Every mutant must load or fail with one line that names a file; nothing may throw. Mutants that
// load every few steps go on to a whole Model::load, where the graph meets the configs.
#include <gtest/gtest.h>

#include <fstream>

#include "fuzz_mutations.h"
#include "genai/package.h"
#include "genai_test_util.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kMutants = 3000;
constexpr int kModelLoadEvery = 150;  // a whole load maps the decoder: keep them few
constexpr uint64_t kSeed = 18;

const fs::path kDefaultModel = fs::path(OG_SOURCE_DIR) / "models/debian-prose-11m";

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// A new file each time: ext4 flushes a file truncated and rewritten when it is closed
// (auto_da_alloc), which made each write cost milliseconds.
void write_text(const fs::path& path, const std::string& text) {
  fs::remove(path);
  std::ofstream(path, std::ios::binary) << text;
}

// The one-line error every rejected mutant must give, naming a file in the package folder `dir`.
void expect_clean_error(const Status& status, const fs::path& dir, const std::string& mutant) {
  const std::string& message = status.message();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message << "\n  mutant: " << mutant;
  EXPECT_NE(message.find(dir.string()), std::string::npos) << message << "\n  mutant: " << mutant;
}

TEST(PackageFuzz, MutatedConfigsLoadOrFailCleanly) {
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const fs::path genai_dir = scratch.path() / "genai", hf_dir = scratch.path() / "hf";
  for (const fs::path& dir : {genai_dir, hf_dir}) {
    fs::create_directory(dir);
    fs::create_symlink(kDefaultModel / "model.onnx", dir / "model.onnx");
  }
  const json genai_seed = read_json(kDefaultModel / "genai_config.json");
  const json hf_seed = {{"num_hidden_layers", 8},      {"num_attention_heads", 5}, {"num_key_value_heads", 1},
                        {"hidden_size", 320},          {"vocab_size", 8192},       {"max_position_embeddings", 512},
                        {"eos_token_id", 0},           {"bos_token_id", 0},        {"text_config", {{"head_dim", 64}}}};
  const json generation_seed = {{"eos_token_id", json::array({0, 1})}, {"do_sample", true}, {"top_k", 50},
                                {"temperature", 0.7},                  {"max_new_tokens", 32}};

  testing::FuzzRng rng(kSeed);
  int loaded = 0, rejected = 0, model_loads = 0, crashes = 0;
  for (int i = 0; i < kMutants; ++i) {
    const bool genai = i % 2 == 0;
    const fs::path dir = genai ? genai_dir : hf_dir;
    std::string mutant;
    if (genai) {
      mutant = testing::mutate_json(rng, genai_seed);
      write_text(dir / "genai_config.json", mutant);
    } else {
      mutant = testing::mutate_json(rng, hf_seed);
      const std::string generation = testing::mutate_json(rng, generation_seed);
      write_text(dir / "config.json", mutant);
      write_text(dir / "generation_config.json", generation);
      mutant += " + generation_config.json " + generation;
    }
    try {
      const Result<genai::Package> package = genai::load_package(dir.string());
      if (!package.is_ok()) {
        ++rejected;
        expect_clean_error(package.status(), dir, mutant);
        continue;
      }
      ++loaded;
      if (loaded % kModelLoadEvery != 0) continue;
      ++model_loads;
      genai::ModelOptions one_thread;
      one_thread.num_threads = 1;  // no pool to start: the load is the checks, not the threads
      const auto model = genai::Model::load(dir.string(), one_thread);
      if (!model.is_ok()) expect_clean_error(model.status(), dir, mutant);
    } catch (const std::exception& error) {
      ++crashes;
      ADD_FAILURE() << "exception " << error.what() << "\n  mutant: " << mutant;
    }
  }
  std::printf("[ fuzz     ] package configs (seed %llu): %d executions (%d loaded, %d rejected, %d whole model loads), "
              "%d crashes\n",
              static_cast<unsigned long long>(kSeed), kMutants, loaded, rejected, model_loads, crashes);
  EXPECT_EQ(crashes, 0);
  EXPECT_GT(loaded, 0);  // the mutants reach the checks past the parser
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace onnx_genai
