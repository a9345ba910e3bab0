// Sampling computed in the decoder graph, so that a sampled step on a GPU brings B token ids to
// the host instead of B rows of logits (152k floats per row for Qwen), as greedy_output.h does
// for greedy steps.
//
// At load, the graph of a session on a device (never a CPU session's: there the host sampler
// reads the logits where they are) gets, from runtime/generation_passes.h, two inputs and one
// output around onnx_genai SampleTokens
// (ops/schema/sampling.h), the host Sampler's pick computed where the logits are:
//
//   onnx_genai.sampled_tokens = SampleTokens(logits,                         int64 [B]
//                                            onnx_genai.sampling_params,     f32 [B, 4]
//                                            onnx_genai.sampling_uniforms)   f64 [B]
//
// Each row's token is the one its Sampler would draw from the logits of its last position, when
// the op is given the uniform that Sampler's own generator would have drawn next
// (Sampler::next_uniform): a seeded run gives the CPU session's tokens. The op runs on every run of
// the decoder; rows asking for no token (uniform -1: greedy and host-sampled runs, perplexity)
// cost it nothing.
//
// A third input, onnx_genai.sampling_mask int64 [M, ceil(V / 64)], holds structured output's
// token masks: a row whose chain is a constraint's mask followed by what the op computes
// (takes_masked_device_sampling) names its mask in its params' mask slot, and the op draws (or
// takes the argmax) among the tokens it allows. Runs without masks feed it [0, ceil(V / 64)].
//
// When every sequence's chain is temperature / top-k / top-p / min-p alone (takes_device_sampling),
// the DecoderRunner keeps the logits on the device for each run whose rows' tokens follow their
// last position, draws the uniforms, and hands over the op's tokens; the generator then samples
// nothing on the host.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "genai/decoder_io.h"
#include "onnx_genai/sampling.h"
#include "onnx_genai/status.h"
#include "ops/schema/sampling_layout.h"
#include "runtime/generation_passes.h"

namespace onnx_genai::genai {

// A row's uniform when it asks for no token.
inline constexpr double kNoDraw = -1.0;

using DeviceSamplingParams = std::array<float, kSampleParamCount>;

// Whether a sequence sampled with `params` through `chain` (its whole processor chain, as
// make_logit_processors or make_generation_chain built it from `params`) draws exactly what the op
// draws: a sampled (not greedy) chain of temperature, top_k, top_p and min_p steps only, no
// logprobs, and no min_p so small that only its log decides (sampling_layout.h).
bool takes_device_sampling(const SamplingParams& params, const LogitProcessorChain& chain);

// Whether a sequence whose chain starts with a constraint's mask (constraint_processor.h) takes
// exactly the op's token given that mask: after it, greedy with nothing more, or a chain
// takes_device_sampling accepts.
bool takes_masked_device_sampling(const SamplingParams& params, const LogitProcessorChain& chain);

// The op's params row for `params` (temperature 0 when greedy), with no mask.
DeviceSamplingParams device_sampling_params(const SamplingParams& params);

// Words of a token mask over `vocab` tokens.
constexpr int64_t mask_words(int64_t vocab) { return (vocab + 63) / 64; }
// Copies `mask` (mask_words(vocab) words, else an error) to `out` and moves `out` past it.
Status append_mask(std::span<const uint64_t> mask, int64_t vocab, uint64_t*& out);

// Sizes and fills `t`, the decoder input of `role` (kSamplingParams or kSamplingUniforms), for
// uniforms.size() rows: `params` in every row (the mask slot of each row with one of `masks`,
// numbered as fill_masks stores them), and each row's uniform (kNoDraw: no token).
Status fill_sampling_input(Tensor& t, InputRole role, const DeviceSamplingParams& params,
                           std::span<const double> uniforms, std::span<const std::span<const uint64_t>> masks = {});
// Sizes and fills `t`, the kSamplingMask input over `vocab` tokens, with the non-empty ones of
// `masks` in order ([0, mask_words(vocab)] when there are none).
Status fill_masks(Tensor& t, int64_t vocab, std::span<const std::span<const uint64_t>> masks);
// The same for `rows` rows that ask for no token.
Status fill_no_sampling(Tensor& t, InputRole role, int64_t rows);

// Row `row`'s token from the op's output (int64 [rows] on the host): an error when the op found
// none (the host Sampler's error for the same logits), or when it lies outside [0, vocab).
Result<int32_t> sampled_token(const Tensor& tokens, int64_t row, int64_t vocab);

}  // namespace onnx_genai::genai
