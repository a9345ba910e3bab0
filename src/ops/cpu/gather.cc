#include "ops/op.h"

namespace onnx_genai {

void register_gather_cpu_kernels(OpRegistry& registry) {}

}  // namespace onnx_genai
