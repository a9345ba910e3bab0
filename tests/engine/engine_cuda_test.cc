// The serving engine on the GPU (the default model, paged KV in device memory, the CUDA
// PagedAttention kernels): each request's greedy tokens batched with others, with chunked prefill
// and staggered arrivals, equal its tokens alone, and every block is free afterwards. Skips
// without a usable GPU (CI); scripts/gpu-check runs it on the GPU machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>

#include "gpu_skip.h"
#include "onnx_genai/engine.h"
#include "oracle_io.h"

namespace onnx_genai::genai {
namespace {

// Tokens of each prompt under `p` (its seed + the prompt's index when sampled), all submitted at
// once (staggered by `stagger` steps).
std::vector<std::vector<int32_t>> engine_tokens(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                                RequestParams p, int stagger) {
  std::map<uint64_t, size_t> index;
  const std::optional<uint64_t> seed = p.sampling.seed;
  std::vector<std::vector<int32_t>> out(prompts.size());
  size_t added = 0;
  for (int step = 0; added < prompts.size() || engine.has_work(); ++step) {
    if (added < prompts.size() && step % std::max(stagger, 1) == 0) {
      if (seed) p.sampling.seed = *seed + added;
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

std::vector<std::vector<int32_t>> greedy_tokens(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                                int64_t new_tokens, int stagger) {
  RequestParams p;
  p.sampling.greedy = true;
  p.max_new_tokens = new_tokens;
  return engine_tokens(engine, prompts, p, stagger);
}

Result<std::unique_ptr<Engine>> load_default_model() {
  EngineOptions options;
  options.model.device = Device{DeviceType::kCuda, 0};
  options.max_num_batched_tokens = 64;
  options.max_num_seqs = 8;
  options.kv_cache_memory = int64_t{64} << 20;
  const std::string path = (std::filesystem::path(testing::source_dir()) / "models" / "debian-prose-11m").string();
  return Engine::load(path, options);
}

std::vector<std::vector<int32_t>> encode_all(const Engine& engine, const std::vector<const char*>& texts) {
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : texts) prompts.push_back(engine.model().encode(text).value());
  return prompts;
}

TEST(EngineCuda, BatchedGreedyTokensEqualEachRequestAlone) {
  OG_SKIP_WITHOUT_GPU();
  auto engine = load_default_model();
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  ASSERT_TRUE((*engine)->stats().paged);
  const auto prompts = encode_all(**engine, {"And God said", "In the beginning", "The LORD is my shepherd",
                                             "Blessed are the poor in spirit", "Then Jesus answered and said unto them",
                                             "Hear, O Israel", "A soft answer", "Vanity of vanities"});
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

// Sampled requests draw on the device (SampleTokens over the packed logit rows, each row with its
// request's parameters and its Sampler's next uniform): batched, each gets the tokens it gets
// alone, and the tokens the host Sampler draws from the same logits (logprobs keep a request on
// the host path).
TEST(EngineCuda, SampledTokensDrawnOnTheDeviceEqualTheHostSamplers) {
  OG_SKIP_WITHOUT_GPU();
  auto engine = load_default_model();
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  const auto prompts = encode_all(**engine, {"And God said", "In the beginning", "Hear, O Israel", "A soft answer",
                                             "Vanity of vanities", "The LORD is my shepherd"});
  RequestParams p;
  p.sampling.temperature = 0.9f;
  p.sampling.top_k = 40;
  p.sampling.top_p = 0.95f;
  p.sampling.seed = 1234;
  p.max_new_tokens = 24;
  const int64_t drawn_before = (*engine)->stats().device_sampled_tokens;
  const auto batched = engine_tokens(**engine, prompts, p, 2);
  EXPECT_GT((*engine)->stats().device_sampled_tokens, drawn_before) << "no token was drawn on the device";
  RequestParams on_host = p;
  on_host.sampling.logprobs = true;
  const int64_t drawn = (*engine)->stats().device_sampled_tokens;
  const auto host = engine_tokens(**engine, prompts, on_host, 1);
  EXPECT_EQ((*engine)->stats().device_sampled_tokens, drawn) << "logprobs must keep the draws on the host";
  int differing = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestParams alone_params = p;
    alone_params.sampling.seed = *p.sampling.seed + i;
    const auto alone = engine_tokens(**engine, {prompts[i]}, alone_params, 1)[0];
    EXPECT_EQ(batched[i], alone) << "prompt " << i << ": batched vs alone";
    EXPECT_EQ(batched[i], host[i]) << "prompt " << i << ": device draws vs the host Sampler";
    differing += batched[i] != host[i];
  }
  std::printf("[ engine ] %zu sampled requests: %d differ device vs host draws\n", prompts.size(), differing);
  EXPECT_EQ((*engine)->stats().kv_blocks_used, 0);
}

// Constrained requests draw on the device too: their masks are computed on host threads while
// the step's forward pass runs (LateInputs) and applied by SampleTokens. Greedy and seeded, batched,
// each gets the tokens the host Sampler picks from the same logits under the same constraint
// (logprobs keep a request on the host path), and the text matches the regex.
TEST(EngineCuda, ConstrainedDrawsOnTheDeviceEqualTheHostSamplers) {
  OG_SKIP_WITHOUT_GPU();
  auto engine = load_default_model();
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  const auto prompts = encode_all(**engine, {"And God said", "In the beginning", "Hear, O Israel", "A soft answer",
                                             "Vanity of vanities", "The LORD is my shepherd"});
  const std::string pattern = "[A-Z][a-z]+( [a-z]+){2,5}[.;]";
  const std::vector<int32_t>& eos = (*engine)->model().info().eos_token_ids;
  int complete = 0;
  for (const bool sampled : {false, true}) {
    RequestParams p;
    p.sampling.greedy = !sampled;
    if (sampled) {
      p.sampling.temperature = 0.8f;
      p.sampling.top_k = 30;
      p.sampling.seed = 99;
    }
    p.max_new_tokens = 64;
    p.constraint = ConstraintSpec{ConstraintKind::kRegex, pattern};
    const int64_t drawn_before = (*engine)->stats().device_sampled_tokens;
    const auto device = engine_tokens(**engine, prompts, p, 2);
    if (sampled) {
      EXPECT_GT((*engine)->stats().device_sampled_tokens, drawn_before) << "no constrained token was drawn on the device";
    }
    RequestParams on_host = p;
    on_host.sampling.logprobs = true;
    const auto host = engine_tokens(**engine, prompts, on_host, 1);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(device[i], host[i]) << (sampled ? "sampled" : "greedy") << " prompt " << i;
      if (device[i].empty() || std::find(eos.begin(), eos.end(), device[i].back()) == eos.end()) continue;  // cut by length
      const std::vector<int32_t> text_tokens(device[i].begin(), device[i].end() - 1);
      const std::string text = (*engine)->model().tokenizer()->decode(text_tokens, {}).value();
      EXPECT_TRUE(std::regex_match(text, std::regex(pattern))) << text;
      ++complete;
    }
  }
  EXPECT_GT(complete, 0) << "no request finished its sentence: the regex went unchecked";
  EXPECT_EQ((*engine)->stats().kv_blocks_used, 0);
}

}  // namespace
}  // namespace onnx_genai::genai
