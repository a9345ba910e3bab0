#include "ops/register_all.h"

namespace onnx_genai {

void register_all_schemas(OpRegistry& registry) {
#define OG_CALL(family) register_##family##_schemas(registry);
  OG_OP_FAMILIES(OG_CALL)
#undef OG_CALL
  register_control_flow_schemas(registry);
}

void register_all_cpu_kernels(OpRegistry& registry) {
#define OG_CALL(family) register_##family##_cpu_kernels(registry);
  OG_OP_FAMILIES(OG_CALL)
#undef OG_CALL
}

}  // namespace onnx_genai
