#include "cli/exec_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "cli/exec_inputs.h"
#include "ops/cpu/dispatch.h"
#include "onnx_genai/session.h"

namespace onnx_genai::cli {

namespace {

constexpr int64_t kValuesShown = 8;

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Element i of `t` as a double (bools and integers exactly, 16-bit floats widened).
double element(const Tensor& t, int64_t i) {
  double value = 0;
  Status known = dispatch_dtype<float, double, Float16, BFloat16, int8_t, uint8_t, int16_t, uint16_t, int32_t,
                                uint32_t, int64_t, uint64_t, bool>(t.dtype(), [&]<typename T>() {
    value = static_cast<double>(load<T>(t.data<T>()[i]));
    return Status::ok();
  });
  return known.is_ok() ? value : 0.0;
}

std::string first_values(const Tensor& t) {
  std::string text;
  const int64_t shown = std::min(t.numel(), kValuesShown);
  for (int64_t i = 0; i < shown; ++i) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, dtype_is_float(t.dtype()) ? "%.6g" : "%.0f", element(t, i));
    text += (i ? " " : "") + std::string(buffer);
  }
  return t.numel() > shown ? text + " ..." : text;
}

// For float outputs of rank >= 2 ([..., positions, classes], e.g. logits): the argmax over the
// last axis at the last position, for every leading index (one per batch row). Ties: lowest id.
std::string last_position_argmax(const Tensor& t) {
  const int rank = t.rank();
  const int64_t classes = t.shape()[rank - 1];
  const int64_t positions = t.shape()[rank - 2];
  if (classes == 0 || positions == 0) return "";
  std::string text;
  for (int64_t lead = 0; lead < t.numel() / (classes * positions); ++lead) {
    const int64_t row = (lead * positions + positions - 1) * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (element(t, row + c) > element(t, row + best)) best = c;
    }
    text += (text.empty() ? "" : " ") + std::to_string(best);
  }
  return text;
}

void print_tensor(const char* role, const std::string& name, const Tensor& t) {
  std::printf("%s %s: %s %s = %s\n", role, name.c_str(), std::string(dtype_name(t.dtype())).c_str(),
              t.shape().to_string().c_str(), first_values(t).c_str());
  if (dtype_is_float(t.dtype()) && t.rank() >= 2) {
    const std::string argmax = last_position_argmax(t);
    if (!argmax.empty()) std::printf("  argmax over the last axis at the last position: %s\n", argmax.c_str());
  }
}

void print_stats(const Session& session) {
  const SessionStats s = session.stats();
  std::printf("session: %lld plan(s) compiled, %lld cache hit(s), arena %lld bytes (%lld without reuse), %lld plan steps, "
              "%lld nodes folded at load, %lld initializer bytes mapped, %lld copied\n",
              static_cast<long long>(s.plans_compiled), static_cast<long long>(s.plan_cache_hits),
              static_cast<long long>(s.arena_bytes), static_cast<long long>(s.last_plan_requested_bytes),
              static_cast<long long>(s.last_plan_steps), static_cast<long long>(s.nodes_folded),
              static_cast<long long>(s.initializer_bytes_mapped), static_cast<long long>(s.initializer_bytes_copied));
}

}  // namespace

Status run_exec(const ExecOptions& options) {
  const auto load_start = Clock::now();
  SessionOptions session_options;
  session_options.num_threads = options.threads;
  session_options.device = options.device;
  session_options.max_arena_bytes = options.max_memory;
  OG_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::load(options.model_path, session_options));
  const double load_ms = ms_since(load_start);
  OG_ASSIGN_OR_RETURN(std::vector<Tensor> inputs,
                      build_exec_inputs(session->inputs(), options.dims, options.input_files, options.max_input_bytes));

  std::vector<Tensor> outputs;
  double first_ms = 0, rest_ms = 0;
  for (int r = 0; r < options.repeat; ++r) {
    const auto start = Clock::now();
    OG_ASSIGN_OR_RETURN(outputs, session->run(inputs));
    (r == 0 ? first_ms : rest_ms) += ms_since(start);
  }

  std::printf("model: %s (%d threads)\n", options.model_path.c_str(), session->num_threads());
  for (size_t i = 0; i < inputs.size(); ++i) print_tensor("input", session->inputs()[i].name, inputs[i]);
  for (size_t i = 0; i < outputs.size(); ++i) print_tensor("output", session->outputs()[i].name, outputs[i]);
  std::printf("time: load %.2f ms, first run %.3f ms (includes plan compile)", load_ms, first_ms);
  if (options.repeat > 1) std::printf(", mean of the next %d runs %.3f ms", options.repeat - 1, rest_ms / (options.repeat - 1));
  std::printf("\n");
  print_stats(*session);
  return Status::ok();
}

}  // namespace onnx_genai::cli
