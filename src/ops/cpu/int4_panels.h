// Reordering a 4-bit MatMulNBits weight into the int8 path's column panels (Int4Panels in
// ops/cpu/avx2/qgemm_kernels.h). Constant weights are reordered once per session at prepare (a
// copy beside the initializer); a weight computed at run time is reordered into the workspace on
// every call.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/cpu/avx2/qgemm_kernels.h"

namespace onnx_genai {

// Bytes of each array of the panels of `w` (scales and zero points are f32).
struct Int4PanelSizes {
  int64_t panels = 0, code_bytes = 0, scale_floats = 0;
  explicit Int4PanelSizes(const QWeights& w);
};

// Writes w's codes, scales and (when w has zero points) scale x zero point into the arrays,
// sized by Int4PanelSizes; `zero_scaled` may be null when w has none. Returns the view.
Int4Panels pack_int4_panels(const QWeights& w, uint8_t* codes, float* scales, float* zero_scaled);

// The same, owning its arrays: what prepare keeps for a constant weight.
struct Int4PanelWeights {
  std::vector<uint8_t> codes;
  std::vector<float> scales, zero_scaled;
  Int4Panels view;
  static Int4PanelWeights pack(const QWeights& w);
};

}  // namespace onnx_genai
