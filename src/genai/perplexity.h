// Sliding-window perplexity (genai.h's evaluate_perplexity), Hugging Face's protocol: windows of
// `window` tokens start every `stride` tokens until one reaches the end; each scores the tokens
// no earlier window scored, except its own first token (whose logits would come from before the
// window). With stride < window that is every token but the sequence's first.
//
//   tokens    t0 t1 t2 t3 t4 t5 t6 t7 t8 t9        window 6, stride 3
//   run 1     [t0 t1 t2 t3 t4 t5]                  scores t1..t5
//   run 2              [t3 t4 t5 t6 t7 t8]         scores t6..t8
//   run 3                       [t6 t7 t8 t9]      scores t9
#pragma once

#include <cstdint>
#include <vector>

namespace onnx_genai::genai {

struct ScoredWindow {
  int64_t begin = 0, end = 0;  // tokens [begin, end) fed to one decoder run from position 0
  int64_t first_target = 0;    // tokens [first_target, end) are scored, each by the logits before it
};

// The windows over `tokens` tokens (window >= 2, 1 <= stride <= window), without those that
// would score nothing (with stride == window, a last window of one token).
std::vector<ScoredWindow> plan_windows(int64_t tokens, int64_t window, int64_t stride);

}  // namespace onnx_genai::genai
