#include "ops/op.h"

namespace onnx_genai {

void register_unary_cpu_kernels(OpRegistry& registry) {}

}  // namespace onnx_genai
