// An owned CUDA stream (non-blocking with respect to the legacy default stream).
#pragma once

#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

class Stream {
 public:
  static Result<Stream> create();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  // The cudaStream_t, for KernelContext::stream and launches.
  void* handle() const { return handle_; }
  // Waits for queued work; an asynchronous kernel fault surfaces here with CUDA's text.
  Status synchronize() const;

 private:
  Stream() = default;
  void* handle_ = nullptr;
};

}  // namespace onnx_genai::cuda
