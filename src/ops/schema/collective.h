// Collectives between the ranks of a tensor-parallel model, inserted at load by
// runtime/tensor_parallel_pass.h and run through the communicator bound to the session
// (SessionOptions::communicator, parallel/communicator.h):
//
//   onnx_genai::AllReduce(X) -> Y         Y = the sum over ranks of X (float32, float16 or bfloat16,
//                                          any shape; 16-bit values summed in float32, rounded once)
//   onnx_genai::AllGather(X) -> Y         Y = every rank's X joined along `axis`, rank 0 first;
//                                          attributes axis (default -1), world_size (N: Y's dim
//                                          along axis is N times X's)
//
// A session without a communicator, or with one of another size, refuses them when planning.
#pragma once

namespace onnx_genai {

struct CollectiveOps {
  static constexpr const char* kDomain = "onnx_genai";
  static constexpr const char* kAllReduce = "AllReduce";
  static constexpr const char* kAllGather = "AllGather";
};

}  // namespace onnx_genai
