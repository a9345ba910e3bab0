// CPU kernels for Softmax, LogSoftmax and Hardmax.
//
// The input is viewed as [outer, len, inner] around the axis (before opset 13: [outer, len] with
// len = everything from `axis` on). The hot case, f32 with inner == 1 (a row of logits, up to
// 152k wide), runs three vectorised passes over the contiguous row: max, exp(x - max) stored
// with its sum, then a scale (LogSoftmax: sum only, then x - max - log(sum)). Those row kernels
// come in AVX-512, AVX2 (ops/cpu/avx2/softmax_rows_impl.h) and scalar builds. Everything else
// (16-bit floats, f64, inner > 1) walks tiles of kTile adjacent columns row by row, so reads
// stay contiguous, accumulating in f32 (f64 for f64); f32 tiles still take their exps from the
// SIMD kernels. Rows (or tiles) are split across threads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/cpu/avx2/softmax_rows.h"
#include "ops/cpu/dispatch.h"
#include "ops/op.h"

namespace onnx_genai {

namespace {

constexpr int64_t kTile = 64;
constexpr int64_t kMinChunkElems = int64_t{1} << 15;

enum class SoftmaxOp { kSoftmax, kLogSoftmax, kHardmax };

// Scalar row kernels for CPUs without AVX2. The sum is kept in f64: a single f32 accumulator
// over a 152k-wide row loses about 1e-4 relative.
float scalar_max(const float* x, int64_t n) { return *std::max_element(x, x + n); }
float scalar_exp_sum(const float* x, float shift, float* y, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(x[i] - shift);
    if (y != nullptr) y[i] = e;
    sum += e;
  }
  return static_cast<float>(sum);
}
void scalar_scale(const float* x, float s, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}
void scalar_add(const float* x, float c, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + c;
}
void scalar_exp_shifted(const float* x, const float* shift, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - shift[i]);
}
const SoftmaxRowKernels kScalarRowKernels{scalar_max, scalar_exp_sum, scalar_scale, scalar_add, scalar_exp_shifted};

template <SoftmaxOp Op>
void f32_row(const SoftmaxRowKernels& k, const float* x, float* y, int64_t n) {
  const float m = k.max(x, n);
  if constexpr (Op == SoftmaxOp::kSoftmax) {
    const float sum = k.exp_sum(x, m, y, n);
    k.scale(y, 1.0f / sum, y, n);
  } else {
    const float sum = k.exp_sum(x, m, nullptr, n);
    k.add(x, -(m + std::log(sum)), y, n);
  }
}

// Hardmax of columns [0, width) of `len` rows `stride` apart: 1 at each column's first maximum.
template <typename T>
void hardmax_tile(const T* x, T* y, int64_t len, int64_t stride, int64_t width) {
  compute_t<T> best[kTile];
  int64_t arg[kTile];
  for (int64_t j = 0; j < width; ++j) best[j] = load(x[j]), arg[j] = 0;
  for (int64_t r = 1; r < len; ++r) {
    for (int64_t j = 0; j < width; ++j) {
      const compute_t<T> v = load(x[r * stride + j]);
      if (v > best[j]) best[j] = v, arg[j] = r;  // strict: ties keep the first index
    }
  }
  for (int64_t r = 0; r < len; ++r) {
    for (int64_t j = 0; j < width; ++j) y[r * stride + j] = store<T>(static_cast<compute_t<T>>(arg[j] == r ? 1 : 0));
  }
}

// Softmax / LogSoftmax of columns [0, width) of `len` rows `stride` apart: per-column max and
// sum in registers, every row slice read contiguously. f32 takes its exps from the SIMD kernels
// (stored straight into y for Softmax); other dtypes use std::exp in f32 (f64 for f64).
template <SoftmaxOp Op, typename T>
void softmax_tile(const SoftmaxRowKernels& k, const T* x, T* y, int64_t len, int64_t stride, int64_t width) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  A m[kTile], sum[kTile], e[kTile];
  std::fill(m, m + width, -std::numeric_limits<A>::infinity());
  std::fill(sum, sum + width, A(0));
  for (int64_t r = 0; r < len; ++r) {
    for (int64_t j = 0; j < width; ++j) m[j] = std::max(m[j], static_cast<A>(load(x[r * stride + j])));
  }
  for (int64_t r = 0; r < len; ++r) {
    const T* xr = x + r * stride;
    if constexpr (std::is_same_v<T, float>) {
      float* er = Op == SoftmaxOp::kSoftmax ? y + r * stride : e;
      k.exp_shifted(xr, m, er, width);
      for (int64_t j = 0; j < width; ++j) sum[j] += er[j];
    } else {
      for (int64_t j = 0; j < width; ++j) sum[j] += std::exp(static_cast<A>(load(xr[j])) - m[j]);
    }
  }
  // Softmax: y = exp(x - m) / sum; LogSoftmax: y = x - (m + log(sum)).
  for (int64_t j = 0; j < width; ++j) sum[j] = Op == SoftmaxOp::kSoftmax ? A(1) / sum[j] : m[j] + std::log(sum[j]);
  for (int64_t r = 0; r < len; ++r) {
    const T* xr = x + r * stride;
    T* yr = y + r * stride;
    for (int64_t j = 0; j < width; ++j) {
      if constexpr (Op == SoftmaxOp::kLogSoftmax) {
        yr[j] = store<T>(static_cast<compute_t<T>>(static_cast<A>(load(xr[j])) - sum[j]));
      } else if constexpr (std::is_same_v<T, float>) {
        yr[j] *= sum[j];
      } else {
        yr[j] = store<T>(static_cast<compute_t<T>>(std::exp(static_cast<A>(load(xr[j])) - m[j]) * sum[j]));
      }
    }
  }
}

template <SoftmaxOp Op>
class SoftmaxKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& s = ctx.input(0).shape;
    const bool coerce_2d = ctx.node.opset < 13;
    int64_t axis = ctx.attrs().get_int("axis", coerce_2d ? 1 : -1);
    if (axis < 0) axis += s.rank();
    if (axis < 0 || axis > s.rank() || (!coerce_2d && axis == s.rank())) return ctx.fail("axis out of range");
    const int a = static_cast<int>(axis);
    outer_ = s.numel(0, a);
    len_ = coerce_2d ? s.numel(a, s.rank()) : s[a];
    inner_ = coerce_2d ? 1 : s.numel(a + 1, s.rank());
    rows_ = &best_softmax_row_kernels();
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    if (outer_ * len_ * inner_ == 0) return Status::ok();
    return dispatch_dtype<float, Float16, BFloat16, double>(ctx.input(0).dtype, [&]<typename T>() {
      const T* x = ctx.input(0).ptr<const T>();
      T* y = ctx.output(0).ptr<T>();
      const int64_t len = len_, inner = inner_;
      const int64_t min_chunk = std::max<int64_t>(1, kMinChunkElems / len);
      if constexpr (std::is_same_v<T, float> && Op != SoftmaxOp::kHardmax) {
        if (inner == 1) {
          parallel_for(ctx.pool, outer_, min_chunk, [&](int64_t begin, int64_t end) {
            for (int64_t o = begin; o < end; ++o) f32_row<Op>(*rows_, x + o * len, y + o * len, len);
          });
          return Status::ok();
        }
      }
      const int64_t tiles = (inner + kTile - 1) / kTile;
      parallel_for(ctx.pool, outer_ * tiles, min_chunk, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t o = t / tiles, col = (t % tiles) * kTile;
          const int64_t offset = o * len * inner + col;
          const int64_t width = std::min(kTile, inner - col);
          if constexpr (Op == SoftmaxOp::kHardmax) hardmax_tile(x + offset, y + offset, len, inner, width);
          else softmax_tile<Op>(*rows_, x + offset, y + offset, len, inner, width);
        }
      });
      return Status::ok();
    });
  }

 private:
  int64_t outer_ = 0, len_ = 0, inner_ = 0;
  const SoftmaxRowKernels* rows_ = nullptr;
};

template <SoftmaxOp Op>
void add_kernel(OpRegistry& registry, const char* op) {
  KernelDef def;
  def.op_type = op;
  def.dtypes = float_dtypes();
  def.create = [](const Node&) -> std::unique_ptr<OpKernel> { return std::make_unique<SoftmaxKernel<Op>>(); };
  registry.add_kernel(std::move(def));
}

}  // namespace

const SoftmaxRowKernels& best_softmax_row_kernels() {
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx512) return avx512::softmax_row_kernels();
  if (cpu.avx2) return avx2::softmax_row_kernels();
  return kScalarRowKernels;
}

void register_softmax_cpu_kernels(OpRegistry& registry) {
  add_kernel<SoftmaxOp::kSoftmax>(registry, "Softmax");
  add_kernel<SoftmaxOp::kLogSoftmax>(registry, "LogSoftmax");
  add_kernel<SoftmaxOp::kHardmax>(registry, "Hardmax");
}

}  // namespace onnx_genai
