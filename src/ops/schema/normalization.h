// What the LayerNormalization family (LayerNormalization, RMSNormalization,
// SimplifiedLayerNormalization) accepts as scale and bias, shared by the schema and the kernels.
//
// ONNX Runtime 1.30 broadcasts scale and bias to X numpy-style, so they may vary across rows
// ([S, H] scales with axis -1, [S, 1] with axis 1 over X [B, S, H]). The common form repeats
// over the normalised shape X.shape[axis:] (its shape, leading ones dropped, is a suffix of it):
// every row reads the same values, with a period of the parameter's size.
#pragma once

#include "onnx_genai/shape.h"

namespace onnx_genai {

// `param` broadcasts to `x` (rank at most x's, each dim 1 or x's aligned dim).
bool norm_parameter_broadcasts(const Shape& param, const Shape& x);

// `param` repeats over x.shape[axis:] and is the same for every row.
bool norm_parameter_repeats_per_row(const Shape& param, const Shape& x, int axis);

}  // namespace onnx_genai
