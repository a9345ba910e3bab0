#include "core/cuda/graph.h"

#include <utility>

#include "core/cuda/cuda_check.h"

namespace onnx_genai::cuda {

Result<StreamGraph> StreamGraph::record(void* stream, const std::function<Status()>& queue) {
  const auto s = static_cast<cudaStream_t>(stream);
  // Thread-local mode: only this thread's unsafe calls (cudaMalloc, a synchronisation) break the
  // recording; other threads of the process are unaffected.
  OG_RETURN_IF_ERROR(cuda_status(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin recording"));
  const Status queued = queue();
  cudaGraph_t graph = nullptr;
  const Status ended = cuda_status(cudaStreamEndCapture(s, &graph), "end recording");
  (void)cudaGetLastError();  // a call refused while recording must not fail a later launch check
  cudaGraphExec_t exec = nullptr;
  Status instantiated = Status::ok();
  if (queued.is_ok() && ended.is_ok()) {
    instantiated = cuda_status(cudaGraphInstantiate(&exec, graph, 0), "instantiate a CUDA graph");
  }
  if (graph != nullptr) (void)cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  OG_RETURN_IF_ERROR(queued.with_context("recording a CUDA graph"));
  OG_RETURN_IF_ERROR(ended);
  OG_RETURN_IF_ERROR(instantiated);
  StreamGraph recorded;
  recorded.exec_ = exec;
  return recorded;
}

StreamGraph::StreamGraph(StreamGraph&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}

StreamGraph& StreamGraph::operator=(StreamGraph&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

StreamGraph::~StreamGraph() {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

Status StreamGraph::replay(void* stream) const {
  return cuda_status(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream)),
                     "replay a CUDA graph");
}

}  // namespace onnx_genai::cuda
