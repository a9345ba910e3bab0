#include "runtime/node_runner.h"

#include <cstring>

#include "core/thread_pool.h"
#include "ops/op.h"

namespace onnx_genai {

Result<std::vector<Tensor>> run_node_on_cpu(const Node& node, const std::vector<Tensor>& inputs, ThreadPool* pool) {
  const OpRegistry& registry = OpRegistry::instance();
  const OpSchema* schema = registry.find_schema(node.domain, node.op_type);
  if (schema == nullptr) return OG_ERROR(node.describe(), ": unsupported op");

  std::vector<TensorInfo> input_infos(inputs.size());
  std::vector<DType> input_dtypes(inputs.size(), DType::kUndefined);
  InferContext infer{node, {}, {}, {}};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool present = inputs[i].defined();
    if (present) {
      input_infos[i] = {inputs[i].dtype(), inputs[i].shape()};
      input_dtypes[i] = inputs[i].dtype();
    }
    infer.inputs.push_back(present ? &input_infos[i] : nullptr);
    infer.input_values.push_back(present ? &inputs[i] : nullptr);
  }
  infer.outputs.resize(node.outputs.size());
  OG_RETURN_IF_ERROR(schema->infer_shapes(infer));

  OG_ASSIGN_OR_RETURN(const KernelDef* def, registry.find_kernel(node, DeviceType::kCpu, input_dtypes));
  std::unique_ptr<OpKernel> kernel = def->create(node);

  std::vector<const TensorInfo*> output_infos;
  for (size_t i = 0; i < infer.outputs.size(); ++i) {
    const bool wanted = node.outputs.empty() || node.outputs[i] != nullptr;
    if (wanted && !infer.outputs[i]) return OG_ERROR(node.describe(), ": shape inference left output ", i, " unset");
    output_infos.push_back(wanted ? &*infer.outputs[i] : nullptr);
  }
  PrepareContext prepare{node, infer.inputs, infer.input_values, output_infos, 0, pool};
  OG_RETURN_IF_ERROR(kernel->prepare(prepare));

  std::vector<Tensor> outputs(infer.outputs.size());
  std::vector<KernelTensor> in_views(inputs.size()), out_views(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined()) in_views[i] = {inputs[i].dtype(), &inputs[i].shape(), const_cast<void*>(inputs[i].raw())};
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (output_infos[i] == nullptr) continue;
    if (schema->alias_input >= 0 && i == 0) {
      // A view op: the output shares the input's bytes, reshaped.
      OG_ASSIGN_OR_RETURN(outputs[i], inputs[static_cast<size_t>(schema->alias_input)].reshaped(output_infos[i]->shape));
    } else {
      OG_ASSIGN_OR_RETURN(outputs[i], Tensor::allocate(output_infos[i]->dtype, output_infos[i]->shape));
    }
    out_views[i] = {outputs[i].dtype(), &outputs[i].shape(), outputs[i].raw()};
  }
  std::vector<uint8_t> workspace(prepare.workspace_bytes + kCpuAlignment);
  void* aligned = workspace.data() + (kCpuAlignment - reinterpret_cast<uintptr_t>(workspace.data()) % kCpuAlignment);
  KernelContext ctx{in_views, out_views, prepare.workspace_bytes ? aligned : nullptr, pool};
  OG_RETURN_IF_ERROR(kernel->run(ctx));
  return outputs;
}

}  // namespace onnx_genai
