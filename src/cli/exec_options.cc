#include "cli/exec_options.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>

namespace onnx_genai::cli {

namespace {

// A value that is one of these names forgot its own value ("--dim --threads 4").
constexpr std::array<std::string_view, 7> kOptions = {"--threads", "--device",     "--repeat",         "--dim",
                                                      "--input",   "--max-memory", "--max-input-bytes"};

Result<int64_t> parse_int(const std::string& text, const std::string& what, int64_t min, int64_t max) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return OG_ERROR(what, " wants an integer in [", min, ", ", max, "], got '", text, "'");
  }
  return value;
}

// Splits "name=value"; both parts must be non-empty.
Result<std::pair<std::string, std::string>> split_assignment(const std::string& text, const std::string& option) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return OG_ERROR(option, " wants name=value, got '", text, "'");
  }
  return std::pair{text.substr(0, eq), text.substr(eq + 1)};
}

}  // namespace

Result<ExecOptions> parse_exec_options(std::span<const std::string> args) {
  ExecOptions options;
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!arg.starts_with("--")) {
      if (!options.model_path.empty()) return OG_ERROR("unexpected argument '", arg, "' (the model is '", options.model_path, "')");
      options.model_path = arg;
      continue;
    }
    if (i + 1 == args.size()) return OG_ERROR(arg, " needs a value");
    const std::string& value = args[++i];
    if (std::find(kOptions.begin(), kOptions.end(), value) != kOptions.end()) {
      return OG_ERROR(arg, " needs a value, got the option '", value, "'");
    }
    if (arg == "--threads") {
      OG_ASSIGN_OR_RETURN(int64_t threads, parse_int(value, "--threads", 0, 4096));
      options.threads = static_cast<int>(threads);
    } else if (arg == "--device") {
      auto device = Device::parse(value);
      if (!device.is_ok()) return OG_ERROR("--device: ", device.status().message());
      options.device = *device;
    } else if (arg == "--repeat") {
      OG_ASSIGN_OR_RETURN(int64_t repeat, parse_int(value, "--repeat", 1, kMaxInt));
      options.repeat = static_cast<int>(repeat);
    } else if (arg == "--dim") {
      OG_ASSIGN_OR_RETURN(auto dim, split_assignment(value, "--dim"));
      OG_ASSIGN_OR_RETURN(options.dims[dim.first], parse_int(dim.second, "--dim " + dim.first, 0, kMaxInt));
    } else if (arg == "--max-memory") {
      OG_ASSIGN_OR_RETURN(options.max_memory, parse_int(value, arg, 1, std::numeric_limits<int64_t>::max()));
    } else if (arg == "--max-input-bytes") {
      OG_ASSIGN_OR_RETURN(options.max_input_bytes, parse_int(value, arg, 1, std::numeric_limits<int64_t>::max()));
    } else if (arg == "--input") {
      OG_ASSIGN_OR_RETURN(auto input, split_assignment(value, "--input"));
      options.input_files[input.first] = input.second;
    } else {
      return OG_ERROR("unknown option '", arg, "'");
    }
  }
  if (options.model_path.empty()) return OG_ERROR("exec needs a model path");
  return options;
}

}  // namespace onnx_genai::cli
