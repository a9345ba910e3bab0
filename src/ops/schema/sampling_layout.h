// The plain numbers of onnx_genai SampleTokens' contract (ops/schema/sampling.h), in a header
// without the ops framework so that the CUDA kernel (ops/cuda/sampling_kernels.cu) includes it too.
#pragma once

#include <cstdint>

namespace onnx_genai {

// Columns of the params input, one row per batch row.
enum SampleTokensParam : int {
  kSampleTemperature = 0,
  kSampleTopK = 1,
  kSampleTopP = 2,
  kSampleMinP = 3,
  // Which row of the allowed-token masks applies, plus one: 0 = every token (see sampling.h).
  kSampleMaskSlot = 4,
  kSampleParamCount = 5,
};

// What a row's token is instead of an id.
enum SampleTokensCode : int64_t {
  kSampleNoToken = -1,        // the row's uniform is negative: no token asked for
  kSampleNothingLeft = -2,    // every logit is -inf (the Sampler's sampling::nothing_left())
  kSampleInvalidLogits = -3,  // a NaN or +inf logit (the Sampler's sampling::check_logits())
  kSampleInvalidParams = -4,  // params outside SamplingParams::validate()'s ranges, a top_k or mask
                              // slot that is not a whole number (or names no mask row), or a uniform
                              // that is NaN or >= 1
};

// MinP (warpers.cc) keeps a token when logit - max > log(min_p) + 1e-4, drops it when below
// log(min_p) - 1e-4, and compares exp(logit - max) >= min_p in between. With min_p of at least
// e^-86.9 every decision is the exp comparison's, whatever the last bit of log(min_p). Below that
// exp underflows within the margin and the log comparison alone decides, where the host's
// std::log and the device's logf may differ in the last bit: a token whose gap falls in that bit
// may be kept by one kernel and dropped by the other. The generator keeps min_p in (0, floor) on
// the host.
constexpr float kSampleMinPExactFloor = 1e-37f;

}  // namespace onnx_genai
