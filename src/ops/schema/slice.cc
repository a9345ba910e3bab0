#include "ops/op.h"

namespace onnx_genai {

void register_slice_schemas(OpRegistry& registry) {}

}  // namespace onnx_genai
