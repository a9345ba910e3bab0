// `onnx-genai run [MODEL] [--system TEXT] [--greedy] [--max-new-tokens N] [--threads N]
// [--device cpu|cuda[:N]]`: a chat REPL over the model's chat template. Each line is a user
// turn; the reply streams to stdout.
// Commands: /system TEXT (system message for the following turns), /reset (forget the
// conversation), /stats (numbers of the last reply), /help, /exit. On a terminal (stdin and
// stdout) lines are edited with cli/line_editor.h (history kept in
// $XDG_STATE_HOME/onnx-genai/history); Ctrl-C during a reply stops the reply, Ctrl-C twice at an
// empty prompt exits. One Generator lives across turns: each turn encodes the whole
// conversation, rewinds the generator to the longest prefix it shares with the tokens already in
// the KV cache and prefills only the rest; /reset and /system start afresh.
#pragma once

#include <span>
#include <string>

namespace onnx_genai::cli {

// Returns the exit status: 0 at /exit or end of input; 2 bad arguments or model (one line on
// stderr). Errors within a turn are reported and the loop goes on.
int run_chat(std::span<const std::string> args);

}  // namespace onnx_genai::cli
