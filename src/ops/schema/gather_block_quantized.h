// com.microsoft GatherBlockQuantized: Gather on a block-quantised tensor that dequantises only
// what it gathers (the usual use: a 4-bit embedding table [vocab, hidden] gathered by token id).
//
//   data         uint8: codes of `bits` (2, 4 or 8) packed along the last dim, low bits first, so
//                its last dim holds hidden * bits / 8 bytes; or int4 / uint4 (bits 4): two codes
//                per byte, low nibble first, the shape counting codes
//   indices      int32 / int64, any shape; -n <= i < n along gather_axis (negative from the end)
//   scales       f32 / f16 / bf16: data's code shape with quantize_axis cut to
//                blocks = ceil(dim / block_size)
//   zero_points  optional, data's dtype: uint8 packed like data along the last dim
//                ([..., ceil(blocks * bits / 8)]), int4 / uint4 of scales' shape; absent means
//                2^(bits - 1) for uint8 and 0 for int4 / uint4 (as ONNX Runtime)
//   attributes   gather_axis (0), quantize_axis (1), block_size (128; a power of two >= 16),
//                bits (4). uint8 data needs gather_axis 0 and quantize_axis last, as in ONNX Runtime.
//
//   output = data codes with gather_axis replaced by indices' shape, in scales' dtype:
//            (code - zero_point) * scale, computed in f32.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op.h"

namespace onnx_genai {

struct GatherBlockQuantizedParams {
  int gather_axis = 0;
  int quantize_axis = 1;
  int64_t block_size = 128;
  int64_t bits = 4;
  DType data_dtype = DType::kU8;
  Shape codes;         // data's shape counted in codes (uint8: last dim * 8 / bits)
  int64_t blocks = 0;  // scales' dim at quantize_axis
  bool has_zero_points = false;
  Shape output;

  static constexpr int kData = 0, kIndices = 1, kScales = 2, kZeroPoints = 3;

  // Reads attributes and checks every input's dtype and shape; errors name `node`.
  // `inputs[i]` is null for an omitted optional input.
  static Result<GatherBlockQuantizedParams> make(const Node& node, const std::vector<const TensorInfo*>& inputs);
};

OpSchema gather_block_quantized_schema();

}  // namespace onnx_genai
