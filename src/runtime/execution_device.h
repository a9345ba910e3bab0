// The accelerator a session runs on, as its plans see it: memory, one stream that every kernel and
// copy of a run is queued on, copies between the host and the device, and constants uploaded once.
// Host code needs no CUDA headers for any of it; a build without CUDA has no implementation and
// open_execution_device says so.
#pragma once

#include <functional>
#include <map>
#include <memory>

#include "onnx_genai/device.h"
#include "onnx_genai/tensor.h"

namespace onnx_genai {

class ExecutionDevice {
 public:
  virtual ~ExecutionDevice() = default;
  virtual Device device() const = 0;
  // The device whose registered kernels run here (a GPU's own; a test's stand-in device in host
  // memory runs the CPU kernels).
  virtual DeviceType kernel_device() const { return device().type; }
  virtual Allocator& allocator() = 0;
  virtual void* stream() const = 0;  // handed to kernels as KernelContext::stream
  // Makes this device the calling thread's current one (before a run launches anything).
  virtual Status activate() = 0;

  // Queued on stream(). A copy to the host is complete only after synchronize().
  virtual Status copy_to_device(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual Status copy_to_host(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual Status copy_on_device(void* device_dst, const void* device_src, size_t bytes) = 0;
  // Waits for everything queued; a kernel's asynchronous fault surfaces here.
  virtual Status synchronize() = 0;

  // Host memory for the host side of copies (page-locked on a GPU: such copies can be recorded).
  virtual Allocator& host_allocator() { return cpu_allocator(); }

  // Work queued on stream() recorded once (a CUDA graph) and replayed as one launch.
  class Recording {
   public:
    virtual ~Recording() = default;
    virtual Status replay() = 0;
  };
  virtual bool can_record() const { return false; }
  // Records what `queue` queues on stream() without running it; an error when something it
  // queues cannot be recorded (the stream is usable again either way).
  virtual Result<std::unique_ptr<Recording>> record(const std::function<Status()>& queue) {
    (void)queue;
    return OG_ERROR(device().to_string(), " cannot record work");
  }

  // A device copy of a host tensor, owned by the returned handle. (The uploaded constants go back
  // to allocator() when this base class is destroyed: an implementation's allocator outlives it.)
  Result<std::shared_ptr<void>> upload(const Tensor& host);
  // The device copy of an initializer, uploaded on first use and kept for the device's lifetime
  // (the session's): every plan of the session shares it.
  Result<const void*> constant(const Tensor& initializer);

 private:
  std::map<const void*, std::shared_ptr<void>> constants_;  // by the initializer's host bytes
};

// The device for `device` (kCuda), or why it cannot be used: no CUDA in this build, no such
// device, a GPU this build has no code for.
Result<std::unique_ptr<ExecutionDevice>> open_execution_device(Device device);

// The device to run on when `requested` is asked for: `requested` itself, or the CPU when it is a
// GPU that exists but that this build has no code for (another compute capability); then
// `fallback_reason` names the device and says why. Whatever else is wrong with `requested` (no
// CUDA in this build, no such device) is left for open_execution_device to report.
Device device_or_cpu_fallback(Device requested, std::string& fallback_reason);

// Tests stand a device in host memory in for a GPU: while an opener is set (non-null),
// open_execution_device returns what it makes.
using ExecutionDeviceOpener = std::function<Result<std::unique_ptr<ExecutionDevice>>(Device)>;
void set_execution_device_opener_for_tests(ExecutionDeviceOpener opener);
// ... and while a probe is set, device_or_cpu_fallback asks it why a device is unsupported ("" when
// it is supported) instead of asking the driver.
using UnsupportedDeviceProbe = std::function<std::string(Device)>;
void set_unsupported_device_probe_for_tests(UnsupportedDeviceProbe probe);

}  // namespace onnx_genai
