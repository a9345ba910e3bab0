#include "core/cuda/memory.h"

#include <array>
#include <atomic>
#include <utility>

#include "core/cuda/cuda_check.h"

namespace onnx_genai::cuda {

namespace {

// Runs allocation calls on `index` and restores the caller's current device afterwards.
class DeviceScope {
 public:
  explicit DeviceScope(int index) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != index) {
      switched_ = cudaSetDevice(index) == cudaSuccess;
      ok_ = switched_;
    }
  }
  ~DeviceScope() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  bool ok() const { return ok_; }

 private:
  int previous_ = 0;
  bool switched_ = false;
  bool ok_ = true;
};

std::atomic<int64_t> device_allocations{0};

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int index) : index_(index) {}
  Device device() const override { return Device{DeviceType::kCuda, index_}; }
  void* allocate(size_t bytes) override {
    DeviceScope scope(index_);
    if (!scope.ok()) return nullptr;
    const size_t rounded = bytes == 0 ? kCudaAlignment : (bytes + kCudaAlignment - 1) / kCudaAlignment * kCudaAlignment;
    void* ptr = nullptr;
    if (cudaMalloc(&ptr, rounded) != cudaSuccess) return nullptr;
    device_allocations.fetch_add(1, std::memory_order_relaxed);
    return ptr;
  }
  void deallocate(void* ptr) override {
    if (ptr == nullptr) return;
    DeviceScope scope(index_);
    (void)cudaFree(ptr);
  }
  // Synchronous (cudaMemcpy2D on the legacy stream, which waits for nothing on the runtime's
  // non-blocking streams: callers have none in flight, as the interface says). CUDA leaves
  // overlapping copies undefined, so a move goes through a scratch buffer.
  Status copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                   size_t rows) override {
    if (rows == 0 || row_bytes == 0) return Status::ok();
    DeviceScope scope(index_);
    const auto* src_begin = static_cast<const char*>(src);
    const auto* dst_begin = static_cast<const char*>(dst);
    const bool overlap = dst_begin < src_begin + (rows - 1) * src_pitch + row_bytes &&
                         src_begin < dst_begin + (rows - 1) * dst_pitch + row_bytes;
    if (!overlap) {
      return cuda_status(cudaMemcpy2D(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDeviceToDevice),
                         "copy rows on device");
    }
    OG_ASSIGN_OR_RETURN(DeviceBuffer scratch, DeviceBuffer::allocate(row_bytes * rows, index_));
    OG_RETURN_IF_ERROR(cuda_status(
        cudaMemcpy2D(scratch.data(), row_bytes, src, src_pitch, row_bytes, rows, cudaMemcpyDeviceToDevice),
        "copy rows on device"));
    return cuda_status(
        cudaMemcpy2D(dst, dst_pitch, scratch.data(), row_bytes, row_bytes, rows, cudaMemcpyDeviceToDevice),
        "copy rows on device");
  }
  Status zero(void* dst, size_t bytes) override {
    DeviceScope scope(index_);
    return cuda_status(cudaMemset(dst, 0, bytes), "zero device memory");
  }
  size_t free_bytes() const override { return free_device_bytes(index_); }

 private:
  int index_;
};

class PinnedHostAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu(); }
  void* allocate(size_t bytes) override {
    void* ptr = nullptr;
    return cudaHostAlloc(&ptr, bytes == 0 ? 1 : bytes, cudaHostAllocPortable) == cudaSuccess ? ptr : nullptr;
  }
  void deallocate(void* ptr) override {
    if (ptr != nullptr) (void)cudaFreeHost(ptr);
  }
  Status copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                   size_t rows) override {
    return cpu_allocator().copy_rows(dst, dst_pitch, src, src_pitch, row_bytes, rows);
  }
  Status zero(void* dst, size_t bytes) override { return cpu_allocator().zero(dst, bytes); }
};

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

Allocator& cuda_allocator(int index) {
  static std::array<CudaAllocator, kMaxDevices> allocators = [] {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return std::array<CudaAllocator, kMaxDevices>{CudaAllocator(static_cast<int>(I))...};
    }(std::make_index_sequence<kMaxDevices>{});
  }();
  return allocators[static_cast<size_t>(index < 0 || index >= kMaxDevices ? 0 : index)];
}

Allocator& pinned_host_allocator() {
  static PinnedHostAllocator allocator;
  return allocator;
}

int64_t device_allocation_count() { return device_allocations.load(std::memory_order_relaxed); }

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes, int device) {
  if (device < 0 || device >= kMaxDevices) return OG_ERROR("CUDA device index ", device, " out of range");
  DeviceBuffer buffer;
  buffer.data_ = cuda_allocator(device).allocate(bytes);
  if (buffer.data_ == nullptr) {
    return OG_ERROR("out of memory allocating ", bytes, " bytes on cuda:", device, " (",
                    cudaGetErrorString(cudaGetLastError()), ")");
  }
  buffer.bytes_ = bytes;
  buffer.device_ = device;
  return buffer;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)), device_(other.device_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cuda_allocator(device_).deallocate(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cuda_allocator(device_).deallocate(data_);
}

Status copy_to_device(void* device_dst, const void* host_src, size_t bytes, void* stream) {
  return cuda_status(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, as_stream(stream)),
                     "copy to device");
}

Status copy_to_host(void* host_dst, const void* device_src, size_t bytes, void* stream) {
  return cuda_status(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, as_stream(stream)),
                     "copy to host");
}

Status fill_bytes(void* device_dst, int byte_value, size_t bytes, void* stream) {
  return cuda_status(cudaMemsetAsync(device_dst, byte_value, bytes, as_stream(stream)), "fill device memory");
}

Status copy_on_device(void* device_dst, const void* device_src, size_t bytes, void* stream) {
  return cuda_status(cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream)),
                     "copy on device");
}

Status use_device(int index) { return cuda_status(cudaSetDevice(index), "cudaSetDevice"); }

size_t free_device_bytes(int index) {
  DeviceScope scope(index);
  size_t free = 0, total = 0;
  return scope.ok() && cudaMemGetInfo(&free, &total) == cudaSuccess ? free : 0;
}

}  // namespace onnx_genai::cuda
