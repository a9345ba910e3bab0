// Column panels of a 4-bit weight (int4_panels.h).
#include "ops/cpu/int4_panels.h"

#include <algorithm>
#include <cstring>

namespace onnx_genai {

Int4PanelSizes::Int4PanelSizes(const QWeights& w)
    : panels((w.rows + kPanelCols - 1) / kPanelCols),
      code_bytes(panels * w.blocks * (w.block_size / kPanelGroupValues) * kPanelGroupBytes),
      scale_floats(panels * w.blocks * kPanelCols) {}

Int4Panels pack_int4_panels(const QWeights& w, uint8_t* codes, float* scales, float* zero_scaled) {
  const Int4PanelSizes sizes(w);
  Int4Panels out{.codes = codes, .scales = scales, .zero_scaled = nullptr, .n = w.rows, .panels = sizes.panels,
                 .blocks = w.blocks, .block_size = w.block_size};
  const bool has_zp = w.zp_packed != nullptr || w.zp_float != nullptr;
  if (has_zp) out.zero_scaled = zero_scaled;
  std::memset(codes, 0, static_cast<size_t>(sizes.code_bytes));
  std::fill_n(scales, sizes.scale_floats, 0.0f);
  if (has_zp) std::fill_n(zero_scaled, sizes.scale_floats, 0.0f);
  const int64_t groups = w.blocks * out.groups_per_block();
  for (int64_t n = 0; n < w.rows; ++n) {
    const int64_t panel = n / kPanelCols, col = n % kPanelCols;
    // Source: a byte holds elements 2i (low nibble) and 2i + 1 (high nibble), blocks contiguous.
    const uint8_t* row = w.codes + n * w.row_bytes();
    uint8_t* dst = codes + panel * out.panel_code_bytes() + col * 4;
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* src = row + g * (kPanelGroupValues / 2);
      const auto code = [src](int e) { return static_cast<uint8_t>((src[e / 2] >> (4 * (e & 1))) & 0x0F); };
      for (int u = 0; u < 4; ++u) dst[g * kPanelGroupBytes + u] = static_cast<uint8_t>(code(u) | (code(u + 4) << 4));
    }
    for (int64_t b = 0; b < w.blocks; ++b) {
      const int64_t at = (panel * w.blocks + b) * kPanelCols + col;
      scales[at] = w.scales[n * w.blocks + b];
      if (has_zp) zero_scaled[at] = scales[at] * w.zero_point(n, b);
    }
  }
  return out;
}

Int4PanelWeights Int4PanelWeights::pack(const QWeights& w) {
  const Int4PanelSizes sizes(w);
  Int4PanelWeights out;
  out.codes.resize(static_cast<size_t>(sizes.code_bytes));
  out.scales.resize(static_cast<size_t>(sizes.scale_floats));
  if (w.zp_packed != nullptr || w.zp_float != nullptr) out.zero_scaled.resize(static_cast<size_t>(sizes.scale_floats));
  out.view = pack_int4_panels(w, out.codes.data(), out.scales.data(), out.zero_scaled.empty() ? nullptr : out.zero_scaled.data());
  return out;
}

}  // namespace onnx_genai
