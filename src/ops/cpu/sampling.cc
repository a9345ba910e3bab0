// onnx_genai SampleTokens on the CPU (contract in ops/schema/sampling.h): each row goes through
// the host Sampler's own code, sampling/ (the chain make_logit_processors builds, then
// sampling::pick_token at the given uniform), so this kernel is the reference the CUDA kernel is
// held to. It builds a chain per row and run, which allocates: it runs in tests and on the
// stand-in device only, never in a CPU session (the generator samples on the host there).
#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <vector>

#include "sampling/pick.h"
#include "ops/cpu/dispatch.h"
#include "ops/op.h"
#include "ops/schema/sampling.h"

namespace onnx_genai {

namespace {

// The SamplingParams a row of params stands for, or nullopt when top_k is not a whole number >= 0.
// top_k is clamped to the vocabulary: any k >= V keeps every token, as k = V does.
std::optional<SamplingParams> row_params(const float* row, int64_t vocab) {
  const float top_k = row[kSampleTopK];
  if (!(std::isfinite(top_k) && top_k >= 0.0f && top_k == std::floor(top_k))) return std::nullopt;
  SamplingParams params;
  params.temperature = row[kSampleTemperature];
  params.top_k = static_cast<int32_t>(std::min<double>(top_k, static_cast<double>(vocab)));
  params.top_p = row[kSampleTopP];
  params.min_p = row[kSampleMinP];
  return params;
}

class SampleTokensKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(shape_, SampleTokensParams::make(ctx.node, ctx.inputs));
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const auto* params = ctx.input(SampleTokensParams::kParams).ptr<const float>();
    const auto* uniforms = ctx.input(SampleTokensParams::kUniforms).ptr<const double>();
    const auto* allowed = shape_.mask_rows > 0 ? ctx.input(SampleTokensParams::kAllowed).ptr<const uint64_t>() : nullptr;
    auto* tokens = ctx.output(0).ptr<int64_t>();
    return dispatch_dtype<float, Float16, BFloat16>(shape_.logits_dtype, [&]<typename T>() -> Status {
      const auto* logits = ctx.input(SampleTokensParams::kLogits).ptr<const T>();
      std::vector<float> row;
      Scratch scratch;
      for (int64_t b = 0; b < shape_.batch; ++b) {
        const T* last = logits + ((b + 1) * shape_.positions - 1) * shape_.vocab;
        row.resize(static_cast<size_t>(shape_.vocab));  // widened to float, as the generator widens a row
        for (int64_t v = 0; v < shape_.vocab; ++v) row[static_cast<size_t>(v)] = load(last[v]);
        OG_ASSIGN_OR_RETURN(tokens[b], sample_row(row, params + b * kSampleParamCount, uniforms[b], allowed, scratch));
      }
      return Status::ok();
    });
  }

 private:
  struct Scratch {
    Candidates candidates;
    std::vector<float> weights;
  };

  // The Sampler's token for `logits` (or a SampleTokensCode); fails only if a processor does.
  Result<int64_t> sample_row(std::span<const float> logits, const float* params, double uniform,
                             const uint64_t* allowed, Scratch& scratch) const {
    if (uniform < 0.0) return int64_t{kSampleNoToken};
    const std::optional<SamplingParams> sampling = row_params(params, shape_.vocab);
    const float slot = params[kSampleMaskSlot];
    const bool valid_slot = slot >= 0.0f && slot == std::floor(slot) && slot <= static_cast<float>(shape_.mask_rows);
    if (!sampling || !valid_slot || !(uniform < 1.0)) return int64_t{kSampleInvalidParams};
    Result<LogitProcessorChain> chain = make_logit_processors(*sampling);  // validates the params
    if (!chain.is_ok()) return int64_t{kSampleInvalidParams};
    if (!sampling::check_logits(logits).is_ok()) return int64_t{kSampleInvalidLogits};
    scratch.candidates.assign(logits);
    if (slot > 0.0f) {  // as the constraint processor masks, before the rest of the chain
      const uint64_t* mask = allowed + (static_cast<int64_t>(slot) - 1) * shape_.mask_words;
      const auto width = static_cast<size_t>(shape_.mask_words) * 64;
      scratch.candidates.keep_if([&](int32_t id, float) {
        const auto t = static_cast<size_t>(id);
        return t < width && ((mask[t >> 6] >> (t & 63)) & 1);
      });
      if (scratch.candidates.ids().empty()) return int64_t{kSampleNothingLeft};
    }
    for (const auto& processor : *chain) OG_RETURN_IF_ERROR(processor->apply(TokenHistory{}, scratch.candidates));
    const Result<int32_t> token = sampling::pick_token(scratch.candidates, sampling->is_greedy(),
                                                       [uniform] { return uniform; }, scratch.weights);
    return token.is_ok() ? int64_t{*token} : int64_t{kSampleNothingLeft};  // nothing_left() is its only error
  }

  SampleTokensParams shape_;
};

}  // namespace

void register_sampling_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = SampleTokensParams::kDomain, .op_type = SampleTokensParams::kOpType,
                                .device = DeviceType::kCpu, .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [](const Node&) { return std::make_unique<SampleTokensKernel>(); }});
}

}  // namespace onnx_genai
