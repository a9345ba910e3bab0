#include "genai/device_sampling.h"

#include <algorithm>
#include <memory>
#include <string_view>
#include <vector>

#include "genai/decoder_inputs.h"
#include "sampling/pick.h"
#include "ops/schema/sampling.h"

namespace onnx_genai::genai {

namespace {

Status fill(Tensor& t, InputRole role, int64_t rows, const DeviceSamplingParams& params, auto&& uniform) {
  if (role == InputRole::kSamplingParams) {
    OG_RETURN_IF_ERROR(reuse_tensor(t, DType::kF32, Shape{rows, kSampleParamCount}));
    for (int64_t b = 0; b < rows; ++b) std::copy(params.begin(), params.end(), t.data<float>() + b * kSampleParamCount);
    return Status::ok();
  }
  if (role != InputRole::kSamplingUniforms) return OG_ERROR("internal error: input role ", static_cast<int>(role), " is no sampling input");
  OG_RETURN_IF_ERROR(reuse_tensor(t, DType::kF64, Shape{rows}));
  for (int64_t b = 0; b < rows; ++b) t.data<double>()[b] = uniform(b);
  return Status::ok();
}

// Whether the op draws what `params` through the processors [first, last) draw.
bool op_draws(const SamplingParams& params, LogitProcessorChain::const_iterator first,
              LogitProcessorChain::const_iterator last) {
  if (params.is_greedy() || params.logprobs) return false;
  if (params.min_p > 0.0f && params.min_p < kSampleMinPExactFloor) return false;
  return std::all_of(first, last, [](const std::unique_ptr<LogitProcessor>& processor) {
    const std::string_view name = processor->name();
    return name == "temperature" || name == "top_k" || name == "top_p" || name == "min_p";
  });
}

}  // namespace

bool takes_device_sampling(const SamplingParams& params, const LogitProcessorChain& chain) {
  return op_draws(params, chain.begin(), chain.end());
}

bool takes_masked_device_sampling(const SamplingParams& params, const LogitProcessorChain& chain) {
  if (chain.empty() || chain.front()->name() != "constraint") return false;
  if (params.is_greedy()) return !params.logprobs && chain.size() == 1;
  return op_draws(params, chain.begin() + 1, chain.end());
}

DeviceSamplingParams device_sampling_params(const SamplingParams& params) {
  DeviceSamplingParams row{};
  row[kSampleTemperature] = params.is_greedy() ? 0.0f : params.temperature;
  row[kSampleTopK] = static_cast<float>(params.top_k);  // exact up to 2^24; any k >= the vocabulary keeps all
  row[kSampleTopP] = params.top_p;
  row[kSampleMinP] = params.min_p;
  return row;
}

Status fill_sampling_input(Tensor& t, InputRole role, const DeviceSamplingParams& params,
                           std::span<const double> uniforms, std::span<const std::span<const uint64_t>> masks) {
  OG_RETURN_IF_ERROR(fill(t, role, static_cast<int64_t>(uniforms.size()), params,
                          [uniforms](int64_t b) { return uniforms[static_cast<size_t>(b)]; }));
  if (role != InputRole::kSamplingParams) return Status::ok();
  float slot = 0.0f;
  for (size_t b = 0; b < masks.size(); ++b) {
    if (!masks[b].empty()) t.data<float>()[static_cast<int64_t>(b) * kSampleParamCount + kSampleMaskSlot] = ++slot;
  }
  return Status::ok();
}

Status fill_masks(Tensor& t, int64_t vocab, std::span<const std::span<const uint64_t>> masks) {
  const int64_t words = mask_words(vocab);
  const auto count = static_cast<int64_t>(std::count_if(masks.begin(), masks.end(), [](auto m) { return !m.empty(); }));
  OG_RETURN_IF_ERROR(reuse_tensor(t, DType::kI64, Shape{count, words}));
  auto* out = reinterpret_cast<uint64_t*>(t.data<int64_t>());
  for (const std::span<const uint64_t> mask : masks) {
    if (!mask.empty()) OG_RETURN_IF_ERROR(append_mask(mask, vocab, out));
  }
  return Status::ok();
}

Status append_mask(std::span<const uint64_t> mask, int64_t vocab, uint64_t*& out) {
  if (static_cast<int64_t>(mask.size()) != mask_words(vocab)) {
    return OG_ERROR("internal error: a token mask of ", mask.size(), " words for ", mask_words(vocab));
  }
  out = std::copy(mask.begin(), mask.end(), out);
  return Status::ok();
}

Status fill_no_sampling(Tensor& t, InputRole role, int64_t rows) {
  return fill(t, role, rows, device_sampling_params(SamplingParams{}), [](int64_t) { return kNoDraw; });
}

Result<int32_t> sampled_token(const Tensor& tokens, int64_t row, int64_t vocab) {
  const int64_t token = tokens.data<int64_t>()[row];
  if (token >= 0 && token < vocab) return static_cast<int32_t>(token);
  switch (token) {
    case kSampleNothingLeft: return sampling::nothing_left();
    case kSampleInvalidLogits:
      return OG_ERROR("sampling: a logit is NaN or +inf (logits must be finite or -inf)");
    default:
      return OG_ERROR("decoder output '", kSampledTokensOutput, "' gave ", token, " for batch row ", row,
                      ", not a token of the vocabulary [0, ", vocab, ")");
  }
}

}  // namespace onnx_genai::genai
