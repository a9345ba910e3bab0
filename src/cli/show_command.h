// `onnx-genai show [MODEL]`: what the package's configs and decoder graph say about the model,
// one "key: value" line each: model type, layers, hidden size, heads / kv heads / head dim,
// vocab, context length, parameters (initializer elements; packed 4-bit weights count 2 per
// byte), quantization (MatMulNBits bits / block size / accuracy level), KV dtype, the most
// frequent ops and file sizes. Reads the graph without compiling a session.
#pragma once

#include <span>
#include <string>

namespace onnx_genai::cli {

// Returns the exit status: 0 done; 2 bad arguments or model package (one line on stderr).
int run_show(std::span<const std::string> args);

}  // namespace onnx_genai::cli
