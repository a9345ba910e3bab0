// Programmatic dependent launch: a kernel launched as a dependent of the stream's previous kernel
// starts while that kernel drains, does what does not depend on it (reading constant weights),
// then waits for it. The gap between two kernels of a decode step (a microsecond or more, tens of
// times a layer) becomes overlap. .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace onnx_genai::cuda {

// In a kernel (no-ops in one launched without the attribute): wait_for_prior_grid returns once
// the previous kernel in the stream has finished and its writes are visible, so it precedes every
// access to what that kernel may read or write; allow_next_grid lets the next kernel start its
// own launch early. A dependent kernel must wait on every path that touches such memory: its
// completion then implies its predecessors', which later kernels rely on.
__device__ __forceinline__ void wait_for_prior_grid() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void allow_next_grid() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

// Whether kernels may launch as dependents: yes unless the environment sets
// OG_CUDA_DEPENDENT_LAUNCH=0 (to measure what the overlap saves on a whole model).
inline bool dependent_launch_allowed() {
  static const bool allowed = [] {
    const char* value = std::getenv("OG_CUDA_DEPENDENT_LAUNCH");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return allowed;
}

// Launches kernel<<<grid, block, shared_bytes, stream>>>(args...), as a dependent of the stream's
// previous kernel when `dependent`.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                          bool dependent, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace onnx_genai::cuda
