// `onnx-genai generate`: load a model package, encode the prompt (optionally through the chat
// template), generate, and print the text (streamed with --stream).
#pragma once

#include <span>
#include <string>

namespace onnx_genai::cli {

// Runs the subcommand on the arguments after `generate` and returns the process exit status:
// 0 done; 2 bad arguments, model package or prompt (one line on stderr); 1 failure while generating.
int run_generate(std::span<const std::string> args);

}  // namespace onnx_genai::cli
