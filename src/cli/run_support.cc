#include "cli/run_support.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "core/file_reader.h"
#include "tokenizer/unicode.h"

#ifndef OG_DEFAULT_MODEL_DIR
#define OG_DEFAULT_MODEL_DIR "models/debian-prose-11m"
#endif

namespace onnx_genai::cli {

int report(int exit_code, const std::string& message) {
  // Messages quote what the user gave, which may hold line breaks or terminal escapes: one line,
  // with other control bytes written as \xNN.
  std::string line;
  for (const char c : message) {
    if (c == '\n') {
      line += ' ';
    } else if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      line += escaped;
    } else {
      line += c;
    }
  }
  std::fprintf(stderr, "onnx-genai: %s\n", line.c_str());
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
      // "--prompt --greedy" forgot the prompt far more often than it means the text "--greedy".
      const std::string next = value.substr(0, value.find('='));
      if (table.flags.contains(next) || table.valued.contains(next)) {
        return OG_ERROR(name, " needs a value, got the option '", value, "' (to pass that text, write ", name, "=",
                        value, ")");
      }
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

namespace {

constexpr ReadLimit input_limit(int64_t max_bytes) { return {max_bytes, " (--max-input-bytes raises it)"}; }

}  // namespace

void add_input_limit_option(OptionTable& table, int64_t& max_bytes) {
  table.valued["--max-input-bytes"] = integer_option(max_bytes, 1, std::numeric_limits<int64_t>::max());
}

Result<std::string> read_text_or_stdin(const std::optional<std::string>& given, const char* what, int64_t max_bytes) {
  if (given) return *given;
  if (isatty(STDIN_FILENO)) return OG_ERROR("no ", what, ": pass --", what, " TEXT or pipe the ", what, " on stdin");
  return read_descriptor(STDIN_FILENO, std::string("the ") + what + " on stdin", input_limit(max_bytes));
}

Result<std::string> read_input_file(const std::string& path, std::string_view flag, int64_t max_bytes) {
  Result<std::string> text = read_file(path, input_limit(max_bytes));
  if (!text.is_ok()) return text.status().with_context(std::string(flag));
  return text;
}

Status check_utf8(std::string_view text, std::string_view what) {
  if (auto bad = unicode::find_invalid_utf8(text)) return OG_ERROR(what, " is not valid UTF-8 (byte ", *bad, ")");
  return Status::ok();
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

void add_tensor_parallel_option(OptionTable& table, genai::ModelOptions& model) {
  const auto set = [&model](const std::string& option, const std::string& value) -> Status {
    OG_ASSIGN_OR_RETURN(const int64_t ranks, parse_integer(value, option, 1, 64));
    model.tensor_parallel = static_cast<int>(ranks);
    return Status::ok();
  };
  table.valued["--tensor-parallel"] = set;
  table.valued["-tp"] = set;
}

namespace {

// "2GiB", "512M", "1073741824" -> bytes; "0.5" -> a fraction of free memory.
Status parse_kv_cache_memory(const std::string& option, const std::string& value, genai::EngineOptions& engine) {
  if (value.find('.') != std::string::npos) {
    OG_ASSIGN_OR_RETURN(const double fraction, parse_number<double>(value, option, 0.001, 0.999));
    engine.kv_cache_fraction = fraction;
    engine.kv_cache_memory = 0;
    return Status::ok();
  }
  static const std::pair<const char*, int64_t> kUnits[] = {{"KiB", 1LL << 10}, {"MiB", 1LL << 20}, {"GiB", 1LL << 30},
                                                          {"K", 1000}, {"M", 1000000}, {"G", 1000000000}};
  int64_t unit = 1;
  std::string digits = value;
  for (const auto& [suffix, size] : kUnits) {
    const std::string s = suffix;
    if (digits.size() > s.size() && digits.compare(digits.size() - s.size(), s.size(), s) == 0) {
      digits.resize(digits.size() - s.size());
      unit = size;
      break;
    }
  }
  constexpr int64_t kMaxBytes = 1LL << 50;
  const Result<int64_t> count = parse_integer(digits, option, 1, kMaxBytes / unit);
  if (!count) return OG_ERROR(option, " wants bytes (optionally with K, M, G, KiB, MiB or GiB) or a fraction below 1, got '", value, "'");
  engine.kv_cache_memory = *count * unit;
  return Status::ok();
}

}  // namespace

void add_engine_options(OptionTable& table, genai::EngineOptions& engine) {
  table.valued["--block-size"] = integer_option(engine.block_size, 1, 1024);
  table.valued["--kv-cache-memory"] = [&engine](const std::string& option, const std::string& value) {
    return parse_kv_cache_memory(option, value, engine);
  };
  table.valued["--max-num-batched-tokens"] = integer_option(engine.max_num_batched_tokens, 1, 1 << 16);
  table.valued["--max-num-seqs"] = integer_option(engine.max_num_seqs, 1, 1 << 16);
  table.valued["--speculative-disable-by-batch-size"] = integer_option(engine.speculative_disable_by_batch_size, 0, 1 << 16);
  add_model_options(table, engine.model);
  add_tensor_parallel_option(table, engine.model);
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

}  // namespace onnx_genai::cli
