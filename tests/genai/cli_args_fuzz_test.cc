// Fuzz test of the command-line parsers, meant to run under ASan/UBSan (-DOG_SANITIZE=ON) as well
// as in the normal build: seeded mutants of real `generate` and `exec` command lines (arguments
// swapped for option names, hostile values, bytes; dropped, repeated or joined with '='). Every
// mutant must parse or fail with a message; nothing may throw. What parses must hold values in the
// ranges the help text gives.
#include <gtest/gtest.h>

#include <cmath>

#include "cli/exec_options.h"
#include "cli/generate_options.h"
#include "fuzz_mutations.h"

namespace onnx_genai {
namespace {

using Args = std::vector<std::string>;

constexpr int kMutants = 20000;
constexpr uint64_t kSeed = 18;

const std::vector<std::string> kGenerateOptions = {
    "--prompt", "--system",  "--stop",   "--max-new-tokens", "--min-new-tokens", "--prefill-chunk", "--temperature",
    "--top-p",  "--min-p",   "--top-k",  "--seed",           "--mask-at-capacity", "--threads",     "--device",
    "--cuda-graphs", "--max-input-bytes", "--tensor-parallel", "-tp", "--chat", "--greedy", "--ignore-eos", "--truncate", "--stream", "--stats"};
const std::vector<std::string> kExecOptions = {"--threads", "--device",     "--repeat",         "--dim",
                                               "--input",   "--max-memory", "--max-input-bytes"};
const std::vector<std::string> kValues = {
    "",      "-",    "--",     "=",         "-1",  "0",    "1",       "1e-45",  "1e308", "nan", "inf", "-0",
    "0x10",  " 1",   "1 ",     "2147483648", "18446744073709551616", "on", "off", "cuda:99", "cpu", "a=b", "=1",
    "a=",    "hi",   "\xff\xfe", "--prompt=--greedy"};

const std::vector<Args> kGenerateSeeds = {
    {"model", "--prompt", "hello", "--max-new-tokens", "8", "--temperature", "0.7", "--top-p", "0.9", "--seed", "3"},
    {"--chat", "--system", "be brief", "--prompt=hi", "--stop", "\n", "--greedy", "--threads", "2", "--stream"},
    {"--top-k=40", "--min-p", "0.1", "--truncate", "--prefill-chunk", "16", "--mask-at-capacity", "off", "--stats"}};
const std::vector<Args> kExecSeeds = {
    {"model.onnx", "--threads", "1", "--repeat", "3", "--dim", "batch=2", "--input", "ids=ids.bin"},
    {"model.onnx", "--device", "cpu", "--max-memory", "1000000", "--dim", "sequence_length=64"}};

Args mutate(testing::FuzzRng& rng, Args args, const std::vector<std::string>& options) {
  for (size_t edits = 1 + testing::fuzz_pick(rng, 3); edits > 0; --edits) {
    const size_t at = args.empty() ? 0 : testing::fuzz_pick(rng, args.size());
    switch (args.empty() ? 0 : testing::fuzz_pick(rng, 6)) {
      case 0:
        args.insert(args.begin() + static_cast<std::ptrdiff_t>(at), testing::fuzz_pick(rng, options));
        break;
      case 1:
        args[at] = testing::fuzz_pick(rng, kValues);
        break;
      case 2:
        args.erase(args.begin() + static_cast<std::ptrdiff_t>(at));
        break;
      case 3:
        args.insert(args.begin() + static_cast<std::ptrdiff_t>(at), args[at]);
        break;
      case 4:  // "--name value" -> "--name=value"
        if (at + 1 < args.size()) {
          args[at] += "=" + args[at + 1];
          args.erase(args.begin() + static_cast<std::ptrdiff_t>(at) + 1);
        }
        break;
      default:
        args[at] = testing::mutate_bytes(rng, args[at]);
        break;
    }
  }
  return args;
}

std::string shown(const Args& args) {
  std::string text;
  for (const std::string& arg : args) text += " [" + arg + "]";
  return text;
}

// What a parsed `generate` command line must hold whatever it was.
void check_generate(const cli::GenerateOptions& o, const Args& args) {
  EXPECT_TRUE(!o.temperature || (std::isfinite(*o.temperature) && *o.temperature >= 0)) << shown(args);
  EXPECT_TRUE(!o.top_p || (*o.top_p >= 0 && *o.top_p <= 1)) << shown(args);
  EXPECT_TRUE(!o.max_new_tokens || *o.max_new_tokens >= 0) << shown(args);
  EXPECT_GE(o.max_input_bytes, 1) << shown(args);
}

template <typename Options>
void expect_parsed_or_clean_error(const Result<Options>& parsed, const Args& args) {
  if (parsed.is_ok()) return;
  // Messages quote arguments as given (line breaks included): report() makes them one line.
  EXPECT_FALSE(parsed.status().message().empty()) << shown(args);
}

TEST(CliArgsFuzz, MutatedCommandLinesParseOrFailCleanly) {
  testing::FuzzRng rng(kSeed);
  int parsed = 0, rejected = 0, crashes = 0;
  for (int i = 0; i < kMutants; ++i) {
    const bool generate = i % 3 != 0;
    const Args args = generate ? mutate(rng, testing::fuzz_pick(rng, kGenerateSeeds), kGenerateOptions)
                               : mutate(rng, testing::fuzz_pick(rng, kExecSeeds), kExecOptions);
    try {
      if (generate) {
        const Result<cli::GenerateOptions> options = cli::parse_generate_options(args);
        expect_parsed_or_clean_error(options, args);
        if (options.is_ok()) check_generate(*options, args);
        ++(options.is_ok() ? parsed : rejected);
      } else {
        const Result<cli::ExecOptions> options = cli::parse_exec_options(args);
        expect_parsed_or_clean_error(options, args);
        ++(options.is_ok() ? parsed : rejected);
      }
    } catch (const std::exception& error) {
      ++crashes;
      ADD_FAILURE() << "exception " << error.what() << "\n  args:" << shown(args);
    }
  }
  std::printf("[ fuzz     ] command lines (seed %llu): %d executions (%d parsed, %d rejected), %d crashes\n",
              static_cast<unsigned long long>(kSeed), kMutants, parsed, rejected, crashes);
  EXPECT_EQ(crashes, 0);
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace onnx_genai
