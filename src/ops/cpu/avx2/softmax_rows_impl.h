// The SoftmaxRowKernels implementation over VecF, compiled once per ISA (see vec_f32.h).
// Each loop keeps kUnroll independent vectors in flight so the max / add chains do not
// serialise on latency; the tail is one masked vector.
#pragma once

#include "ops/cpu/avx2/softmax_rows.h"
#include "ops/cpu/avx2/vec_f32.h"

namespace onnx_genai::simd {
namespace {

constexpr int kUnroll = 4;

float row_max(const float* x, int64_t n) {
  constexpr int64_t kW = VecF::kWidth;
  const float lowest = -__builtin_huge_valf();
  VecF m[kUnroll];
  for (VecF& v : m) v = VecF::splat(lowest);
  int64_t i = 0;
  for (; i + kUnroll * kW <= n; i += kUnroll * kW) {
    for (int u = 0; u < kUnroll; ++u) m[u] = max(m[u], VecF::load(x + i + u * kW));
  }
  for (; i + kW <= n; i += kW) m[0] = max(m[0], VecF::load(x + i));
  if (i < n) m[0] = max(m[0], VecF::load_partial(x + i, n - i, lowest));
  for (int u = 1; u < kUnroll; ++u) m[0] = max(m[0], m[u]);
  return reduce_max(m[0]);
}

float row_exp_sum(const float* x, float shift, float* y, int64_t n) {
  constexpr int64_t kW = VecF::kWidth;
  const VecF s = VecF::splat(shift);
  VecF sum[kUnroll];
  for (VecF& v : sum) v = VecF::splat(0.0f);
  int64_t i = 0;
  for (; i + kUnroll * kW <= n; i += kUnroll * kW) {
    for (int u = 0; u < kUnroll; ++u) {
      const VecF e = exp(VecF::load(x + i + u * kW) - s);
      if (y != nullptr) e.store(y + i + u * kW);
      sum[u] = sum[u] + e;
    }
  }
  for (; i < n; i += kW) {
    const int64_t left = n - i;
    // Masked-off lanes read -inf, whose exp is exactly 0.
    const VecF e = exp((left >= kW ? VecF::load(x + i) : VecF::load_partial(x + i, left, -__builtin_huge_valf())) - s);
    if (y != nullptr) {
      if (left >= kW) e.store(y + i);
      else e.store_partial(y + i, left);
    }
    sum[0] = sum[0] + e;
  }
  for (int u = 1; u < kUnroll; ++u) sum[0] = sum[0] + sum[u];
  return reduce_add(sum[0]);
}

template <bool Multiply>
void row_map(const float* x, float c, float* y, int64_t n) {
  constexpr int64_t kW = VecF::kWidth;
  const VecF cv = VecF::splat(c);
  const auto op = [&](VecF v) { return Multiply ? v * cv : v + cv; };
  int64_t i = 0;
  for (; i + kW <= n; i += kW) op(VecF::load(x + i)).store(y + i);
  if (i < n) op(VecF::load_partial(x + i, n - i, 0.0f)).store_partial(y + i, n - i);
}

void row_exp_shifted(const float* x, const float* shift, float* y, int64_t n) {
  constexpr int64_t kW = VecF::kWidth;
  int64_t i = 0;
  for (; i + kW <= n; i += kW) exp(VecF::load(x + i) - VecF::load(shift + i)).store(y + i);
  if (i < n) exp(VecF::load_partial(x + i, n - i, 0.0f) - VecF::load_partial(shift + i, n - i, 0.0f)).store_partial(y + i, n - i);
}

const SoftmaxRowKernels kSoftmaxRowKernels{row_max, row_exp_sum, row_map<true>, row_map<false>, row_exp_shifted};

}  // namespace
}  // namespace onnx_genai::simd
