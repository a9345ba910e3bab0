#include "runtime/execution_device.h"

#ifdef OG_HAVE_CUDA
#include "core/cuda/device.h"
#include "core/cuda/graph.h"
#include "core/cuda/memory.h"
#include "core/cuda/stream.h"
#endif

namespace onnx_genai {

Result<std::shared_ptr<void>> ExecutionDevice::upload(const Tensor& host) {
  const auto bytes = static_cast<size_t>(host.nbytes());
  Allocator& memory = allocator();
  void* data = memory.allocate(bytes);
  if (data == nullptr) {
    return OG_ERROR("out of memory on ", device().to_string(), ": ", bytes, " bytes needed for a constant, ",
                    memory.free_bytes(), " free");
  }
  std::shared_ptr<void> owned(data, [&memory](void* p) { memory.deallocate(p); });
  if (bytes > 0) OG_RETURN_IF_ERROR(copy_to_device(data, host.raw(), bytes));
  return owned;
}

Result<const void*> ExecutionDevice::constant(const Tensor& initializer) {
  auto it = constants_.find(initializer.raw());
  if (it != constants_.end()) return static_cast<const void*>(it->second.get());
  OG_ASSIGN_OR_RETURN(std::shared_ptr<void> uploaded, upload(initializer));
  constants_.emplace(initializer.raw(), uploaded);
  return static_cast<const void*>(uploaded.get());
}

#ifdef OG_HAVE_CUDA
namespace {

class CudaExecutionDevice final : public ExecutionDevice {
 public:
  CudaExecutionDevice(int index, cuda::Stream stream) : index_(index), stream_(std::move(stream)) {}

  Device device() const override { return {DeviceType::kCuda, index_}; }
  Allocator& allocator() override { return cuda::cuda_allocator(index_); }
  void* stream() const override { return stream_.handle(); }
  Status activate() override { return cuda::use_device(index_); }

  Status copy_to_device(void* device_dst, const void* host_src, size_t bytes) override {
    return cuda::copy_to_device(device_dst, host_src, bytes, stream());
  }
  Status copy_to_host(void* host_dst, const void* device_src, size_t bytes) override {
    return cuda::copy_to_host(host_dst, device_src, bytes, stream());
  }
  Status copy_on_device(void* device_dst, const void* device_src, size_t bytes) override {
    return cuda::copy_on_device(device_dst, device_src, bytes, stream());
  }
  Status synchronize() override { return stream_.synchronize(); }
  Allocator& host_allocator() override { return cuda::pinned_host_allocator(); }

  bool can_record() const override { return true; }
  Result<std::unique_ptr<Recording>> record(const std::function<Status()>& queue) override {
    OG_ASSIGN_OR_RETURN(cuda::StreamGraph graph, cuda::StreamGraph::record(stream(), queue));
    return std::unique_ptr<Recording>(new GraphRecording(std::move(graph), stream()));
  }

 private:
  class GraphRecording final : public Recording {
   public:
    GraphRecording(cuda::StreamGraph graph, void* stream) : graph_(std::move(graph)), stream_(stream) {}
    Status replay() override { return graph_.replay(stream_); }

   private:
    cuda::StreamGraph graph_;
    void* stream_;
  };

  int index_;
  cuda::Stream stream_;
};

}  // namespace
#endif

namespace {
ExecutionDeviceOpener& opener_for_tests() {
  static ExecutionDeviceOpener opener;
  return opener;
}

UnsupportedDeviceProbe& probe_for_tests() {
  static UnsupportedDeviceProbe probe;
  return probe;
}

// Why an existing device cannot run this build's kernels; "" when it can or does not exist.
std::string unsupported_device_reason(Device device) {
  if (probe_for_tests()) return probe_for_tests()(device);
#ifdef OG_HAVE_CUDA
  if (device.type != DeviceType::kCuda) return "";
  const Result<int> count = cuda::device_count();
  if (!count.is_ok() || device.index < 0 || device.index >= *count) return "";
  const Result<cuda::DeviceInfo> info = cuda::query_device(device.index);
  if (!info.is_ok()) return "";
  const Status capability = cuda::check_compute_capability(info->major, info->minor);
  return capability.is_ok() ? "" : info->to_string() + ": " + capability.message();
#else
  (void)device;
  return "";
#endif
}
}  // namespace

void set_execution_device_opener_for_tests(ExecutionDeviceOpener opener) { opener_for_tests() = std::move(opener); }
void set_unsupported_device_probe_for_tests(UnsupportedDeviceProbe probe) { probe_for_tests() = std::move(probe); }

Device device_or_cpu_fallback(Device requested, std::string& fallback_reason) {
  fallback_reason = requested.type == DeviceType::kCpu ? "" : unsupported_device_reason(requested);
  return fallback_reason.empty() ? requested : Device::cpu();
}

Result<std::unique_ptr<ExecutionDevice>> open_execution_device(Device device) {
  if (opener_for_tests()) return opener_for_tests()(device);
  if (device.type != DeviceType::kCuda) return OG_ERROR(device.to_string(), " is not an accelerator");
#ifdef OG_HAVE_CUDA
  auto usable = cuda::usable_device(device.index);
  if (!usable.is_ok()) return usable.status().with_context(device.to_string());
  OG_RETURN_IF_ERROR(cuda::use_device(device.index));
  OG_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::create());
  return std::unique_ptr<ExecutionDevice>(new CudaExecutionDevice(device.index, std::move(stream)));
#else
  return OG_ERROR(device.to_string(), ": this build has no CUDA backend (nvcc was not found when it was configured)");
#endif
}

}  // namespace onnx_genai
