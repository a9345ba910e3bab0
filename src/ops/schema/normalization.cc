#include "ops/op.h"

namespace onnx_genai {

void register_normalization_schemas(OpRegistry& registry) {}

}  // namespace onnx_genai
