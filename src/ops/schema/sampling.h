// onnx_genai SampleTokens: the host Sampler's pick for each batch row, computed where the logits
// are. Models never contain it: the generator adds it to the decoder of a session on a device
// (src/genai/device_sampling.h), so that a sampled decode step brings B token ids to the host
// instead of B rows of logits.
//
//   tokens[b] = Sampler::sample(logits[b, R - 1, :]) under params[b], drawing at uniforms[b]
//
//   logits    [B, R, V]  f32, f16 or bf16. Only the last position is sampled: the one a decode
//                        step or a prefill through logit rows asks for. (The decoder runs the op
//                        on every run, perplexity's R-row windows included, so R > 1 is no error.)
//   params    [B, 5]     f32 per row (sampling_layout.h): temperature, top_k, top_p, min_p, mask slot.
//                        top_k is a whole number (0 disables it; V or more keeps every token).
//                        The mask slot is 0 (every token may be drawn) or m >= 1: row m - 1 of
//                        allowed says which may.
//   uniforms  [B]        f64 per row: the draw's uniform in [0, 1) (what Sampler::next_uniform
//                        gives), or negative when the row needs no token (nothing is checked).
//   allowed   [M, W]     optional int64 bit sets (structured output's token masks,
//                        include/onnx_genai/constraints.h): token t may be drawn iff t < 64 W and
//                        bit t % 64 of word t / 64 is set. Without it every mask slot must be 0.
//   tokens    [B]        int64: the token id, or a negative SampleTokensCode (sampling_layout.h).
//
// With the attribute every_position = 1 every position is a row of its own: logits [B, R, V] are
// read as [B * R, 1, V], and params [B * R, 4], uniforms [B * R] and tokens [B * R] follow (the
// serving engine's packed logit rows: B = 1, a row per sampled sequence).
//
// Semantics, exactly: a Sampler (include/onnx_genai/sampling.h) built from SamplingParams with
// these four fields (the rest at their defaults) samples the row, with the uniform in place of the
// Sampler's generator: greedy (argmax, ties to the lowest id) when temperature is 0, else the chain
// make_logit_processors builds, Temperature -> TopK -> TopP -> MinP, and the inverse-CDF draw. A
// mask acts as the constraint processor first in that chain does (genai/constraint_processor.h):
// after the logits are checked for NaN / +inf, the tokens it forbids leave the candidates. The
// CPU kernel runs that very code (sampling/); the CUDA kernel is held to its tokens (with one
// documented exception: min_p below kSampleMinPExactFloor).
//
// Rows the Sampler would fail get a code instead of a token from both kernels (a device kernel
// cannot fail mid-graph, and one contract lets the CUDA test compare every row); shapes and dtypes
// are checked when the graph loads and plans.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op.h"
#include "ops/schema/sampling_layout.h"

namespace onnx_genai {

struct SampleTokensParams {
  static constexpr const char* kDomain = "onnx_genai";
  static constexpr const char* kOpType = "SampleTokens";
  enum Input { kLogits = 0, kParams = 1, kUniforms = 2, kAllowed = 3 };

  int64_t batch = 0;      // B (B * R with every_position)
  int64_t positions = 0;  // R (1 with every_position); position R - 1 is sampled
  int64_t vocab = 0;      // V, in [1, 2^20] (the Sampler's limit, sampling::kMaxVocabulary)
  DType logits_dtype = DType::kUndefined;
  int64_t mask_rows = 0, mask_words = 0;  // allowed's [M, W]; 0 without it

  // Checks the inputs' dtypes and shapes; errors name `node`.
  static Result<SampleTokensParams> make(const Node& node, const std::vector<const TensorInfo*>& inputs);
};

}  // namespace onnx_genai
