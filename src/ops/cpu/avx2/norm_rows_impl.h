// The NormRowKernels implementation over VecF (ops/cpu/avx2/vec_f32.h), compiled once per
// ISA. Sums keep kUnroll independent vector accumulators so adds do not serialise on latency;
// tails are one masked vector.
#pragma once

#include "ops/cpu/avx2/norm_rows.h"
#include "ops/cpu/avx2/vec_f32.h"

namespace onnx_genai::simd {
namespace {

constexpr int kNormUnroll = 4;

// Sums f(load(x)) over the row with kNormUnroll accumulators; masked tail lanes read 0 and
// must map to 0.
template <typename F>
float row_accumulate(const float* x, int64_t n, F f) {
  constexpr int64_t kW = VecF::kWidth;
  VecF acc[kNormUnroll];
  for (VecF& v : acc) v = VecF::splat(0.0f);
  int64_t i = 0;
  for (; i + kNormUnroll * kW <= n; i += kNormUnroll * kW) {
    for (int u = 0; u < kNormUnroll; ++u) acc[u] = acc[u] + f(VecF::load(x + i + u * kW));
  }
  for (; i + kW <= n; i += kW) acc[0] = acc[0] + f(VecF::load(x + i));
  for (int u = 1; u < kNormUnroll; ++u) acc[0] = acc[0] + acc[u];
  float total = reduce_add(acc[0]);
  if (i < n) {
    // The tail is summed apart so its masked-off lanes (which f may not map to 0) never count.
    float lanes[VecF::kWidth];
    f(VecF::load_partial(x + i, n - i, 0.0f)).store(lanes);
    for (int64_t j = 0; j < n - i; ++j) total += lanes[j];
  }
  return total;
}

float norm_sum(const float* x, int64_t n) {
  return row_accumulate(x, n, [](VecF v) { return v; });
}

float norm_sum_sq_dev(const float* x, float mean, int64_t n) {
  const VecF m = VecF::splat(mean);
  return row_accumulate(x, n, [m](VecF v) {
    const VecF d = v - m;
    return d * d;
  });
}

void norm_affine(const float* x, float mean, float inv_std, const float* scale, const float* bias, float* y,
                 int64_t n) {
  constexpr int64_t kW = VecF::kWidth;
  const VecF m = VecF::splat(mean), inv = VecF::splat(inv_std);
  const auto one = [&](int64_t i, int64_t width) {
    const bool full = width == kW;
    const VecF xv = full ? VecF::load(x + i) : VecF::load_partial(x + i, width, 0.0f);
    const VecF sv = full ? VecF::load(scale + i) : VecF::load_partial(scale + i, width, 0.0f);
    VecF out = (xv - m) * inv * sv;
    if (bias != nullptr) out = out + (full ? VecF::load(bias + i) : VecF::load_partial(bias + i, width, 0.0f));
    if (full) out.store(y + i);
    else out.store_partial(y + i, width);
  };
  int64_t i = 0;
  for (; i + kW <= n; i += kW) one(i, kW);
  if (i < n) one(i, n - i);
}

void norm_add(const float* x, const float* skip, const float* bias, float* out, int64_t n) {
  constexpr int64_t kW = VecF::kWidth;
  const auto one = [&](int64_t i, int64_t width) {
    const bool full = width == kW;
    VecF sum = full ? VecF::load(x + i) + VecF::load(skip + i)
                    : VecF::load_partial(x + i, width, 0.0f) + VecF::load_partial(skip + i, width, 0.0f);
    if (bias != nullptr) sum = sum + (full ? VecF::load(bias + i) : VecF::load_partial(bias + i, width, 0.0f));
    if (full) sum.store(out + i);
    else sum.store_partial(out + i, width);
  };
  int64_t i = 0;
  for (; i + kW <= n; i += kW) one(i, kW);
  if (i < n) one(i, n - i);
}

const NormRowKernels kNormRowKernels{norm_sum, norm_sum_sq_dev, norm_affine, norm_add};

}  // namespace
}  // namespace onnx_genai::simd
