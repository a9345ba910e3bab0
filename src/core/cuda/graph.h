// Stream work recorded once as a CUDA graph and replayed: one launch for a whole decode step
// instead of one per kernel. Recording runs nothing; the graph's kernels keep the arguments they
// were queued with, so a replay is only valid while every pointer they captured still is.
#pragma once

#include <functional>

#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

class StreamGraph {
 public:
  // Records what `queue` puts on `stream` (a cudaStream_t) and instantiates it. Fails, leaving the
  // stream usable, when `queue` fails or queues something a graph cannot hold (a synchronising
  // call, an allocation).
  static Result<StreamGraph> record(void* stream, const std::function<Status()>& queue);
  StreamGraph(StreamGraph&& other) noexcept;
  StreamGraph& operator=(StreamGraph&& other) noexcept;
  StreamGraph(const StreamGraph&) = delete;
  StreamGraph& operator=(const StreamGraph&) = delete;
  ~StreamGraph();

  Status replay(void* stream) const;

 private:
  StreamGraph() = default;
  void* exec_ = nullptr;  // cudaGraphExec_t
};

}  // namespace onnx_genai::cuda
