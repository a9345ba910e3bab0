#include "onnx_genai/device.h"

#include <cstdlib>
#include <cstring>

namespace onnx_genai {

std::string Device::to_string() const {
  return type == DeviceType::kCpu ? "cpu" : "cuda:" + std::to_string(index);
}

Result<Device> Device::parse(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device{DeviceType::kCuda, 0};
  if (text.starts_with("cuda:") && text.size() > 5 && text.size() <= 7) {
    int index = 0;
    for (char c : text.substr(5)) {
      if (c < '0' || c > '9') return OG_ERROR("device '", text, "': expected cpu, cuda or cuda:N");
      index = index * 10 + (c - '0');
    }
    return Device{DeviceType::kCuda, index};
  }
  return OG_ERROR("device '", text, "': expected cpu, cuda or cuda:N");
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
  Status copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                   size_t rows) override {
    // Moves towards the front run in ascending order, towards the back in descending order, so
    // an overlapping run is read before it is overwritten.
    for (size_t i = 0; i < rows; ++i) {
      const size_t r = dst <= src ? i : rows - 1 - i;
      std::memmove(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, row_bytes);
    }
    return Status::ok();
  }
  Status zero(void* dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return Status::ok();
  }
};
}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

}  // namespace onnx_genai
