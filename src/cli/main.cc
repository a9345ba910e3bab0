// onnx-genai: command-line entry point. Subcommands:
//   exec MODEL.onnx [--threads N] [--repeat R] [--dim name=value ...] [--input name=file.bin ...]
// Any error prints one line to stderr and exits with status 1.
#include <algorithm>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "cli/exec_command.h"

namespace {

constexpr const char* kUsage =
    "usage: onnx-genai exec MODEL.onnx [--threads N] [--repeat R] [--dim name=value ...] [--input name=file.bin ...]\n"
    "  exec   load MODEL.onnx, run it R times (default 1) on the inputs given with --input (raw little-endian\n"
    "         files) or generated ones (integers in [0, 100), floats uniform in [-1, 1), fixed seed);\n"
    "         symbolic dims take --dim values, default 1; prints outputs, timing and session stats\n";

// Errors are one line on stderr, whatever the message holds.
int fail(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::fprintf(stderr, "onnx-genai: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return fail("missing subcommand (try --help)");
  const auto is_help = [](const std::string& a) { return a == "--help" || a == "-h"; };
  if (args[0] == "help" || std::any_of(args.begin(), args.end(), is_help)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args[0] != "exec") return fail("unknown subcommand '" + args[0] + "' (try --help)");
  auto options = onnx_genai::cli::parse_exec_options(std::span(args).subspan(1));
  if (!options.is_ok()) return fail(options.status().message());
  const onnx_genai::Status status = onnx_genai::cli::run_exec(*options);
  return status.is_ok() ? 0 : fail(status.message());
}
