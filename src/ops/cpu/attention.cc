// Registers the attention family's CPU kernels (each in its own ops/cpu/attention_*.cc).
#include "ops/cpu/attention_kernels.h"

namespace onnx_genai {

void register_attention_cpu_kernels(OpRegistry& registry) {
  const auto add = [&](const char* domain, const char* op, int since, std::unique_ptr<OpKernel> (*create)(const Node&)) {
    KernelDef def;
    def.domain = domain;
    def.op_type = op;
    def.since_version = since;
    def.dtypes = {DType::kF32, DType::kF16, DType::kBF16};
    def.create = create;
    registry.add_kernel(std::move(def));
  };
  add("com.microsoft", "GroupQueryAttention", 1, make_group_query_attention_kernel);
  add("com.microsoft", "MultiHeadAttention", 1, make_multi_head_attention_kernel);
  add("", "Attention", 23, make_onnx_attention_kernel);
}

}  // namespace onnx_genai
