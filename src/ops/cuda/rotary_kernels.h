// Launch interface of the CUDA RotaryEmbedding kernel (rotary_kernels.cu), for both forms of the
// op (com.microsoft and ONNX opset 23; layouts in ops/schema/rotary.h). No CUDA headers needed.
//
// Positions are only known on the device, so one outside the cos/sin cache cannot fail the run
// the way the CPU kernel does (ops/cpu/rotary.cc returns an error): it is clamped into the cache,
// as the GroupQueryAttention kernels clamp theirs (attention_device.cuh, rotary_position).
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// Which cache row token (b, s) takes (RotaryParams::Positions).
enum class RotaryPositions {
  kGathered,  // no position_ids: row b * S + s (the caches are [B, S, rotary_dim / 2])
  kBase,      // position_ids holds one value: row position_ids[0] + s
  kPerToken,  // position_ids [B, S]: row position_ids[b * S + s]
};

// x, y [B, S, heads * head_size] or (heads_first) [B, heads, S, head_size], of `dtype` (f32, f16,
// bf16); cos, sin [cache_rows, rotary_dim / 2] of `dtype`; position_ids int64, null for
// kGathered. The first rotary_dim elements of each head are rotated (rotate-half pairs, or
// adjacent pairs when interleaved), the rest copied. All pointers are device pointers; y may be x.
struct RotaryArgs {
  DType dtype = DType::kF32;
  int64_t batch = 0, seq = 0, heads = 0, head_size = 0, rotary_dim = 0, cache_rows = 0;
  bool heads_first = false;
  bool interleaved = false;
  RotaryPositions positions = RotaryPositions::kGathered;
  const void* x = nullptr;
  const int64_t* position_ids = nullptr;
  const void* cos = nullptr;
  const void* sin = nullptr;
  void* y = nullptr;
};

// Queues the kernel on `stream` (a cudaStream_t); no allocation, no synchronisation.
Status launch_rotary(const RotaryArgs& args, void* stream);

}  // namespace onnx_genai::cuda
