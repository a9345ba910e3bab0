// `onnx-genai run [MODEL] [--system TEXT] [--greedy] [--max-new-tokens N] [--threads N]`: a chat
// REPL over the model's chat template. Each line is a user turn; the reply streams to stdout.
// Commands: /system TEXT (system message for the following turns), /reset (forget the
// conversation), /stats (numbers of the last reply), /help, /exit. On a terminal it prints a
// "> " prompt; Ctrl-C during a reply stops the reply, Ctrl-C twice at the prompt exits. Lines are
// read plainly (no history or line editing). Every turn re-encodes the whole conversation and
// prefills it again (the KV cache is not carried between turns).
#pragma once

#include <span>
#include <string>

namespace onnx_genai::cli {

// Returns the exit status: 0 at /exit or end of input; 2 bad arguments or model (one line on
// stderr). Errors within a turn are reported and the loop goes on.
int run_chat(std::span<const std::string> args);

}  // namespace onnx_genai::cli
