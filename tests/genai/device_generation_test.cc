// The generator with its decoder on a device, checked without a GPU: a stand-in device in tracked
// host memory that runs the CPU kernels (tests/runtime/stand_in_device.h). Every node runs "on
// the device": token ids, masks and positions go up, logits (or greedy tokens) come down,
// initializers are uploaded once, and the KV cache lives in the stand-in's memory, where it grows
// and rewinds. The kernels are the CPU's, run in the same order, so tokens and perplexity must
// equal a CPU session's exactly; what this checks is the device plumbing around them.
//
// A plain greedy run (no logit processor, no logprobs) takes its tokens from the graph's argmax
// (src/genai/greedy_output.h), and a run sampled through temperature / top-k / top-p / min-p alone
// from the graph's draw (src/genai/device_sampling.h) with each sequence's own seeded uniforms:
// the logits stay on the device and only token ids come down, which the stand-in's download count
// shows. Runs that need the logits on the host (penalties, no_repeat_ngram from the package's
// defaults, logprobs) bring them down as before.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "genai/model_parts.h"
#include "genai_test_util.h"
#include "onnx_genai/genai.h"
#include "runtime/stand_in_device.h"

namespace onnx_genai {
namespace {

namespace fs = std::filesystem;
using testing::StandInMemory;
using testing::StandInScope;

const Device kStandIn{DeviceType::kCuda, 0};

Result<std::unique_ptr<genai::Model>> load(const fs::path& dir, Device device) {
  genai::ModelOptions options;
  options.num_threads = 2;
  options.device = device;
  options.initial_kv_capacity = 8;  // several growths within a test
  return genai::Model::load(dir.string(), options);
}

using Rows = std::vector<std::vector<int32_t>>;

// Tokens of each prompt under `sampling` (eos ignored): `first` of them, then (when `rewind_to` > 0)
// a rewind of every sequence to `rewind_to` tokens and `second` more.
Result<Rows> generate(const genai::Model& model, const Rows& prompts, const SamplingParams& sampling, int first,
                      size_t rewind_to = 0, int second = 0) {
  genai::GeneratorParams params;
  params.sampling = sampling;
  params.ignore_eos = true;
  params.prompts = prompts;
  OG_ASSIGN_OR_RETURN(auto generator, genai::Generator::create(model, params));
  for (int i = 0; i < first; ++i) OG_RETURN_IF_ERROR(generator->generate_next());
  if (rewind_to > 0) {
    OG_RETURN_IF_ERROR(generator->rewind(rewind_to));
    for (int i = 0; i < second; ++i) OG_RETURN_IF_ERROR(generator->generate_next());
  }
  Rows out;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const auto tokens = generator->tokens(b);
    out.emplace_back(tokens.begin(), tokens.end());
  }
  return out;
}

SamplingParams plain_greedy() {
  SamplingParams sampling;
  sampling.greedy = true;
  return sampling;
}

Result<Rows> greedy(const genai::Model& model, const Rows& prompts, int first, size_t rewind_to = 0, int second = 0) {
  return generate(model, prompts, plain_greedy(), first, rewind_to, second);
}

Result<Rows> encode_all(const genai::Model& model, std::initializer_list<const char*> texts) {
  Rows prompts;
  for (const char* text : texts) {
    OG_ASSIGN_OR_RETURN(std::vector<int32_t> ids, model.encode(text));
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

const fs::path kPackage = fs::path(testing::source_dir()) / "models" / "debian-prose-11m";

TEST(DeviceGeneration, DefaultModelOnAStandInDeviceGivesTheCpuTokensAndPerplexity) {
  auto cpu = load(kPackage, Device::cpu());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  auto prompts = encode_all(**cpu, {"And God said", "The quick brown fox jumps over", "In the beginning"});
  ASSERT_TRUE(prompts.is_ok()) << prompts.status().message();
  auto text = testing::read_text_file(kPackage / "valid.txt");
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  auto ids = (*cpu)->encode(text->substr(0, 3000));
  ASSERT_TRUE(ids.is_ok()) << ids.status().message();
  genai::PerplexityOptions windows;
  windows.window = 256;
  windows.stride = 128;
  auto want_tokens = greedy(**cpu, *prompts, 40);
  ASSERT_TRUE(want_tokens.is_ok()) << want_tokens.status().message();
  auto want_ppl = genai::evaluate_perplexity(**cpu, *ids, windows);
  ASSERT_TRUE(want_ppl.is_ok()) << want_ppl.status().message();

  StandInMemory memory;
  StandInScope scope(memory);
  auto device = load(kPackage, kStandIn);
  ASSERT_TRUE(device.is_ok()) << device.status().message();
  EXPECT_EQ(scope.opened, 1);
  const int64_t downloaded_at_load = scope.device->downloaded_bytes;
  auto got_tokens = greedy(**device, *prompts, 40);
  ASSERT_TRUE(got_tokens.is_ok()) << got_tokens.status().message();
  EXPECT_EQ(*got_tokens, *want_tokens);
  // 40 steps of 3 sequences: 120 token ids came down (int64), not a single row of logits.
  const int64_t vocab = (*device)->info().vocab_size;
  EXPECT_LT(scope.device->downloaded_bytes - downloaded_at_load, vocab) << "greedy tokens, not logits, come to the host";
  const SessionStats stats = (*device)->session_stats();
  EXPECT_EQ(stats.last_plan_device_steps, stats.last_plan_steps - stats.last_plan_transfers)
      << "every kernel runs on the device";
  EXPECT_GT(stats.last_plan_transfers, 0);
  EXPECT_GT(stats.device_arena_bytes, 0);
  auto got_ppl = genai::evaluate_perplexity(**device, *ids, windows);
  ASSERT_TRUE(got_ppl.is_ok()) << got_ppl.status().message();
  EXPECT_EQ(got_ppl->nll, want_ppl->nll);
}

// Out of device memory when admitting a request (its KV cache or activations do not fit): an
// error naming the bytes needed and free, and the model goes on serving requests that fit.
TEST(DeviceGeneration, OutOfDeviceMemoryIsAnErrorAndTheModelServesTheNextRequest) {
  StandInMemory memory;
  StandInScope scope(memory);
  auto device = load(kPackage, kStandIn);
  ASSERT_TRUE(device.is_ok()) << device.status().message();
  auto small = encode_all(**device, {"And God said"});
  ASSERT_TRUE(small.is_ok()) << small.status().message();
  auto want = greedy(**device, *small, 8);  // uploads the weights and sizes the arenas
  ASSERT_TRUE(want.is_ok()) << want.status().message();

  memory.capacity = memory.capacity - memory.free_bytes() + (256 << 10);  // 256 KiB left
  auto one = encode_all(**device, {"The quick brown fox jumps over the lazy dog, and the dog sleeps on"});
  ASSERT_TRUE(one.is_ok()) << one.status().message();
  const Rows big(32, one->front());
  auto refused = greedy(**device, big, 8);
  ASSERT_FALSE(refused.is_ok()) << "a batch of 32 fits in 256 KiB";
  const std::string& message = refused.status().message();
  std::printf("[ refused  ] %s\n", message.c_str());
  EXPECT_NE(message.find("bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("free"), std::string::npos) << message;
  EXPECT_NE(message.find("cuda:0"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;

  auto again = greedy(**device, *small, 8);
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(*again, *want);
}

// Runs that need each row's logits on the host bring them down (a row per sequence and step at
// least) and still give the CPU's tokens: seeded sampling with a repetition penalty, the package's
// own defaults (greedy with no_repeat_ngram_size 3), greedy with logprobs. Only a device session's
// graph has the greedy and sampled tokens outputs.
TEST(DeviceGeneration, RunsThatNeedTheLogitsTakeThemToTheHost) {
  auto cpu = load(kPackage, Device::cpu());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  EXPECT_FALSE(genai::ModelAccess::parts(**cpu).io.greedy_tokens_output) << "a CPU session computes no extra output";
  EXPECT_FALSE(genai::ModelAccess::parts(**cpu).io.sampled_tokens_output) << "a CPU session computes no extra output";
  auto prompts = encode_all(**cpu, {"And God said", "In the beginning"});
  ASSERT_TRUE(prompts.is_ok()) << prompts.status().message();
  SamplingParams sampled;
  sampled.temperature = 0.8f;
  sampled.top_k = 50;
  sampled.repetition_penalty = 1.1f;  // a processor the graph does not run
  sampled.seed = 7;
  const SamplingParams package_defaults = (*cpu)->default_params().sampling;
  ASSERT_TRUE(package_defaults.is_greedy());
  ASSERT_GT(package_defaults.no_repeat_ngram_size, 0);
  SamplingParams with_logprobs = plain_greedy();
  with_logprobs.logprobs = true;
  with_logprobs.top_logprobs = 2;

  StandInMemory memory;
  StandInScope scope(memory);
  auto device = load(kPackage, kStandIn);
  ASSERT_TRUE(device.is_ok()) << device.status().message();
  EXPECT_TRUE(genai::ModelAccess::parts(**device).io.greedy_tokens_output);
  EXPECT_TRUE(genai::ModelAccess::parts(**device).io.sampled_tokens_output);
  constexpr int kSteps = 12;
  const int64_t row_bytes = 2 * (*device)->info().vocab_size;  // the narrowest float logits
  const std::pair<const char*, SamplingParams> kRuns[] = {{"temperature 0.8, top_k 50, repetition_penalty 1.1", sampled},
                                                          {"package defaults", package_defaults},
                                                          {"greedy with logprobs", with_logprobs}};
  for (const auto& [what, sampling] : kRuns) {
    auto want = generate(**cpu, *prompts, sampling, kSteps);
    ASSERT_TRUE(want.is_ok()) << what << ": " << want.status().message();
    const int64_t before = scope.device->downloaded_bytes;
    auto got = generate(**device, *prompts, sampling, kSteps);
    ASSERT_TRUE(got.is_ok()) << what << ": " << got.status().message();
    EXPECT_EQ(*got, *want) << what;
    EXPECT_GE(scope.device->downloaded_bytes - before, kSteps * static_cast<int64_t>(prompts->size()) * row_bytes)
        << what << ": the logits come to the host";
  }
}

// Seeded sampling through temperature, top-k, top-p and min-p takes each token from the graph's
// draw, given the uniform each sequence's own Sampler would have drawn: a ragged batch gives the
// CPU session's tokens step for step, through a rewind, and no row of logits comes down. Without
// logit rows (all S positions computed) a ragged prefill leaves the shorter rows' last logits
// before the end, so that step samples on the host; the decode steps after it draw in the graph,
// and the tokens are still the CPU's.
TEST(DeviceGeneration, ASeededSampledRunDrawsInTheGraphAndGivesTheCpuTokens) {
  genai::ModelOptions every_position;  // no logit rows: the logits of all S positions
  every_position.num_threads = 2;
  every_position.select_logit_rows = false;
  auto cpu = load(kPackage, Device::cpu());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  auto cpu_all = genai::Model::load(kPackage.string(), every_position);
  ASSERT_TRUE(cpu_all.is_ok()) << cpu_all.status().message();
  auto prompts = encode_all(**cpu, {"And God said", "The quick brown fox jumps over", "In the beginning"});
  ASSERT_TRUE(prompts.is_ok()) << prompts.status().message();
  SamplingParams sampled;
  sampled.temperature = 0.9f;
  sampled.top_k = 40;
  sampled.top_p = 0.9f;
  sampled.min_p = 0.02f;
  sampled.seed = 11;
  SamplingParams plain;  // the whole distribution: the draw alone
  plain.seed = 12;
  for (const auto& [what, sampling] : {std::pair{"temperature 0.9, top_k 40, top_p 0.9, min_p 0.02", sampled},
                                       std::pair{"temperature 1, nothing cut", plain}}) {
    auto want = generate(**cpu, *prompts, sampling, 24, 10, 12);
    ASSERT_TRUE(want.is_ok()) << what << ": " << want.status().message();
    auto want_all = generate(**cpu_all, *prompts, sampling, 24, 10, 12);
    ASSERT_TRUE(want_all.is_ok()) << what << ": " << want_all.status().message();

    StandInMemory memory;
    StandInScope scope(memory);
    auto device = load(kPackage, kStandIn);
    ASSERT_TRUE(device.is_ok()) << device.status().message();
    const int64_t before = scope.device->downloaded_bytes;
    auto got = generate(**device, *prompts, sampling, 24, 10, 12);
    ASSERT_TRUE(got.is_ok()) << what << ": " << got.status().message();
    EXPECT_EQ(*got, *want) << what;
    EXPECT_LT(scope.device->downloaded_bytes - before, (*device)->info().vocab_size) << what << ": token ids, not logits";

    genai::ModelOptions device_all = every_position;
    device_all.device = kStandIn;
    auto device_every_position = genai::Model::load(kPackage.string(), device_all);
    ASSERT_TRUE(device_every_position.is_ok()) << device_every_position.status().message();
    auto ragged = generate(**device_every_position, *prompts, sampling, 24, 10, 12);
    ASSERT_TRUE(ragged.is_ok()) << what << ": " << ragged.status().message();
    EXPECT_EQ(*ragged, *want_all) << what << ", every position's logits";
  }
}

// A concatenated cache (standard-style graph) re-lays its rows out when rewound: through the
// device allocator's copy_rows here.
TEST(DeviceGeneration, ConcatenatedCacheRewindsOnTheDevice) {
  testing::ScopedTempDir scratch;
  ASSERT_TRUE(scratch.valid());
  const testing::ParityFixture fixture{"standard_llama_fp32", {"--preset", "llama", "--style", "standard"}, {}, 0, ""};
  const fs::path dir = testing::build_model_or_fail(fixture, scratch.path());
  ASSERT_FALSE(dir.empty());
  const std::vector<std::vector<int32_t>> prompts = {{5, 17, 300, 42, 7, 99, 3}, {11, 12}, {800, 1, 2, 3, 4}};
  auto cpu = load(dir, Device::cpu());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  auto want = greedy(**cpu, prompts, 20, 10, 12);
  ASSERT_TRUE(want.is_ok()) << want.status().message();

  StandInMemory memory;
  StandInScope scope(memory);
  auto device = load(dir, kStandIn);
  ASSERT_TRUE(device.is_ok()) << device.status().message();
  auto got = greedy(**device, prompts, 20, 10, 12);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ(*got, *want);
}

// A GPU this build has no code for (another compute capability): the model runs on the CPU, says
// why, and gives the CPU's tokens; with cpu_fallback off, loading fails with the driver's reason.
TEST(DeviceGeneration, AGpuThisBuildCannotRunOnFallsBackToTheCpuAndSaysWhy) {
  const std::string why = "cuda:0 Old GPU (compute capability 7.5): compute capability 7.5 < 9.0";
  struct ProbeScope {
    explicit ProbeScope(std::string reason) {
      set_unsupported_device_probe_for_tests([reason](Device) { return reason; });
    }
    ~ProbeScope() { set_unsupported_device_probe_for_tests(nullptr); }
  } probe(why);
  auto cpu = load(kPackage, Device::cpu());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  EXPECT_EQ((*cpu)->device_fallback(), "") << "the CPU asked for is no fallback";
  auto prompts = encode_all(**cpu, {"And God said"});
  ASSERT_TRUE(prompts.is_ok()) << prompts.status().message();
  auto want = greedy(**cpu, *prompts, 12);
  ASSERT_TRUE(want.is_ok()) << want.status().message();

  StandInMemory memory;
  StandInScope scope(memory);
  auto fell_back = load(kPackage, kStandIn);
  ASSERT_TRUE(fell_back.is_ok()) << fell_back.status().message();
  EXPECT_EQ(scope.opened, 0) << "the unsupported GPU is not opened";
  EXPECT_EQ((*fell_back)->device(), Device::cpu());
  EXPECT_EQ((*fell_back)->device_fallback(), why);
  auto got = greedy(**fell_back, *prompts, 12);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ(*got, *want);

  set_execution_device_opener_for_tests([why](Device) -> Result<std::unique_ptr<ExecutionDevice>> {
    return OG_ERROR(why, ": this build has sm_90a code only");
  });
  genai::ModelOptions strict;
  strict.device = kStandIn;
  strict.cpu_fallback = false;
  auto refused = genai::Model::load(kPackage.string(), strict);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("compute capability 7.5"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace onnx_genai
