// bench-serve's load and what it measures, shared by its two drivers: the engine called in
// process, and an OpenAI-compatible server over HTTP (--url, e.g. `onnx-genai serve` or
// llama.cpp's llama-server), so the two are measured the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "onnx_genai/engine.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cli {

struct Workload {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> gen_lens;
  std::vector<double> arrivals;  // seconds after the start (Poisson mode)
};

struct Timeline {
  double arrival = 0, first = -1, last = 0;  // seconds after the run's start
  // When tokens arrived: one entry per token in process, per streamed chunk over HTTP (a chunk
  // may carry several tokens when text is held back); `tokens` counts them all.
  std::vector<double> token_times;
  int64_t tokens = 0;
};

struct ServeResult {
  std::vector<Timeline> requests;
  double seconds = 0;
  int64_t output_tokens = 0, prompt_tokens = 0, cached_prompt_tokens = 0;
  double waste_sum = 0;
  int64_t waste_samples = 0;
  genai::EngineStats stats;  // in process only
};

// Sends every prompt of `w` to `url`'s /v1/completions as token ids (greedy, eos ignored,
// streamed), `concurrency` requests in flight. Token counts come from the usage chunk (else one
// per chunk); no logprobs are asked for, as they would bring every row's logits to the host.
Result<ServeResult> serve_over_http(const std::string& url, const std::string& api_key, int64_t concurrency,
                                    const Workload& w);

}  // namespace onnx_genai::cli
