// The serving engine on the GPU (the default model, paged KV in device memory, the CUDA
// PagedAttention kernels): each request's greedy tokens batched with others, with chunked prefill
// and staggered arrivals, equal its tokens alone, and every block is free afterwards. Skips
// without a usable GPU (CI); scripts/gpu-check runs it on the GPU machine.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>

#include "gpu_skip.h"
#include "onnx_genai/engine.h"
#include "oracle_io.h"

namespace onnx_genai::genai {
namespace {

// Greedy tokens of each prompt, all submitted at once (staggered by `stagger` steps).
std::vector<std::vector<int32_t>> greedy_tokens(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                                int64_t new_tokens, int stagger) {
  RequestParams p;
  p.sampling.greedy = true;
  p.max_new_tokens = new_tokens;
  std::map<uint64_t, size_t> index;
  std::vector<std::vector<int32_t>> out(prompts.size());
  size_t added = 0;
  for (int step = 0; added < prompts.size() || engine.has_work(); ++step) {
    if (added < prompts.size() && step % std::max(stagger, 1) == 0) {
      index[engine.add_request(prompts[added], p).value()] = added;
      ++added;
    }
    auto outputs = engine.step();
    EXPECT_TRUE(outputs.is_ok()) << outputs.status().message();
    if (!outputs.is_ok()) break;
    for (const RequestOutput& o : *outputs) {
      std::vector<int32_t>& tokens = out[index.at(o.id)];
      tokens.insert(tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
  }
  return out;
}

TEST(EngineCuda, BatchedGreedyTokensEqualEachRequestAlone) {
  OG_SKIP_WITHOUT_GPU();
  EngineOptions options;
  options.model.device = Device{DeviceType::kCuda, 0};
  options.max_num_batched_tokens = 64;
  options.max_num_seqs = 8;
  options.kv_cache_memory = int64_t{64} << 20;
  const std::string path = (std::filesystem::path(testing::source_dir()) / "models" / "debian-prose-11m").string();
  auto engine = Engine::load(path, options);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  ASSERT_TRUE((*engine)->stats().paged);
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"And God said", "In the beginning", "The LORD is my shepherd", "Blessed are the poor in spirit",
                           "Then Jesus answered and said unto them", "Hear, O Israel", "A soft answer", "Vanity of vanities"}) {
    prompts.push_back((*engine)->model().encode(text).value());
  }
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(greedy_tokens(**engine, {p}, 32, 1)[0]);
  const auto batched = greedy_tokens(**engine, prompts, 32, 2);
  int differing = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(batched[i], alone[i]) << "prompt " << i;
    differing += batched[i] != alone[i];
  }
  std::printf("[ engine ] %zu requests on %s: %d differ batched vs alone\n", prompts.size(),
              (*engine)->model().device().to_string().c_str(), differing);
  EXPECT_EQ((*engine)->stats().kv_blocks_used, 0);
}

}  // namespace
}  // namespace onnx_genai::genai
