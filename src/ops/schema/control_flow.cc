#include "ops/op.h"

namespace onnx_genai {

void register_control_flow_schemas(OpRegistry& registry) {}

}  // namespace onnx_genai
