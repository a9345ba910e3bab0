// Device memory: the Allocator for DeviceType::kCuda, an owning buffer, and stream-ordered copies.
// Host code needs no CUDA headers for any of it; streams travel as void* (a cudaStream_t).
#pragma once

#include <cstddef>
#include <cstdint>

#include "onnx_genai/device.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// cudaMalloc aligns to at least 256 bytes; sizes are rounded up to it too, so 16-byte vector
// loads past a tensor's end stay inside its allocation.
inline constexpr size_t kCudaAlignment = 256;
inline constexpr int kMaxDevices = 16;

// The allocator for device `index` (< kMaxDevices); allocate() returns nullptr on failure.
Allocator& cuda_allocator(int index = 0);

// Page-locked host memory (DeviceType::kCpu: the CPU kernels use it as any host memory): copies
// between it and the device run asynchronously and can be recorded in a CUDA graph.
Allocator& pinned_host_allocator();

// How many device allocations cuda_allocator() has made in this process: a test's proof that
// replaying a plan allocates nothing.
int64_t device_allocation_count();

// Device memory owned by cuda_allocator(index), released on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> allocate(size_t bytes, int device = 0);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

// Stream-ordered copies and fills (stream may be null: the default stream). They return once
// queued; synchronise the stream before reading host memory written by copy_to_host.
Status copy_to_device(void* device_dst, const void* host_src, size_t bytes, void* stream);
Status copy_to_host(void* host_dst, const void* device_src, size_t bytes, void* stream);
Status fill_bytes(void* device_dst, int byte_value, size_t bytes, void* stream);
Status copy_on_device(void* device_dst, const void* device_src, size_t bytes, void* stream);

// Makes `index` the calling thread's current device (kernels launch there).
Status use_device(int index);
// Bytes the driver reports free on device `index` (0 when it cannot say).
size_t free_device_bytes(int index);

}  // namespace onnx_genai::cuda
