// `onnx-genai bench [MODEL] --prompt-len P --gen-len G [--repeat R] [--threads N] [--device cpu|cuda[:N]] [--json]`:
// a synthetic prompt of P token ids, greedy generation of exactly G tokens (eos ignored), one
// warm-up run and then R measured ones. Reports prefill and decode tok/s, time to first token,
// inter-token latency percentiles (p50/p90/p99 over all measured decode steps) and peak RSS, as
// a table or one JSON object.
#pragma once

#include <span>
#include <string>

namespace onnx_genai::cli {

// Returns the exit status: 0 done; 2 bad arguments or model (one line on stderr); 1 failure while
// generating.
int run_bench(std::span<const std::string> args);

}  // namespace onnx_genai::cli
