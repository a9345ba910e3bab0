#include "onnx_genai/device.h"

#include <cstdlib>

namespace onnx_genai {

std::string Device::to_string() const {
  return type == DeviceType::kCpu ? "cpu" : "cuda:" + std::to_string(index);
}

namespace {
class CpuAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu(); }
  void* allocate(size_t bytes) override {
    const size_t rounded = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    return std::aligned_alloc(kCpuAlignment, rounded == 0 ? kCpuAlignment : rounded);
  }
  void deallocate(void* ptr) override { std::free(ptr); }
};
}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

}  // namespace onnx_genai
