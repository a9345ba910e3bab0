// Element-wise comparison of one output of ours with ONNX Runtime's, with per-dtype tolerances.
//
// S = max |ort| over the compared elements of the output (its scale). An element passes when
//   f32:            |ours - ort| <= 2^-16 * S + 2^-18 * |ort| + E   (~1.5e-5 S: summation order)
//   f16:            |ours - ort| <= 8 ulp(S) + 1 ulp(|ort|) + E     (ulp(x) = 2^(floor(log2 x) - 10))
//   integer, bool:  exact
// Against a float64 evaluation of the generated cases (checked while building the suite) ORT
// itself is off by up to ~2.7e-6 S in f32 and, in f16, 0.5 ulp for elementwise ops, norms,
// rotary and gathers but up to 5.6 ulp(S) for GroupQueryAttention and 3.4 for Attention (it
// rounds rotated Q/K, scores or probabilities to f16); the f16 bound leaves room for our own
// rounding on top.
// E is 0 except where the generator bounds a known deviation of ORT's from the data (MatMulNBits
// accuracy_level 4: ORT rounds A to int8, E = max|A| / 254 * max_n sum_k |W[k, n]|).
// NaN matches NaN, an infinity matches itself, and two values both at or below half the dtype's
// lowest finite value match: a masked attention score, which ORT writes as the lowest value
// where the spec says -inf. Such values do not count towards S.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "onnx_genai/tensor.h"

namespace onnx_genai::differential {

struct Tolerance {
  enum class Kind { kF32, kF16, kExact } kind;
  double extra_abs = 0;  // E
};

Tolerance tolerance_for(DType dtype, double extra_abs);

// One line per tolerance class, for the report.
const char* tolerance_description();

struct Comparison {
  int64_t compared = 0;    // elements under the mask
  double scale = 0;        // S
  double max_abs = 0;      // max |ours - ort| over finite pairs
  int64_t first_bad = -1;  // first element out of tolerance, -1 when all pass
  double bad_ours = 0, bad_ort = 0, bad_tolerance = 0;

  bool ok() const { return first_bad < 0; }
  double max_scaled() const { return scale > 0 ? max_abs / scale : max_abs; }
};

// `mask` is empty (compare all) or one byte per element (nonzero = compare). Dtype and shape
// must already match.
Comparison compare_output(const Tensor& ours, const Tensor& ort, const std::vector<uint8_t>& mask, Tolerance tolerance);

}  // namespace onnx_genai::differential
