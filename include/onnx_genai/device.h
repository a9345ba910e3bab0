// Where memory lives and how it is obtained. A backend (CPU now, CUDA later) provides an
// Allocator for its DeviceType; nothing here knows about any particular backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "onnx_genai/status.h"

namespace onnx_genai {

enum class DeviceType : int32_t { kCpu = 0, kCuda = 1 };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string to_string() const;  // "cpu", "cuda:0"
  static Device cpu() { return {}; }
  // "cpu", "cuda" (device 0) or "cuda:N"; anything else is an error quoting the text.
  static Result<Device> parse(const std::string& text);
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // Returns nullptr when the request cannot be met; callers turn that into a Status.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr) = 0;
  // Within this allocator's memory, complete on return: `rows` runs of `row_bytes` from `src`
  // (one every `src_pitch` bytes) to `dst` (one every `dst_pitch` bytes). The two ranges may
  // overlap (a move). No other work may be in flight on these bytes.
  virtual Status copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                           size_t rows) = 0;
  virtual Status zero(void* dst, size_t bytes) = 0;  // complete on return
  // Bytes this memory has free, for out-of-memory messages; 0 when it cannot say.
  virtual size_t free_bytes() const { return 0; }
};

// 64-byte aligned host memory (one cache line, one AVX-512 register).
Allocator& cpu_allocator();
inline constexpr size_t kCpuAlignment = 64;

}  // namespace onnx_genai
