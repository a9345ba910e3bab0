// com.microsoft MatMulNBits on the CPU (layout and semantics in ops/schema/quantized_matmul.h).
//
// M == 1 (decode) is a GEMV that reads each packed weight once and dequantises it in registers,
// threads splitting N. M > 1 dequantises kPanelCols rows of B at a time into the workspace and
// hands them, as a transposed f32 B, to the blocked GEMM driver; the whole f32 matrix never
// exists. 16-bit activations, scales and zero points are widened to f32 in the workspace first.
#include <algorithm>
#include <type_traits>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/cpu/avx2/qgemm_impl.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/gemm_driver.h"
#include "ops/op.h"
#include "ops/schema/quantized_matmul.h"

namespace onnx_genai {

namespace scalar {
const QGemmKernels& qgemm_kernels() { return qgemm_detail::kQGemmKernels; }
}  // namespace scalar

namespace {

constexpr int64_t kPanelCols = 256;  // rows of B dequantised per GEMM call
constexpr int64_t kAlignFloats = 16; // workspace regions start on 64-byte boundaries

const QGemmKernels& best_qgemm_kernels() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512) return avx512::qgemm_kernels();
  if (f.avx2) return avx2::qgemm_kernels();
  return scalar::qgemm_kernels();
}

int64_t align_floats(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// Copies n values of T into f32.
template <typename T>
void widen(const T* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load(src[i]));
}

class MatMulNBitsKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(params_, MatMulNBitsParams::make(ctx.node, ctx.inputs));
    dtype_ = ctx.input(MatMulNBitsParams::kA).dtype;
    m_ = ctx.input(MatMulNBitsParams::kA).shape.numel() / params_.k;
    kernels_ = &best_qgemm_kernels();
    const bool wide = dtype_ == DType::kF32;
    const int64_t n = params_.n, k = params_.k, per_col = n * params_.blocks;
    int64_t offset = 0;
    const auto region = [&offset](int64_t floats) {
      const int64_t at = offset;
      offset += align_floats(floats);
      return at;
    };
    a_at_ = wide ? -1 : region(m_ * k);
    scales_at_ = wide ? -1 : region(per_col);
    zp_at_ = (params_.has_zp && !params_.zp_packed && !wide) ? region(per_col) : -1;
    if (m_ == 1) {
      sums_at_ = region(params_.blocks);
      y_at_ = wide ? -1 : region(n);
    } else if (m_ > 1) {
      const int threads = ctx.pool != nullptr ? ctx.pool->num_threads() : 1;
      const int64_t cols = std::min(n, kPanelCols);
      const GemmIsa isa = gemm_isa();
      full_plan_ = GemmPlan::make(isa, {1, m_, cols, k}, DType::kF32, false, false, false, threads);
      tail_plan_ = GemmPlan::make(isa, {1, m_, std::max<int64_t>(n % cols, 1), k}, DType::kF32, false, false, false, threads);
      panel_at_ = region(cols * k);
      tile_at_ = region(m_ * cols);
      gemm_at_ = region(static_cast<int64_t>(std::max(full_plan_.workspace_bytes(), tail_plan_.workspace_bytes()) / sizeof(float)));
    }
    ctx.workspace_bytes = static_cast<size_t>(offset) * sizeof(float);
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch_dtype<float, Float16, BFloat16>(dtype_, [&]<typename T>() {
      run_typed<T>(ctx);
      return Status::ok();
    });
  }

 private:
  template <typename T>
  void run_typed(const KernelContext& ctx) const {
    float* ws = static_cast<float*>(ctx.workspace);
    const auto at = [ws](int64_t offset) { return offset < 0 ? nullptr : ws + offset; };
    const MatMulNBitsParams& p = params_;
    const int64_t per_col = p.n * p.blocks;
    const T* a_in = ctx.input(MatMulNBitsParams::kA).ptr<T>();
    const float* a = nullptr;
    QWeights w;
    w.codes = ctx.input(MatMulNBitsParams::kB).ptr<uint8_t>();
    w.k = p.k, w.bits = p.bits, w.block_size = p.block_size, w.blocks = p.blocks, w.block_bytes = p.block_bytes;
    w.zp_row_bytes = (p.blocks * p.bits + 7) / 8;
    if constexpr (std::is_same_v<T, float>) {
      a = a_in;
      w.scales = ctx.input(MatMulNBitsParams::kScales).ptr<float>();
      if (p.has_zp && !p.zp_packed) w.zp_float = ctx.input(MatMulNBitsParams::kZeroPoints).ptr<float>();
    } else {
      widen(a_in, m_ * p.k, at(a_at_));
      a = at(a_at_);
      widen(ctx.input(MatMulNBitsParams::kScales).ptr<T>(), per_col, at(scales_at_));
      w.scales = at(scales_at_);
      if (p.has_zp && !p.zp_packed) {
        widen(ctx.input(MatMulNBitsParams::kZeroPoints).ptr<T>(), per_col, at(zp_at_));
        w.zp_float = at(zp_at_);
      }
    }
    if (p.has_zp && p.zp_packed) w.zp_packed = ctx.input(MatMulNBitsParams::kZeroPoints).ptr<uint8_t>();
    const T* bias = p.has_bias ? ctx.input(MatMulNBitsParams::kBias).ptr<T>() : nullptr;
    T* y = ctx.output(0).ptr<T>();
    if (m_ == 0) return;
    if (m_ == 1) {
      gemv<T>(w, a, bias, y, ws, ctx.pool);
    } else {
      gemm<T>(w, a, bias, y, ws, ctx.pool);
    }
  }

  // Stores f32 results `src[j]` (+ bias[n0 + j]) into row `y` at columns [n0, n0 + count).
  template <typename T>
  static void store_row(const float* src, const T* bias, int64_t n0, int64_t count, T* y) {
    for (int64_t j = 0; j < count; ++j) {
      const float v = src[j] + (bias != nullptr ? static_cast<float>(load(bias[n0 + j])) : 0.0f);
      y[n0 + j] = store<T>(v);
    }
  }

  template <typename T>
  void gemv(const QWeights& w, const float* a, const T* bias, T* y, float* ws, ThreadPool* pool) const {
    float* sums = ws + sums_at_;
    for (int64_t b = 0; b < w.blocks; ++b) {
      const int64_t len = std::min(w.block_size, w.k - b * w.block_size);
      float s = 0.0f;
      for (int64_t j = 0; j < len; ++j) s += a[b * w.block_size + j];
      sums[b] = s;
    }
    float* y32 = y_at_ < 0 ? reinterpret_cast<float*>(y) : ws + y_at_;
    // A chunk of rows streams min_chunk * K * bits / 8 bytes of weights: ~32 KiB at least.
    const int64_t min_chunk = std::max<int64_t>(1, (int64_t{1} << 18) / (w.k * w.bits));
    parallel_for(pool, params_.n, min_chunk, [&](int64_t n0, int64_t n1) {
      kernels_->gemv(w, a, sums, n0, n1, y32 + n0);
      if (!std::is_same_v<T, float> || bias != nullptr) store_row(y32 + n0, bias, n0, n1 - n0, y);
    });
  }

  template <typename T>
  void gemm(const QWeights& w, const float* a, const T* bias, T* y, float* ws, ThreadPool* pool) const {
    float* panel = ws + panel_at_;
    float* tile = ws + tile_at_;
    const int64_t n = params_.n, k = params_.k;
    for (int64_t n0 = 0; n0 < n; n0 += kPanelCols) {
      const int64_t cols = std::min(kPanelCols, n - n0);
      parallel_for(pool, cols, 4, [&](int64_t c0, int64_t c1) {
        kernels_->dequantize(w, n0 + c0, n0 + c1, panel + c0 * k);
      });
      // The panel holds rows of B = columns of the product: element (k, c) at c * K + k.
      GemmArgs args;
      args.a = {a, DType::kF32, k, 1};
      args.b = {panel, DType::kF32, 1, k};
      args.a_offsets = &kZeroOffset;
      args.b_offsets = &kZeroOffset;
      args.c = tile;
      const GemmPlan& plan = cols == std::min(n, kPanelCols) ? full_plan_ : tail_plan_;
      plan.run(args, ws + gemm_at_, pool);
      parallel_for(pool, m_, 16, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) store_row(tile + r * cols, bias, n0, cols, y + r * n);
      });
    }
  }

  static constexpr int64_t kZeroOffset = 0;
  MatMulNBitsParams params_;
  DType dtype_ = DType::kUndefined;
  int64_t m_ = 0;
  const QGemmKernels* kernels_ = nullptr;
  // Workspace regions, in floats from the start; -1 where unused.
  int64_t a_at_ = -1, scales_at_ = -1, zp_at_ = -1, sums_at_ = -1, y_at_ = -1;
  int64_t panel_at_ = -1, tile_at_ = -1, gemm_at_ = -1;
  GemmPlan full_plan_, tail_plan_;
};

}  // namespace

void register_quantized_matmul_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = "com.microsoft", .op_type = "MatMulNBits", .device = DeviceType::kCpu,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16}, .type_input = 0,
                                .since_version = 1,
                                .create = [](const Node&) { return std::make_unique<MatMulNBitsKernel>(); }});
}

}  // namespace onnx_genai
