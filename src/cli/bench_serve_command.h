// `onnx-genai bench-serve [MODEL] [--num-requests N] [--concurrency C | --request-rate R] ...`:
// load on the serving engine (onnx_genai/engine.h), driven in process. N requests with random
// prompt and output lengths (uniform within --range of --prompt-len and --gen-len, optionally all
// starting with a shared prefix), arriving by a Poisson process of R requests per second or kept
// C at a time, greedy, eos ignored. Reports output and total token throughput, requests per second,
// TTFT, TPOT, inter-token latency and end-to-end latency (mean, p50, p90, p99), goodput under the
// --slo-ttft-ms / --slo-tpot-ms objectives, the KV pool's waste, preemptions and prefix-cache
// hits; as a table or one JSON object.
#pragma once

#include <span>
#include <string>

namespace onnx_genai::cli {

// Returns the exit status: 0 done; 2 bad arguments or model (one line on stderr); 1 failure while
// serving.
int run_bench_serve(std::span<const std::string> args);

}  // namespace onnx_genai::cli
