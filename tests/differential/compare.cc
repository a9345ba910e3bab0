#include "compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace onnx_genai::differential {

namespace {

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return t.data<float>()[i];
    case DType::kF64: return t.data<double>()[i];
    case DType::kF16: return Float16::to_float(t.data<uint16_t>()[i]);
    case DType::kBF16: return BFloat16::to_float(t.data<uint16_t>()[i]);
    default: return 0;
  }
}

// Spacing of f16 values around |x| (subnormal spacing below the normal range).
double f16_ulp(double x) {
  x = std::fabs(x);
  if (x < 0x1p-14) return 0x1p-24;
  return std::ldexp(1.0, std::ilogb(x) - 10);
}

double allowed(const Tolerance& tolerance, double scale, double want) {
  switch (tolerance.kind) {
    case Tolerance::Kind::kF32: return 0x1p-16 * scale + 0x1p-18 * std::fabs(want) + tolerance.extra_abs;
    case Tolerance::Kind::kF16: return 8 * f16_ulp(scale) + f16_ulp(want) + tolerance.extra_abs;
    case Tolerance::Kind::kExact: return 0;
  }
  return 0;
}

// At or below half the dtype's lowest finite value: a masked attention score (-inf, or the
// lowest value that ORT writes instead).
double masked_score_limit(DType dtype) {
  switch (dtype) {
    case DType::kF16: return -65504.0 / 2;
    case DType::kBF16:
    case DType::kF32: return -std::numeric_limits<float>::max() / 2;
    default: return -std::numeric_limits<double>::max() / 2;
  }
}

// Pairs that match whatever the tolerance: both NaN, the same infinity, both masked scores.
bool special_match(double got, double want, double masked) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (got <= masked && want <= masked) return true;
  return std::isinf(want) && got == want;
}

}  // namespace

Tolerance tolerance_for(DType dtype, double extra_abs) {
  if (!dtype_is_float(dtype)) return {Tolerance::Kind::kExact};
  return {dtype == DType::kF32 || dtype == DType::kF64 ? Tolerance::Kind::kF32 : Tolerance::Kind::kF16, extra_abs};
}

const char* tolerance_description() {
  return "S = max |ort| over the compared elements of an output. f32: |ours - ort| <= 2^-16 S + 2^-18 |ort| + E. "
         "f16: <= 8 ulp(S) + 1 ulp(|ort|) + E, ulp(x) = 2^(floor(log2 x) - 10). Integers exact. "
         "E = 0 except MatMulNBits accuracy_level 4, where ORT rounds A to int8: E = max|A| / 254 * max_n sum_k |W[k, n]|. "
         "NaN = NaN, equal infinities match, and two values at or below half the dtype's lowest finite value "
         "(f16: -32752) match: a masked score, -inf or the lowest value ORT writes instead.";
}

Comparison compare_output(const Tensor& ours, const Tensor& ort, const std::vector<uint8_t>& mask, Tolerance tolerance) {
  Comparison result;
  const int64_t n = ort.numel();
  auto compared = [&](int64_t i) { return mask.empty() || mask[static_cast<size_t>(i)] != 0; };
  if (tolerance.kind == Tolerance::Kind::kExact) {
    const size_t size = n > 0 ? static_cast<size_t>(ort.nbytes() / n) : 0;
    const auto* a = static_cast<const unsigned char*>(ours.raw());
    const auto* b = static_cast<const unsigned char*>(ort.raw());
    for (int64_t i = 0; i < n; ++i) {
      if (!compared(i)) continue;
      ++result.compared;
      if (result.ok() && std::memcmp(a + i * size, b + i * size, size) != 0) result.first_bad = i;
    }
    return result;
  }
  const double masked = masked_score_limit(ort.dtype());
  for (int64_t i = 0; i < n; ++i) {
    const double want = element(ort, i);
    if (compared(i) && std::isfinite(want) && want > masked) result.scale = std::max(result.scale, std::fabs(want));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!compared(i)) continue;
    ++result.compared;
    const double got = element(ours, i), want = element(ort, i);
    if (special_match(got, want, masked)) continue;
    const double diff = std::fabs(got - want);
    const double limit = allowed(tolerance, result.scale, want);
    if (std::isfinite(diff)) result.max_abs = std::max(result.max_abs, diff);
    if (!(diff <= limit) && result.ok()) {
      result.first_bad = i;
      result.bad_ours = got;
      result.bad_ort = want;
      result.bad_tolerance = limit;
    }
  }
  return result;
}

}  // namespace onnx_genai::differential
