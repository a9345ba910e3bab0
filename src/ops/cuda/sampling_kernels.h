// Launch interface of the CUDA SampleTokens kernel (sampling_kernels.cu; the op's contract is
// ops/schema/sampling.h). No CUDA headers needed.
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// tokens[b] = the Sampler's pick for logits[b, positions - 1, :] under params[b] at uniforms[b],
// among the tokens its mask (if any) allows.
struct SampleTokensArgs {
  DType dtype = DType::kF32;  // of the logits: f32, f16 or bf16
  int64_t batch = 0, positions = 1, vocab = 0;
  const void* logits = nullptr;      // [batch, positions, vocab]
  const float* params = nullptr;     // [batch, kSampleParamCount]
  const double* uniforms = nullptr;  // [batch]
  int64_t* tokens = nullptr;         // [batch]
  const uint64_t* allowed = nullptr;  // [mask_rows, mask_words] token bit sets, or none
  int64_t mask_rows = 0, mask_words = 0;
};

bool sample_tokens_supported(DType dtype);
// Host-side set-up before the first launch (the kernel's shared-memory limit); call it while
// planning, never while a launch may be recorded into a graph.
Status prepare_sample_tokens(DType dtype);
// Queues the kernel on `stream`: no allocation, no synchronisation (graph-capture safe).
Status launch_sample_tokens(const SampleTokensArgs& args, void* stream);

}  // namespace onnx_genai::cuda
