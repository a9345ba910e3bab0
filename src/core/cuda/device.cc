#include "core/cuda/device.h"

#include <sstream>

#include "core/cuda/cuda_check.h"

namespace onnx_genai::cuda {

namespace {
constexpr int kBuiltMajor = 9, kBuiltMinor = 0;
}  // namespace

std::string DeviceInfo::to_string() const {
  std::ostringstream out;
  out << "cuda:" << index << " " << name << " (compute capability " << major << "." << minor << ", " << sm_count
      << " SMs, " << l2_bytes / (1 << 20) << " MiB L2, " << memory_bytes / (int64_t{1} << 30) << " GiB)";
  return out.str();
}

Status check_compute_capability(int major, int minor) {
  if (major == kBuiltMajor && minor == kBuiltMinor) return Status::ok();
  const bool older = major < kBuiltMajor || (major == kBuiltMajor && minor < kBuiltMinor);
  return OG_ERROR("compute capability ", major, ".", minor, older ? " < " : " != ", kBuiltMajor, ".", kBuiltMinor,
                  ": this build has sm_90a code only");
}

Result<int> device_count() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  // No device (or no driver at all) is an answer, not a failure.
  if (err == cudaErrorNoDevice) return 0;
  OG_RETURN_IF_ERROR(cuda_status(err, "CUDA driver"));
  return count;
}

Result<DeviceInfo> query_device(int index) {
  cudaDeviceProp prop{};
  OG_RETURN_IF_ERROR(cuda_status(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties"));
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = prop.l2CacheSize;
  info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.shared_per_block_optin = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  return info;
}

Result<DeviceInfo> usable_device(int index) {
  OG_ASSIGN_OR_RETURN(int count, device_count());
  if (count == 0) return OG_ERROR("no CUDA device");
  if (index < 0 || index >= count) return OG_ERROR("CUDA device ", index, " does not exist (", count, " found)");
  OG_ASSIGN_OR_RETURN(DeviceInfo info, query_device(index));
  Status capability = check_compute_capability(info.major, info.minor);
  if (!capability.is_ok()) return OG_ERROR(info.name, ": ", capability.message());
  return info;
}

}  // namespace onnx_genai::cuda
