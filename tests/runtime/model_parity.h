// Whole-model decode parity helpers: build a model with tools/build_model.py, decode it greedily
// in ONNX Runtime with tests/oracle/ort_decode.mjs, replay the same steps in our Session (our own
// KV cache carried from step to step, ORT's feeds and picked tokens), and compare the logits.
//
//   auto dir = build_fixture_model(fixture, scratch);            // OUT/model.onnx + genai_config.json
//   auto ort = run_ort_decode(*dir, fixture, scratch);
//   auto ours = decode_with_session(**session, *ort);            // one logits tensor per step
//   LogitComparison c = compare_steps(ours, *ort, abs_tol, rel_tol);
//
// Without ONNX Runtime (models it has no kernels for), our Session decodes greedily itself and
// the PyTorch reference checks it:
//   auto trace = session_greedy_decode(**session, prompts, steps, pad_id);
//   auto reference = run_reference(fixture, trace_sequences(*trace, prompts), scratch);
//   LogitComparison c = compare_with_reference(*trace, prompts, *reference, abs_tol, rel_tol);
//
// Targets including this header define OG_SOURCE_DIR and link nlohmann_json (see oracle_io.h).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "onnx_genai/session.h"
#include "oracle_io.h"

namespace onnx_genai::testing {

// One model to build and decode: builder arguments (after OUT_DIR), prompts (one row each, any
// lengths), the number of greedy decode steps after the prefill, and the padding side ("" lets
// ort_decode.mjs choose what the model's style requires).
struct ParityFixture {
  std::string name;
  std::vector<std::string> builder_args;
  std::vector<std::vector<int64_t>> prompts;
  int steps = 8;
  std::string padding;
};

// Test names show the fixture's name, not its bytes.
inline void PrintTo(const ParityFixture& fixture, std::ostream* os) { *os << fixture.name; }

// The exact command line that builds `fixture` into `out_dir` (also printed in test logs).
inline std::string builder_command(const ParityFixture& fixture, const std::filesystem::path& out_dir) {
  std::string command = python() + " " + shell_quote(source_dir() + "/tools/build_model.py") +
                        " " + shell_quote(out_dir.string());
  for (const std::string& arg : fixture.builder_args) command += " " + shell_quote(arg);
  return command;
}

inline Status run_checked(const std::string& what, const std::string& command, const std::filesystem::path& scratch) {
  OG_ASSIGN_OR_RETURN(CommandResult run, run_command(command, scratch));
  if (run.exit_code == 0) return Status::ok();
  std::string why = run.err.empty() ? run.out : run.err;
  while (!why.empty() && why.back() == '\n') why.pop_back();
  return OG_ERROR(what, " failed (exit ", run.exit_code, "): ", why.substr(why.rfind('\n') + 1),
                  run.exit_code == 127 ? " (is the tool installed? run scripts/install-deps)" : "");
}

inline Result<std::filesystem::path> build_fixture_model(const ParityFixture& fixture,
                                                         const std::filesystem::path& scratch) {
  const std::filesystem::path out_dir = scratch / fixture.name;
  OG_RETURN_IF_ERROR(run_checked("tools/build_model.py", builder_command(fixture, out_dir), scratch));
  return out_dir;
}

inline std::string prompts_json(const std::vector<std::vector<int64_t>>& rows) {
  nlohmann::json json = rows;
  return json.dump();
}

// One step of ORT's decode: the feeds other than the KV cache, its logits and its greedy picks.
struct DecodeStep {
  std::map<std::string, Tensor> feeds;  // input_ids, attention_mask, position_ids when the model has it
  Tensor logits;                        // [B, S, V]
  Tensor next_tokens;                   // [B] int64
};

struct DecodeTrace {
  std::vector<DecodeStep> steps;  // prefill, then one per decode step
  Tensor generated;               // [B, steps] int64
};

inline Result<DecodeTrace> trace_from_tensors(std::vector<NamedTensor> tensors, int steps) {
  DecodeTrace trace;
  trace.steps.resize(static_cast<size_t>(steps) + 1);
  for (NamedTensor& t : tensors) {
    if (t.name == "generated") {
      trace.generated = std::move(t.tensor);
      continue;
    }
    const size_t dot = t.name.find('.');
    if (t.name.rfind("step", 0) != 0 || dot == std::string::npos) return OG_ERROR("unexpected tensor ", t.name);
    size_t step = 0;
    const auto parsed = std::from_chars(t.name.data() + 4, t.name.data() + dot, step);
    if (parsed.ec != std::errc() || parsed.ptr != t.name.data() + dot) return OG_ERROR("unexpected tensor ", t.name);
    if (step >= trace.steps.size()) return OG_ERROR(t.name, ": step beyond the ", steps, " requested");
    const std::string field = t.name.substr(dot + 1);
    DecodeStep& s = trace.steps[step];
    if (field == "logits") {
      s.logits = std::move(t.tensor);
    } else if (field == "next_tokens") {
      s.next_tokens = std::move(t.tensor);
    } else {
      s.feeds.emplace(field, std::move(t.tensor));
    }
  }
  for (size_t i = 0; i < trace.steps.size(); ++i) {
    if (!trace.steps[i].logits.defined() || !trace.steps[i].feeds.count("attention_mask")) {
      return OG_ERROR("ort_decode output lacks step ", i);
    }
  }
  return trace;
}

// Greedy decode of `prompts` in ONNX Runtime: prefill + `steps` decode steps.
inline Result<DecodeTrace> run_ort_decode(const std::filesystem::path& model_dir, const ParityFixture& fixture,
                                          const std::filesystem::path& scratch) {
  const std::filesystem::path out = scratch / (model_dir.filename().string() + "_ort");
  const std::string script = source_dir() + "/tests/oracle/ort_decode.mjs";
  std::string command = "node " + shell_quote(script) + " " + shell_quote(model_dir.string()) + " " +
                        shell_quote(out.string()) + " --prompts " + shell_quote(prompts_json(fixture.prompts)) +
                        " --steps " + std::to_string(fixture.steps);
  if (!fixture.padding.empty()) command += " --padding " + fixture.padding;
  OG_RETURN_IF_ERROR(run_checked("tests/oracle/ort_decode.mjs", command, scratch));
  OG_ASSIGN_OR_RETURN(std::vector<NamedTensor> tensors, read_tensor_dir(out));
  return trace_from_tensors(std::move(tensors), fixture.steps);
}

inline Result<size_t> output_index(const Session& session, const std::string& name) {
  const auto& outputs = session.outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].name == name) return i;
  }
  return OG_ERROR("model has no output ", name);
}

// Each past_key_values.* input of a session with the index of the present.* output feeding it.
inline Result<std::vector<std::pair<std::string, size_t>>> cache_bindings(const Session& session) {
  std::vector<std::pair<std::string, size_t>> bindings;
  const std::string past_prefix = "past_key_values.";
  for (const IoInfo& input : session.inputs()) {
    if (input.name.rfind(past_prefix, 0) != 0) continue;
    OG_ASSIGN_OR_RETURN(size_t index, output_index(session, "present." + input.name.substr(past_prefix.size())));
    bindings.emplace_back(input.name, index);
  }
  return bindings;
}

// A zero-length past [batch, kv_heads, 0, head_size] of the input's declared dtype.
inline Result<Tensor> empty_past(const IoInfo& input, int64_t batch) {
  if (input.dims.size() != 4 || input.dims[1] < 0 || input.dims[3] < 0) {
    return OG_ERROR(input.name, " must be declared [batch, kv_heads, past, head_size] with fixed heads and size");
  }
  return Tensor::allocate(input.dtype, Shape{batch, input.dims[1], 0, input.dims[3]});
}

// Replays ORT's steps in `session`, carrying our own present.* into the next step's past; returns
// our logits per step.
inline Result<std::vector<Tensor>> decode_with_session(Session& session, const DecodeTrace& trace) {
  OG_ASSIGN_OR_RETURN(auto bindings, cache_bindings(session));
  OG_ASSIGN_OR_RETURN(size_t logits_index, output_index(session, "logits"));
  const int64_t batch = trace.steps.front().feeds.at("attention_mask").shape()[0];
  std::map<std::string, Tensor> past;
  for (const IoInfo& input : session.inputs()) {
    if (input.name.rfind("past_key_values.", 0) == 0) {
      OG_ASSIGN_OR_RETURN(past[input.name], empty_past(input, batch));
    }
  }
  std::vector<Tensor> logits;
  for (size_t step = 0; step < trace.steps.size(); ++step) {
    std::map<std::string, Tensor> feeds = trace.steps[step].feeds;
    feeds.insert(past.begin(), past.end());
    auto outputs = session.run_named(feeds);
    if (!outputs.is_ok()) return OG_ERROR("step ", step, ": ", outputs.status().message());
    logits.push_back((*outputs)[logits_index]);
    for (const auto& [past_name, present_index] : bindings) past[past_name] = (*outputs)[present_index];
  }
  return logits;
}

// float32 or float16 values as floats.
inline std::vector<float> to_floats(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = t.dtype() == DType::kF16 ? static_cast<float>(t.data<Float16>()[i]) : t.data<float>()[i];
  }
  return out;
}

struct LogitComparison {
  float max_abs_diff = 0;
  int64_t rows_compared = 0;     // (step, batch row, position) triples whose token is real
  int64_t out_of_tolerance = 0;  // logits beyond abs_tol + rel_tol * |ort|; NaN counts
  int64_t argmax_mismatches = 0; // greedy picks that differ where ORT's top two are > 2 * abs_tol apart
  std::string first_failure;     // where the first out-of-tolerance logit is
};

// Index of the largest value (ties to the lowest index) and its margin over the runner-up.
inline std::pair<int64_t, float> argmax_with_margin(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  float second = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (i != best) second = std::max(second, row[i]);
  }
  return {best, row[best] - second};
}

inline void compare_row(const float* got, const float* want, int64_t vocab, float abs_tol, float rel_tol,
                        const std::string& where, LogitComparison& c) {
  ++c.rows_compared;
  for (int64_t v = 0; v < vocab; ++v) {
    const float diff = std::fabs(got[v] - want[v]);
    if (diff > c.max_abs_diff || std::isnan(diff)) c.max_abs_diff = std::isnan(diff) ? INFINITY : diff;
    if (!(diff <= abs_tol + rel_tol * std::fabs(want[v]))) {
      if (c.out_of_tolerance++ == 0) {
        c.first_failure = where + " vocab " + std::to_string(v) + ": ours " + std::to_string(got[v]) + ", ORT " +
                          std::to_string(want[v]);
      }
    }
  }
  const auto [want_best, margin] = argmax_with_margin(want, vocab);
  if (margin > 2 * abs_tol && argmax_with_margin(got, vocab).first != want_best) ++c.argmax_mismatches;
}

// Compares our logits with ORT's at every position holding a real token (the last S columns of
// the attention mask are the step's tokens; pad positions' logits are unspecified).
inline Result<LogitComparison> compare_steps(const std::vector<Tensor>& ours, const DecodeTrace& trace, float abs_tol,
                                             float rel_tol) {
  LogitComparison c;
  if (ours.size() != trace.steps.size()) return OG_ERROR("ours has ", ours.size(), " steps, ORT ", trace.steps.size());
  for (size_t step = 0; step < ours.size(); ++step) {
    const Tensor& want_t = trace.steps[step].logits;
    if (ours[step].shape() != want_t.shape() || ours[step].dtype() != want_t.dtype()) {
      return OG_ERROR("step ", step, ": logits ", dtype_name(ours[step].dtype()), ours[step].shape().to_string(),
                      ", ORT ", dtype_name(want_t.dtype()), want_t.shape().to_string());
    }
    const std::vector<float> got = to_floats(ours[step]), want = to_floats(want_t);
    const Tensor& mask = trace.steps[step].feeds.at("attention_mask");
    const int64_t batch = want_t.shape()[0], seq = want_t.shape()[1], vocab = want_t.shape()[2];
    const int64_t width = mask.shape()[1];
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t s = 0; s < seq; ++s) {
        if (mask.data<int64_t>()[b * width + width - seq + s] == 0) continue;
        const size_t offset = static_cast<size_t>((b * seq + s) * vocab);
        const std::string where = "step " + std::to_string(step) + " row " + std::to_string(b) + " position " +
                                  std::to_string(s);
        compare_row(got.data() + offset, want.data() + offset, vocab, abs_tol, rel_tol, where, c);
      }
    }
  }
  return c;
}

// The prefill feeds of ort_decode.mjs for right padding: ids padded with `pad_id`, mask 1 on real
// tokens, positions counting them.
inline DecodeStep right_padded_prefill(const std::vector<std::vector<int64_t>>& prompts, int64_t pad_id,
                                       bool has_positions) {
  const auto batch = static_cast<int64_t>(prompts.size());
  int64_t width = 0;
  for (const auto& p : prompts) width = std::max(width, static_cast<int64_t>(p.size()));
  std::vector<int64_t> ids(static_cast<size_t>(batch * width), pad_id), mask(ids.size(), 0), positions(ids.size(), 0);
  for (size_t b = 0; b < prompts.size(); ++b) {
    for (size_t j = 0; j < prompts[b].size(); ++j) {
      const size_t at = b * static_cast<size_t>(width) + j;
      ids[at] = prompts[b][j];
      mask[at] = 1;
      positions[at] = static_cast<int64_t>(j);
    }
  }
  DecodeStep step;
  step.feeds["input_ids"] = Tensor::from_vector<int64_t>(Shape{batch, width}, ids);
  step.feeds["attention_mask"] = Tensor::from_vector<int64_t>(Shape{batch, width}, mask);
  if (has_positions) step.feeds["position_ids"] = Tensor::from_vector<int64_t>(Shape{batch, width}, positions);
  return step;
}

// The decode feeds that follow `prev` (ort_decode.mjs's decodeFeeds): each row's pick, the mask
// grown by one real column, the position after the row's real tokens.
inline DecodeStep next_decode_step(const DecodeStep& prev, const std::vector<int64_t>& next, bool has_positions) {
  const Tensor& mask = prev.feeds.at("attention_mask");
  const int64_t batch = mask.shape()[0], width = mask.shape()[1];
  std::vector<int64_t> grown(static_cast<size_t>(batch * (width + 1)), 1), positions(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t* row = mask.data<int64_t>() + b * width;
    std::copy_n(row, width, grown.begin() + b * (width + 1));
    positions[static_cast<size_t>(b)] = std::count(row, row + width, int64_t{1});
  }
  DecodeStep step;
  step.feeds["input_ids"] = Tensor::from_vector<int64_t>(Shape{batch, 1}, next);
  step.feeds["attention_mask"] = Tensor::from_vector<int64_t>(Shape{batch, width + 1}, grown);
  if (has_positions) step.feeds["position_ids"] = Tensor::from_vector<int64_t>(Shape{batch, 1}, positions);
  return step;
}

// Greedy decode of `prompts` in our Session, fed as tests/oracle/ort_decode.mjs feeds ONNX Runtime
// a shared-buffer (GroupQueryAttention) model, rows right-padded: prefill + `steps` decode steps,
// each present fed back as the next past. Returns the trace ort_decode.mjs would write; f32 logits.
inline Result<DecodeTrace> session_greedy_decode(Session& session, const std::vector<std::vector<int64_t>>& prompts,
                                                 int steps, int64_t pad_id) {
  const auto batch = static_cast<int64_t>(prompts.size());
  const bool has_positions = std::any_of(session.inputs().begin(), session.inputs().end(),
                                         [](const IoInfo& in) { return in.name == "position_ids"; });
  OG_ASSIGN_OR_RETURN(auto bindings, cache_bindings(session));
  OG_ASSIGN_OR_RETURN(size_t logits_index, output_index(session, "logits"));
  std::map<std::string, Tensor> past;
  for (const IoInfo& input : session.inputs()) {
    if (input.name.rfind("past_key_values.", 0) == 0) {
      OG_ASSIGN_OR_RETURN(past[input.name], empty_past(input, batch));
    }
  }
  DecodeTrace trace;
  trace.steps.push_back(right_padded_prefill(prompts, pad_id, has_positions));
  std::vector<int64_t> generated(static_cast<size_t>(batch * (steps + 1)));
  for (int step = 0; step <= steps; ++step) {
    DecodeStep& s = trace.steps.back();
    std::map<std::string, Tensor> feeds = s.feeds;
    feeds.insert(past.begin(), past.end());
    auto outputs = session.run_named(feeds);
    if (!outputs.is_ok()) return OG_ERROR("step ", step, ": ", outputs.status().message());
    s.logits = (*outputs)[logits_index];
    if (s.logits.dtype() != DType::kF32) return OG_ERROR("session_greedy_decode reads f32 logits only");
    const int64_t seq = s.logits.shape()[1], vocab = s.logits.shape()[2];
    std::vector<int64_t> next(prompts.size());
    for (size_t b = 0; b < prompts.size(); ++b) {
      const int64_t column = step == 0 ? static_cast<int64_t>(prompts[b].size()) - 1 : 0;
      next[b] = argmax_with_margin(s.logits.data<float>() + (static_cast<int64_t>(b) * seq + column) * vocab, vocab).first;
      generated[b * static_cast<size_t>(steps + 1) + static_cast<size_t>(step)] = next[b];
    }
    s.next_tokens = Tensor::from_vector<int64_t>(Shape{batch}, next);
    for (const auto& [past_name, present_index] : bindings) past[past_name] = (*outputs)[present_index];
    if (step < steps) trace.steps.push_back(next_decode_step(s, next, has_positions));
  }
  trace.generated = Tensor::from_vector<int64_t>(Shape{batch, steps + 1}, generated);
  return trace;
}

// Each row's whole sequence in a trace: its prompt, then every pick but the last.
inline std::vector<std::vector<int64_t>> trace_sequences(const DecodeTrace& trace,
                                                         const std::vector<std::vector<int64_t>>& prompts) {
  std::vector<std::vector<int64_t>> sequences = prompts;
  const int64_t steps = trace.generated.shape()[1];
  for (size_t b = 0; b < sequences.size(); ++b) {
    for (int64_t k = 0; k + 1 < steps; ++k) {
      sequences[b].push_back(trace.generated.data<int64_t>()[static_cast<int64_t>(b) * steps + k]);
    }
  }
  return sequences;
}

// A trace's logits at every real position against the reference's logits for that token. A row's
// prefill tokens are the real columns of the step-0 mask in order; decode step k holds token
// len_b + k - 1.
inline LogitComparison compare_with_reference(const DecodeTrace& trace, const std::vector<std::vector<int64_t>>& prompts,
                                              const std::vector<NamedTensor>& reference, float abs_tol, float rel_tol) {
  LogitComparison c;
  for (size_t b = 0; b < prompts.size() && b < reference.size(); ++b) {
    const std::vector<float> want = to_floats(reference[b].tensor);
    const int64_t vocab = reference[b].tensor.shape()[1];
    const auto row = static_cast<int64_t>(b);
    for (size_t step = 0; step < trace.steps.size(); ++step) {
      const Tensor& mask = trace.steps[step].feeds.at("attention_mask");
      const std::vector<float> got = to_floats(trace.steps[step].logits);
      const int64_t seq = trace.steps[step].logits.shape()[1], width = mask.shape()[1];
      int64_t token = step == 0 ? 0 : static_cast<int64_t>(prompts[b].size() + step) - 1;
      for (int64_t s = 0; s < seq; ++s) {
        if (mask.data<int64_t>()[row * width + width - seq + s] == 0) continue;
        const std::string where = "row " + std::to_string(b) + " token " + std::to_string(token);
        if (token >= reference[b].tensor.shape()[0] || trace.steps[step].logits.shape()[2] != vocab) {
          if (c.out_of_tolerance++ == 0) c.first_failure = where + ": outside the reference's logits";
          break;
        }
        compare_row(got.data() + (row * seq + s) * vocab, want.data() + token * vocab, vocab, abs_tol, rel_tol, where, c);
        ++token;
      }
    }
  }
  return c;
}

// The PyTorch reference forward (tools/model_builder/reference.py, float64) over whole token
// sequences: row{b}.logits [len, vocab] for each sequence.
inline Result<std::vector<NamedTensor>> run_reference(const ParityFixture& fixture,
                                                      const std::vector<std::vector<int64_t>>& sequences,
                                                      const std::filesystem::path& scratch) {
  const std::filesystem::path tokens = scratch / (fixture.name + "_tokens.json");
  const std::filesystem::path out = scratch / (fixture.name + "_reference");
  {
    std::ofstream file(tokens);
    file << prompts_json(sequences);
    if (!file) return OG_ERROR("cannot write ", tokens.string());
  }
  std::string command = python() + " " + shell_quote(source_dir() + "/tools/build_model.py") +
                        " --reference " + shell_quote(tokens.string()) +
                        " --reference-out " + shell_quote(out.string());
  for (const std::string& arg : fixture.builder_args) command += " " + shell_quote(arg);
  OG_RETURN_IF_ERROR(run_checked("tools/build_model.py --reference", command, scratch));
  return read_tensor_dir(out);
}

}  // namespace onnx_genai::testing
