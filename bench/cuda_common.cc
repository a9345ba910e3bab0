// cuda_common.h's helpers.
#include "cuda_common.h"

#include <cmath>
#include <sstream>

#include "onnx_genai/dtype.h"

namespace onnx_genai {

Status check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  return OG_ERROR(what, ": ", cudaGetErrorString(err));
}

std::string json_number(double v) {
  if (std::isnan(v)) return "null";
  std::ostringstream out;
  out << v;
  return out.str();
}

std::vector<uint16_t> random_f16(size_t count, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<uint16_t> out(count);
  for (auto& v : out) v = Float16(dist(rng)).bits;
  return out;
}

Result<double> replay_ms(cudaStream_t stream, const std::function<Status()>& queue) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  OG_RETURN_IF_ERROR(check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"));
  const Status launched = queue();
  const Status captured = check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  Status ready = !launched.is_ok() ? launched : captured;
  if (ready.is_ok()) ready = check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  if (!ready.is_ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // the launch error is reported, not left for the next call
    return ready;
  }
  const double ms = median_ms(stream, [&] { BENCH_CHECK(check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch")); });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return ms;
}

double relative_difference(const cuda::DeviceBuffer& y, const cuda::DeviceBuffer& reference, size_t count,
                           cudaStream_t stream) {
  std::vector<uint16_t> got(count), want(count);
  BENCH_CHECK(cuda::copy_to_host(got.data(), y.data(), count * 2, stream));
  BENCH_CHECK(cuda::copy_to_host(want.data(), reference.data(), count * 2, stream));
  BENCH_CHECK(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
  double diff = 0, scale = 0;
  for (size_t i = 0; i < count; ++i) {
    const double g = Float16::to_float(got[i]), w = Float16::to_float(want[i]);
    diff = std::max(diff, std::fabs(g - w));
    scale = std::max(scale, std::fabs(w));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace onnx_genai
