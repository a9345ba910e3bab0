// `onnx-genai serve [MODEL] [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--device ...]
// [--threads N] [--max-num-seqs N] [--kv-cache-memory ...] [--served-model-name NAME] ...`:
// the OpenAI-compatible HTTP server (server/http_server.h) over the serving engine. Logs one line
// per request to stderr. SIGTERM or SIGINT stops accepting, lets running requests finish (at most
// --drain-timeout seconds, then aborts them) and exits 0.
#pragma once

#include <span>
#include <string>

namespace onnx_genai::cli {

// Returns the exit status: 0 after a signal's drain; 2 bad arguments or model, or the address
// cannot be bound (one line on stderr); 1 the server failed.
int run_serve(std::span<const std::string> args);

}  // namespace onnx_genai::cli
