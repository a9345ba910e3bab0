#include <algorithm>

#include "ops/op.h"
#include "ops/register_all.h"

#ifdef OG_HAVE_CUDA
#include "ops/cuda/register.h"
#endif

namespace onnx_genai {

OpRegistry& OpRegistry::instance() {
  static OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    register_all_schemas(*r);
    register_all_cpu_kernels(*r);
#ifdef OG_HAVE_CUDA
    register_all_cuda_kernels(*r);
#endif
    return r;
  }();
  return *registry;
}

void OpRegistry::add_schema(OpSchema schema) {
  auto key = std::make_pair(canonical_domain(schema.domain), schema.op_type);
  schemas_[key] = std::move(schema);
}

void OpRegistry::add_kernel(KernelDef def) {
  auto key = std::make_pair(canonical_domain(def.domain), def.op_type);
  kernels_[key].push_back(std::move(def));
}

const OpSchema* OpRegistry::find_schema(const std::string& domain, const std::string& op_type) const {
  auto it = schemas_.find({canonical_domain(domain), op_type});
  return it == schemas_.end() ? nullptr : &it->second;
}

bool OpRegistry::has_op(const std::string& domain, const std::string& op_type) const {
  return find_schema(domain, op_type) != nullptr;
}

std::vector<std::string> OpRegistry::op_names() const {
  std::vector<std::string> names;
  for (const auto& [key, schema] : schemas_) names.push_back((key.first.empty() ? "" : key.first + "::") + key.second);
  return names;
}

Result<const KernelDef*> OpRegistry::find_kernel(const Node& node, DeviceType device,
                                                 std::span<const DType> input_dtypes) const {
  auto it = kernels_.find({canonical_domain(node.domain), node.op_type});
  if (it == kernels_.end()) return OG_ERROR(node.describe(), ": no kernel for this op");
  std::string why;
  for (const KernelDef& def : it->second) {
    if (def.device != device) continue;
    if (node.opset < def.since_version || node.opset > def.end_version) {
      why = "opset " + std::to_string(node.opset) + " not covered";
      continue;
    }
    if (!def.dtypes.empty()) {
      const size_t ti = static_cast<size_t>(def.type_input);
      const DType t = ti < input_dtypes.size() ? input_dtypes[ti] : DType::kUndefined;
      if (std::find(def.dtypes.begin(), def.dtypes.end(), t) == def.dtypes.end()) {
        why = "input " + std::to_string(ti) + " dtype " + std::string(dtype_name(t)) + " not supported";
        continue;
      }
    }
    return &def;
  }
  return OG_ERROR(node.describe(), ": no ", device == DeviceType::kCpu ? "CPU" : "CUDA", " kernel (",
                  why.empty() ? "no kernel for this device" : why, ")");
}

}  // namespace onnx_genai
