// CUDA device discovery and the "can this build run here" check. The header needs no CUDA
// headers, so host code (tests, tools) can ask without compiling against the toolkit.
//
// This build carries sm_90a machine code only (Hopper, compute capability 9.0): arch-specific
// code runs on that exact capability, so any other device is reported as unusable, with why.
#pragma once

#include <cstdint>
#include <string>

#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;       // compute capability
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
  int64_t shared_per_block_optin = 0;  // the most dynamic shared memory a block can opt in to

  // "cuda:0 NVIDIA H200 (compute capability 9.0, 132 SMs, 60 MiB L2, 140 GiB)"
  std::string to_string() const;
};

// ok for 9.0; else one line saying why this build's sm_90a code cannot run there.
Status check_compute_capability(int major, int minor);

// Number of CUDA devices; 0 when there are none. A driver problem is an error with its text.
Result<int> device_count();

// Properties of device `index`, whatever its capability.
Result<DeviceInfo> query_device(int index);

// Device `index` if this build can run on it, else why not: "no CUDA device", "CUDA device 1
// does not exist (1 found)", the capability mismatch, or the driver's error text.
Result<DeviceInfo> usable_device(int index = 0);

}  // namespace onnx_genai::cuda
