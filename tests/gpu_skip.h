// Why the GPU tests of a binary above the ops layer cannot run here (a build without CUDA, no
// device, another compute capability), or nothing; and the skip that reports it, so ctest counts
// such a test as skipped, not passed.
#pragma once

#include <optional>
#include <string>

#ifdef OG_HAVE_CUDA
#include "core/cuda/device.h"
#endif

namespace onnx_genai::testing {

inline std::optional<std::string> gpu_unavailable() {
#ifdef OG_HAVE_CUDA
  auto device = cuda::usable_device(0);
  if (!device.is_ok()) return device.status().message();
  return std::nullopt;
#else
  return "this build has no CUDA backend";
#endif
}

}  // namespace onnx_genai::testing

#define OG_SKIP_WITHOUT_GPU()                                                             \
  if (const auto og_why = ::onnx_genai::testing::gpu_unavailable()) GTEST_SKIP() << "no usable GPU: " << *og_why
