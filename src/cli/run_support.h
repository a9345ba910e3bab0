// Shared by the generate, tokenize, show, bench and run subcommands: exit codes, one-line error reports,
// a small option parser ("--name value" or "--name=value", flags, one positional MODEL) and the
// model folder default.
#pragma once

#include <charconv>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "onnx_genai/engine.h"
#include "onnx_genai/genai.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cli {

constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;

// Prints "onnx-genai: MESSAGE" as one line on stderr (line breaks as spaces, other control bytes
// as \xNN) and returns `exit_code`.
int report(int exit_code, const std::string& message);

struct OptionTable {
  std::map<std::string, std::function<Status(const std::string& option, const std::string& value)>> valued;
  std::map<std::string, bool*> flags;
};

// Fills the table's targets; `model_path` gets the one positional argument (else stays empty).
Status parse_options(std::span<const std::string> args, const OptionTable& table, std::string& model_path);

// A number of type T in [min, max] (the whole text, no sign or space slack); the error names the
// option and the text.
template <typename T>
Result<T> parse_number(const std::string& text, const std::string& option, T min, T max) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !(value >= min && value <= max)) {
    return OG_ERROR(option, " wants ", std::is_integral_v<T> ? "an integer" : "a number", " in [", min, ", ", max,
                    "], got '", text, "'");
  }
  return value;
}
inline Result<int64_t> parse_integer(const std::string& text, const std::string& option, int64_t min, int64_t max) {
  return parse_number<int64_t>(text, option, min, max);
}

// An OptionTable::valued entry storing an integer in [min, max] into `field`.
inline auto integer_option(int64_t& field, int64_t min, int64_t max) {
  return [&field, min, max](const std::string& option, const std::string& value) -> Status {
    OG_ASSIGN_OR_RETURN(field, parse_integer(value, option, min, max));
    return Status::ok();
  };
}

// Text read from stdin or a file (generate, tokenize, eval-ppl; a line of run) is at most this many bytes unless
// --max-input-bytes says otherwise: a prompt or corpus that large is a mistake (`< /dev/zero`), and
// the limit turns it into an error before memory runs out.
constexpr int64_t kDefaultMaxInputBytes = int64_t{64} << 20;

// --max-input-bytes N into `max_bytes`.
void add_input_limit_option(OptionTable& table, int64_t& max_bytes);

// `given` (a --prompt/--text value), else all of stdin when it is not a terminal; `what` names it in
// errors ("prompt", "text"). At most `max_bytes` bytes from stdin.
Result<std::string> read_text_or_stdin(const std::optional<std::string>& given, const char* what, int64_t max_bytes);

// All of the file at `path`, given by option `flag` (--text, --json-schema ...), at most
// `max_bytes` bytes; errors start with the flag.
Result<std::string> read_input_file(const std::string& path, std::string_view flag, int64_t max_bytes);

// An error naming `what` and the offset of the first byte that is not UTF-8 (chat messages become
// JSON, which holds only UTF-8).
Status check_utf8(std::string_view text, std::string_view what);

// --threads N and --device cpu|cuda[:N], taken by every command that loads a model, written
// straight into the options it loads the model with.
void add_model_options(OptionTable& table, genai::ModelOptions& model);

// --tensor-parallel N (alias -tp N): genai::ModelOptions::tensor_parallel, for the commands that
// drive a Generator (generate, run, bench) and, through add_engine_options, the serving engine.
void add_tensor_parallel_option(OptionTable& table, genai::ModelOptions& model);

// The serving engine's options (commands that run it: serve, bench-serve): --block-size,
// --kv-cache-memory BYTES (K/M/G/KiB/MiB/GiB suffixes) or a fraction below 1 of the memory free after
// loading, --max-num-batched-tokens, --max-num-seqs, add_model_options' --threads / --device and
// --tensor-parallel.
void add_engine_options(OptionTable& table, genai::EngineOptions& engine);

// The nearest-rank p-th percentile (p in [0, 100]) of `values`; 0 when empty. For the benchmarks.
double percentile(std::vector<double> values, double p);

// `given`, else the model folder shipped with the sources (an error naming `command` when absent).
Result<std::string> resolve_model_dir(const std::string& given, const std::string& command);

}  // namespace onnx_genai::cli
