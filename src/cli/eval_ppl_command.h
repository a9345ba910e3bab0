// `onnx-genai eval-ppl [MODEL] --text FILE [--window N] [--stride N] [--threads N]
// [--device cpu|cuda[:N]] [--json]`: the perplexity of a text file under the model, Hugging
// Face's sliding-window protocol (genai.h's evaluate_perplexity): the whole file tokenized
// without special tokens, windows of --window tokens (default: the context length, at most 512)
// every --stride tokens (default half a window). Prints tokens, scored tokens, the window and
// stride, the total NLL, the perplexity and the seconds spent scoring, as a table or one JSON
// object.
#pragma once

#include <span>
#include <string>

namespace onnx_genai::cli {

// Returns the exit status: 0 done; 2 bad arguments, model, text file or text (one line on
// stderr); 1 failure while running the decoder.
int run_eval_ppl(std::span<const std::string> args);

}  // namespace onnx_genai::cli
