#include "core/cuda/stream.h"

#include <utility>

#include "core/cuda/cuda_check.h"

namespace onnx_genai::cuda {

Result<Stream> Stream::create() {
  cudaStream_t s = nullptr;
  OG_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
  Stream stream;
  stream.handle_ = s;
  return stream;
}

Stream::Stream(Stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

Stream::~Stream() {
  if (handle_ != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
}

Status Stream::synchronize() const {
  return cuda_status(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)), "cudaStreamSynchronize");
}

}  // namespace onnx_genai::cuda
