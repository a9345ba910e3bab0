// Rotary position embedding of one head vector, shared by RotaryEmbedding (com.microsoft and
// opset 23), GroupQueryAttention (do_rotary) and the opset-23 Attention.
//
// cos / sin hold rotary_dim / 2 values for this token's position. Two layouts:
//   rotate-half (interleaved = false): pairs (x[i], x[i + rotary_dim/2])
//   interleaved (interleaved = true):  pairs (x[2i], x[2i + 1])
// each rotated as (a, b) -> (a cos - b sin, b cos + a sin). Elements past rotary_dim (partial
// rotary) are copied unchanged. x and y may alias. Arithmetic is f32 whatever T and C are.
#pragma once

#include <cstdint>

#include "ops/cpu/dispatch.h"

namespace onnx_genai {

template <typename T, typename C>
inline void rotate_head(const T* x, T* y, const C* cos, const C* sin, int64_t rotary_dim, int64_t head_size,
                        bool interleaved) {
  const int64_t half = rotary_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t ia = interleaved ? 2 * i : i;
    const int64_t ib = interleaved ? 2 * i + 1 : i + half;
    const float a = static_cast<float>(load(x[ia]));
    const float b = static_cast<float>(load(x[ib]));
    const float c = static_cast<float>(load(cos[i]));
    const float s = static_cast<float>(load(sin[i]));
    y[ia] = store<T>(static_cast<compute_t<T>>(a * c - b * s));
    y[ib] = store<T>(static_cast<compute_t<T>>(b * c + a * s));
  }
  if (x != y) {
    for (int64_t i = rotary_dim; i < head_size; ++i) y[i] = x[i];
  }
}

}  // namespace onnx_genai
