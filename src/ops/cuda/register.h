// The CUDA kernel families (src/ops/cuda/<family>.cc), registered for DeviceType::kCuda next to
// the CPU kernels; OpRegistry::find_kernel picks by device.
#pragma once

namespace onnx_genai {

class OpRegistry;

void register_normalization_cuda_kernels(OpRegistry& registry);
void register_quantized_matmul_cuda_kernels(OpRegistry& registry);
void register_attention_cuda_kernels(OpRegistry& registry);
void register_onnx_attention_cuda_kernels(OpRegistry& registry);
void register_elementwise_cuda_kernels(OpRegistry& registry);
void register_gather_cuda_kernels(OpRegistry& registry);
void register_reduce_cuda_kernels(OpRegistry& registry);
void register_matmul_cuda_kernels(OpRegistry& registry);
void register_layout_cuda_kernels(OpRegistry& registry);
void register_softmax_cuda_kernels(OpRegistry& registry);
void register_logical_cuda_kernels(OpRegistry& registry);
void register_mean_cuda_kernels(OpRegistry& registry);
void register_sampling_cuda_kernels(OpRegistry& registry);
void register_rotary_cuda_kernels(OpRegistry& registry);
void register_paged_attention_cuda_kernels(OpRegistry& registry);
void register_moe_cuda_kernels(OpRegistry& registry);

inline void register_all_cuda_kernels(OpRegistry& registry) {
  register_normalization_cuda_kernels(registry);
  register_quantized_matmul_cuda_kernels(registry);
  register_attention_cuda_kernels(registry);
  register_onnx_attention_cuda_kernels(registry);
  register_elementwise_cuda_kernels(registry);
  register_gather_cuda_kernels(registry);
  register_reduce_cuda_kernels(registry);
  register_matmul_cuda_kernels(registry);
  register_layout_cuda_kernels(registry);
  register_softmax_cuda_kernels(registry);
  register_logical_cuda_kernels(registry);
  register_mean_cuda_kernels(registry);
  register_sampling_cuda_kernels(registry);
  register_rotary_cuda_kernels(registry);
  register_paged_attention_cuda_kernels(registry);
  register_moe_cuda_kernels(registry);
}

}  // namespace onnx_genai
