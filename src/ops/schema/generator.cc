#include "ops/op.h"

namespace onnx_genai {

void register_generator_schemas(OpRegistry& registry) {}

}  // namespace onnx_genai
