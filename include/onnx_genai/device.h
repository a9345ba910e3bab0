// Where memory lives and how it is obtained. A backend (CPU now, CUDA later) provides an
// Allocator for its DeviceType; nothing here knows about any particular backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace onnx_genai {

enum class DeviceType : int32_t { kCpu = 0, kCuda = 1 };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string to_string() const;  // "cpu", "cuda:0"
  static Device cpu() { return {}; }
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // Returns nullptr when the request cannot be met; callers turn that into a Status.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr) = 0;
};

// 64-byte aligned host memory (one cache line, one AVX-512 register).
Allocator& cpu_allocator();
inline constexpr size_t kCpuAlignment = 64;

}  // namespace onnx_genai
