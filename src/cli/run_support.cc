#include "cli/run_support.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#ifndef OG_DEFAULT_MODEL_DIR
#define OG_DEFAULT_MODEL_DIR "models/debian-prose-11m"
#endif

namespace onnx_genai::cli {

int report(int exit_code, std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::fprintf(stderr, "onnx-genai: %s\n", message.c_str());
  return exit_code;
}

Status parse_options(std::span<const std::string> args, const OptionTable& table, std::string& model_path) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!arg.starts_with("-")) {
      if (!model_path.empty()) return OG_ERROR("unexpected argument '", arg, "' (the model is '", model_path, "')");
      model_path = arg;
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    if (auto flag = table.flags.find(name); flag != table.flags.end()) {
      if (eq != std::string::npos) return OG_ERROR(name, " takes no value");
      *flag->second = true;
      continue;
    }
    auto setter = table.valued.find(name);
    if (setter == table.valued.end()) return OG_ERROR("unknown option '", name, "'");
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return OG_ERROR(name, " needs a value");
    }
    OG_RETURN_IF_ERROR(setter->second(name, value));
  }
  return Status::ok();
}

Result<std::string> resolve_model_dir(const std::string& given, const std::string& command) {
  if (!given.empty()) return given;
  std::error_code ec;
  if (!std::filesystem::is_directory(OG_DEFAULT_MODEL_DIR, ec)) {
    return OG_ERROR("no model given and the default model folder ", OG_DEFAULT_MODEL_DIR,
                    " does not exist; pass a model folder: onnx-genai ", command, " MODEL_DIR ...");
  }
  return std::string(OG_DEFAULT_MODEL_DIR);
}

void add_model_options(OptionTable& table, genai::ModelOptions& model) {
  table.valued["--threads"] = [&model](const std::string& option, const std::string& value) -> Status {
    OG_ASSIGN_OR_RETURN(const int64_t threads, parse_integer(value, option, 0, 4096));
    model.num_threads = static_cast<int>(threads);
    return Status::ok();
  };
  table.valued["--device"] = [&model](const std::string& option, const std::string& value) -> Status {
    auto device = Device::parse(value);
    if (!device.is_ok()) return OG_ERROR(option, ": ", device.status().message());
    model.device = *device;
    return Status::ok();
  };
  table.valued["--cuda-graphs"] = [&model](const std::string& option, const std::string& value) -> Status {
    if (value != "on" && value != "off") return OG_ERROR(option, " wants on or off, got '", value, "'");
    model.capture_device_graphs = value == "on";
    return Status::ok();
  };
}

}  // namespace onnx_genai::cli
