// RotaryEmbedding, in its two forms (shared by shape inference and the CPU kernel):
//
//   com.microsoft (input, position_ids, cos_cache, sin_cache)
//     position_ids int64: one value (the position of token 0; token s is at base + s) or [B, S];
//     caches [max_positions, rotary_dim / 2].
//   ONNX opset 23 (X, cos_cache, sin_cache, position_ids?)
//     with position_ids int64 [B, S]: caches [max_positions, rotary_dim / 2];
//     without: caches [B, S, rotary_dim / 2], already gathered per token.
//
// X is [B, S, num_heads * head_size] or [B, num_heads, S, head_size]; the caches share its dtype
// (f32, f16, bf16). The first rotary_dim elements of each head are rotated (rotate-half pairs, or
// adjacent pairs when interleaved), the rest copied (ops/cpu/rotary_rows.h). rotary_dim defaults
// to head_size; num_heads is required for 3-D X, except that the com.microsoft form without
// rotary_embedding_dim takes head_size = 2 * cache width, as ONNX Runtime does. The
// com.microsoft attributes scale and is_packed_batching are accepted and, as in ONNX Runtime's CPU
// kernel, have no effect. Positions outside the cache are run-time errors.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op.h"

namespace onnx_genai {

struct RotaryParams {
  enum class Positions {
    kGathered,  // no position_ids: cache row b * S + s
    kBase,      // one position_ids value: row base + s
    kPerToken,  // position_ids [B, S]: row position_ids[b][s]
  };

  int64_t batch = 0, seq = 0, heads = 0, head_size = 0, rotary_dim = 0;
  bool heads_first = false;  // X is [B, num_heads, S, head_size]
  bool interleaved = false;
  Positions positions = Positions::kGathered;
  int64_t cache_rows = 0;  // rows of the cos / sin caches
  int x_input = 0, position_input = 0, cos_input = 0, sin_input = 0;

  // Reads attributes and checks every input's dtype and shape; errors name `node`.
  // `inputs[i]` is null for an omitted optional input.
  static Result<RotaryParams> make(const Node& node, const std::vector<const TensorInfo*>& inputs);
};

}  // namespace onnx_genai
