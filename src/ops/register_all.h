// The list of op families. Each family implements its register_* functions in
// src/ops/schema/<family>.cc and src/ops/cpu/<family>.cc.
#pragma once

namespace onnx_genai {

class OpRegistry;

#define OG_OP_FAMILIES(X) \
  X(binary)               \
  X(unary)                \
  X(matmul)               \
  X(reduce)               \
  X(softmax)              \
  X(normalization)        \
  X(layout)               \
  X(shape)                \
  X(gather)               \
  X(concat_split)         \
  X(slice)                \
  X(generator)            \
  X(quantized_matmul)     \
  X(fused_matmul)         \
  X(attention)            \
  X(rotary)               \
  X(activation)           \
  X(sampling)             \
  X(paged_attention)      \
  X(moe)                  \
  X(collective)

#define OG_DECLARE_FAMILY(family)                  \
  void register_##family##_schemas(OpRegistry&);   \
  void register_##family##_cpu_kernels(OpRegistry&);
OG_OP_FAMILIES(OG_DECLARE_FAMILY)
#undef OG_DECLARE_FAMILY

// Control flow has schemas but no kernels: the planner inlines an If's taken branch.
void register_control_flow_schemas(OpRegistry&);

void register_all_schemas(OpRegistry& registry);
void register_all_cpu_kernels(OpRegistry& registry);

}  // namespace onnx_genai
