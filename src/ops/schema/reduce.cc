#include "ops/op.h"

namespace onnx_genai {

void register_reduce_schemas(OpRegistry& registry) {}

}  // namespace onnx_genai
