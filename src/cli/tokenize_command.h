// `onnx-genai tokenize [MODEL] [--text TEXT] [--ids] [--no-special] [--decode 1,2,3]`: the model's
// tokenizer on a text (--text, else stdin when piped, taken byte for byte): one "ID<TAB>TOKEN"
// line per token, or with --ids the ids on one line separated by spaces. --no-special leaves out
// the tokenizer's added special tokens (BOS...). --decode prints the text of comma-separated ids
// (--no-special then skips special tokens).
#pragma once

#include <span>
#include <string>

namespace onnx_genai::cli {

// Returns the exit status: 0 done; 2 bad arguments, tokenizer, text or ids (one line on stderr).
int run_tokenize(std::span<const std::string> args);

}  // namespace onnx_genai::cli
