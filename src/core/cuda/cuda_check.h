// CUDA runtime errors as Status values (internal to the CUDA backend: includes cuda_runtime.h).
#pragma once

#include <cuda_runtime.h>

#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// ok, or "<what>: <error name> (<error text>)".
inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  return OG_ERROR(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
}

// After a kernel launch: a bad configuration shows up here, not as the launch's return value.
inline Status launch_status(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

}  // namespace onnx_genai::cuda
