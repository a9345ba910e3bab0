// com.microsoft MatMulNBits on the CPU (layout and semantics in ops/schema/quantized_matmul.h).
//
// A call packs A once into the workspace (QGemmKernels::pack_a: reordered to match how 4-bit
// codes unpack, and for accuracy_level >= 4 quantised to int8 per block), then threads split N:
//   - f32 activations, M <= kGemvMaxRows: a GEMV that decodes each weight in registers, once
//     per tile of rows of A (each row's result the same bits as alone);
//   - f32 activations, larger M: per thread, panels of B dequantised once and reused by all rows;
//   - int8 activations (accuracy_level >= 4, 4-bit weights): integer dot products (AVX-512 VNNI
//     or AVX2) against B reordered once at load into column panels (int4_panels.h), any M.
// 16-bit activations, scales and zero points are widened to f32 in the workspace first. The SIMD
// kernels are ops/cpu/avx2/qgemm_impl.h (4- and 8-bit weights); the plain loops below are the
// scalar build, the reference they are tested against, and the kernel for 2-bit weights (rare:
// ONNX Runtime accepts them, so a model may hold them).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/cpu/quantized_matmul.h"
#include "ops/cpu/avx2/qgemm_kernels.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/int4_panels.h"
#include "ops/op.h"
#include "ops/schema/quantized_matmul.h"

namespace onnx_genai {

namespace scalar {
namespace {

// Code of element k of row n (a block's codes are contiguous, so element k is at bit k * bits,
// low bits first within a byte).
float code(const QWeights& w, int64_t n, int64_t k) {
  const uint8_t byte = w.codes[n * w.row_bytes() + k * w.bits / 8];
  return static_cast<float>(w.bits == 8 ? byte : (byte >> (k * w.bits % 8)) & ((1 << w.bits) - 1));
}

// Natural order (a chunk of 2: the even value, then the odd one).
void pack_a(const QWeights& w, const float* a, bool int8, const PackedA& out) {
  for (int64_t r = 0; r < out.m; ++r) {
    const float* src = a + r * w.k;
    for (int64_t i = w.k; i < out.row_values; ++i) {
      if (int8) {
        out.int8_values[r * out.row_values + i] = 0;
      } else {
        out.values[r * out.row_values + i] = 0.0f;
      }
    }
    for (int64_t b = 0; b < w.blocks; ++b) {
      const int64_t begin = b * w.block_size, end = std::min(w.k, begin + w.block_size);
      float amax = 0.0f, sum = 0.0f;
      for (int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float scale = amax / 127.0f;
      int32_t int_sum = 0;
      for (int64_t i = begin; i < end; ++i) {
        if (int8) {
          const auto q = static_cast<int8_t>(std::nearbyint(scale > 0.0f ? src[i] / scale : 0.0f));
          out.int8_values[r * out.row_values + i] = q;
          int_sum += q;
        } else {
          out.values[r * out.row_values + i] = src[i];
          sum += src[i];
        }
      }
      if (int8) {
        out.block_scales[r * w.blocks + b] = scale;
        out.block_sums[r * w.blocks + b] = int_sum;
      } else {
        out.block_terms[r * w.blocks + b] = sum;
      }
    }
  }
}

void gemm(const QWeights& w, const PackedA& a, int64_t n0, int64_t n1, float* /*panel*/, float* y, int64_t ldy) {
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t r = 0; r < a.m; ++r) {
      const float* row = a.values + r * a.row_values;
      float acc = 0.0f;
      for (int64_t k = 0; k < w.k; ++k) {
        const int64_t b = k / w.block_size;
        acc += row[k] * (code(w, n, k) - w.zero_point(n, b)) * w.scales[n * w.blocks + b];
      }
      y[r * ldy + n - n0] = acc;
    }
  }
}

void gemv(const QWeights& w, const PackedA& a, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  gemm(w, a, n0, n1, nullptr, y, ldy);
}

// Reads the panels' layout (int4_panels.h) value by value.
void gemm_int8(const Int4Panels& b, const PackedA& a, int64_t p0, int64_t p1, float* y, int64_t ldy) {
  for (int64_t n = p0 * kPanelCols; n < std::min(b.n, p1 * kPanelCols); ++n) {
    const int64_t panel = n / kPanelCols, col = n % kPanelCols;
    const uint8_t* codes = b.codes + panel * b.panel_code_bytes() + col * 4;
    for (int64_t r = 0; r < a.m; ++r) {
      const int8_t* q = a.int8_values + r * a.row_values;
      float acc = 0.0f;
      for (int64_t blk = 0; blk < b.blocks; ++blk) {
        const int64_t at = (panel * b.blocks + blk) * kPanelCols + col;
        const int32_t sum = a.block_sums[r * b.blocks + blk];
        int32_t dot = b.zero_scaled == nullptr ? -8 * sum : 0;
        for (int64_t k = blk * b.block_size; k < (blk + 1) * b.block_size; ++k) {
          const uint8_t byte = codes[k / kPanelGroupValues * kPanelGroupBytes + k % 4];
          dot += q[k] * ((k % kPanelGroupValues < 4 ? byte : byte >> 4) & 0x0F);
        }
        const float scale_a = a.block_scales[r * b.blocks + blk];
        acc += static_cast<float>(dot) * (b.scales[at] * scale_a);
        if (b.zero_scaled != nullptr) acc -= b.zero_scaled[at] * (scale_a * static_cast<float>(sum));
      }
      y[r * ldy + n - p0 * kPanelCols] = acc;
    }
  }
}

constexpr QGemmKernels kQGemmKernels{.chunk = 2, .panel_floats = 0,
                                     .pack_a = pack_a, .gemv = gemv, .gemm = gemm, .gemm_int8 = gemm_int8};

}  // namespace

const QGemmKernels& qgemm_kernels() { return kQGemmKernels; }

}  // namespace scalar

namespace {

constexpr int64_t kAlignFloats = 16;  // workspace regions start on 64-byte boundaries

const QGemmKernels& best_f32_kernels() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512) return avx512::qgemm_kernels();
  if (f.avx2) return avx2::qgemm_kernels();
  return scalar::qgemm_kernels();
}

// The AVX-512 int8 kernels need VNNI; AVX-512 CPUs without it run the AVX2 ones.
const QGemmKernels& best_int8_kernels() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512_vnni) return avx512::qgemm_kernels();
  if (f.avx2) return avx2::qgemm_kernels();
  return scalar::qgemm_kernels();
}

int64_t align_floats(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// Copies n values of T into f32.
template <typename T>
void widen(const T* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load(src[i]));
}

// A constant float tensor as f32.
Result<std::vector<float>> widened(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  Status done = dispatch_dtype<float, Float16, BFloat16>(t.dtype(), [&]<typename T>() {
    widen(t.data<T>(), t.numel(), out.data());
    return Status::ok();
  });
  if (!done.is_ok()) return done;
  return out;
}

// Rows [r0, r1) of `a`.
PackedA packed_rows(const PackedA& a, int64_t blocks, int64_t r0, int64_t r1) {
  PackedA rows = a;
  rows.m = r1 - r0;
  if (a.values != nullptr) rows.values += r0 * a.row_values;
  if (a.int8_values != nullptr) rows.int8_values += r0 * a.row_values;
  if (a.block_scales != nullptr) rows.block_scales += r0 * blocks;
  if (a.block_sums != nullptr) rows.block_sums += r0 * blocks;
  if (a.block_terms != nullptr) rows.block_terms += r0 * blocks;
  return rows;
}

// B's codes, f32 scales and zero points as the kernels read them.
QWeights weights_view(const MatMulNBitsParams& p, const uint8_t* codes, const float* scales, const uint8_t* zp_packed,
                      const float* zp_float) {
  QWeights w;
  w.codes = codes, w.scales = scales, w.zp_packed = zp_packed, w.zp_float = zp_float;
  w.rows = p.n, w.k = p.k, w.bits = p.bits, w.block_size = p.block_size, w.blocks = p.blocks;
  w.block_bytes = p.block_bytes, w.zp_row_bytes = (p.blocks * p.bits + 7) / 8;
  return w;
}

class MatMulNBitsKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(params_, MatMulNBitsParams::make(ctx.node, ctx.inputs));
    const MatMulNBitsParams& p = params_;
    dtype_ = ctx.input(MatMulNBitsParams::kA).dtype;
    m_ = ctx.input(MatMulNBitsParams::kA).shape.numel() / p.k;
    int8_ = p.accuracy_level >= 4 && p.bits == 4 && p.block_size % kPanelGroupValues == 0;
    kernels_ = int8_ ? &best_int8_kernels() : p.bits == 2 ? &scalar::qgemm_kernels() : &best_f32_kernels();
    threads_ = ctx.pool != nullptr ? ctx.pool->num_threads() : 1;
    const bool wide = dtype_ == DType::kF32;
    const int64_t per_col = p.n * p.blocks;
    row_values_ = int8_ ? p.blocks * p.block_size : packed_row_values(p.blocks, p.block_size, kernels_->chunk);
    int64_t offset = 0;
    const auto region = [&offset](int64_t floats) {
      const int64_t at = offset;
      offset += align_floats(floats);
      return at;
    };
    int4_panels_.reset();
    if (int8_) OG_RETURN_IF_ERROR(prepare_int4_panels(ctx));
    // 16-bit scales and zero points are widened per call unless the panels already hold them.
    const bool widen_b = !wide && int4_panels_ == nullptr;
    a_at_ = wide ? -1 : region(m_ * p.k);
    scales_at_ = widen_b ? region(per_col) : -1;
    zp_at_ = (p.has_zp && !p.zp_packed && widen_b) ? region(per_col) : -1;
    packed_at_ = region(int8_ ? (m_ * row_values_ + 3) / 4 : m_ * row_values_);
    block_scales_at_ = int8_ ? region(m_ * p.blocks) : -1;
    block_sums_at_ = int8_ ? region(m_ * p.blocks) : -1;  // int32, float-sized
    terms_at_ = int8_ ? -1 : region(m_ * p.blocks);
    y_at_ = (wide && !p.has_bias) ? -1 : region(m_ * p.n);
    panels_at_ = (!int8_ && m_ > kGemvMaxRows) ? region(threads_ * kernels_->panel_floats) : -1;
    if (int8_ && int4_panels_ == nullptr) {  // B computed at run time: reordered into the workspace
      const Int4PanelSizes sizes(weights_view(p, nullptr, nullptr, nullptr, nullptr));
      panel_codes_at_ = region((sizes.code_bytes + 3) / 4);
      panel_scales_at_ = region(sizes.scale_floats);
      panel_zero_at_ = p.has_zp ? region(sizes.scale_floats) : -1;
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
  // Constant codes, scales and zero points: the column panels made once for the session.
  Status prepare_int4_panels(PrepareContext& ctx) {
    const MatMulNBitsParams& p = params_;
    const auto constant = [&ctx](int i) {
      const Value* v = ctx.node.input(i);
      return v != nullptr && v->is_constant() && ctx.value(i) != nullptr;
    };
    if (!constant(MatMulNBitsParams::kB) || !constant(MatMulNBitsParams::kScales) ||
        (p.has_zp && !constant(MatMulNBitsParams::kZeroPoints))) {
      return Status::ok();
    }
    const auto pack = [&]() -> Result<Int4PanelWeights> {
      OG_ASSIGN_OR_RETURN(std::vector<float> wide_scales, widened(*ctx.value(MatMulNBitsParams::kScales)));
      std::vector<float> wide_zp;
      const Tensor* zp = p.has_zp ? ctx.value(MatMulNBitsParams::kZeroPoints) : nullptr;
      if (zp != nullptr && !p.zp_packed) {
        OG_ASSIGN_OR_RETURN(wide_zp, widened(*zp));
      }
      const QWeights w = weights_view(p, ctx.value(MatMulNBitsParams::kB)->data<uint8_t>(), wide_scales.data(),
                                      zp != nullptr && p.zp_packed ? zp->data<uint8_t>() : nullptr,
                                      wide_zp.empty() ? nullptr : wide_zp.data());
      return Int4PanelWeights::pack(w);
    };
    OG_ASSIGN_OR_RETURN(int4_panels_, ctx.constant<Int4PanelWeights>("int4_panels", pack));
    return Status::ok();
  }

  template <typename T>
  void run_typed(const KernelContext& ctx) const {
    if (m_ == 0) return;
    float* ws = static_cast<float*>(ctx.workspace);
    const auto at = [ws](int64_t offset) { return offset < 0 ? nullptr : ws + offset; };
    const MatMulNBitsParams& p = params_;
    const int64_t per_col = p.n * p.blocks;
    const float* a = nullptr;
    const float* scales = nullptr;
    const float* zp_float = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      a = ctx.input(MatMulNBitsParams::kA).ptr<float>();
      scales = ctx.input(MatMulNBitsParams::kScales).ptr<float>();
      if (p.has_zp && !p.zp_packed) zp_float = ctx.input(MatMulNBitsParams::kZeroPoints).ptr<float>();
    } else {
      widen(ctx.input(MatMulNBitsParams::kA).ptr<T>(), m_ * p.k, at(a_at_));
      a = at(a_at_);
      if (int4_panels_ == nullptr) {
        widen(ctx.input(MatMulNBitsParams::kScales).ptr<T>(), per_col, at(scales_at_));
        scales = at(scales_at_);
        if (p.has_zp && !p.zp_packed) {
          widen(ctx.input(MatMulNBitsParams::kZeroPoints).ptr<T>(), per_col, at(zp_at_));
          zp_float = at(zp_at_);
        }
      }
    }
    const uint8_t* zp_packed = p.has_zp && p.zp_packed ? ctx.input(MatMulNBitsParams::kZeroPoints).ptr<uint8_t>() : nullptr;
    const QWeights w = weights_view(p, ctx.input(MatMulNBitsParams::kB).ptr<uint8_t>(), scales, zp_packed, zp_float);
    Int4Panels panels;
    if (int4_panels_ != nullptr) {
      panels = int4_panels_->view;
    } else if (int8_) {
      panels = pack_int4_panels(w, reinterpret_cast<uint8_t*>(at(panel_codes_at_)), at(panel_scales_at_), at(panel_zero_at_));
    }

    PackedA packed;
    packed.m = m_;
    packed.row_values = row_values_;
    if (int8_) {
      packed.int8_values = reinterpret_cast<int8_t*>(at(packed_at_));
      packed.block_scales = at(block_scales_at_);
      packed.block_sums = reinterpret_cast<int32_t*>(at(block_sums_at_));
    } else {
      packed.values = at(packed_at_);
      packed.block_terms = at(terms_at_);
    }
    parallel_for(ctx.pool, m_, 4, [&](int64_t r0, int64_t r1) {
      kernels_->pack_a(w, a + r0 * p.k, int8_, packed_rows(packed, p.blocks, r0, r1));
    });

    T* out = ctx.output(0).ptr<T>();
    float* y = y_at_ < 0 ? reinterpret_cast<float*>(out) : at(y_at_);
    if (int8_) multiply_int8(panels, packed, y, ctx.pool);
    else multiply(w, packed, at(panels_at_), y, ctx.pool);
    if (y_at_ >= 0) {
      const T* bias = p.has_bias ? ctx.input(MatMulNBitsParams::kBias).ptr<T>() : nullptr;
      parallel_for(ctx.pool, m_, 16, [&](int64_t r0, int64_t r1) {
        for (int64_t i = r0 * p.n; i < r1 * p.n; ++i) {
          const float v = y[i] + (bias != nullptr ? static_cast<float>(load(bias[i % p.n])) : 0.0f);
          out[i] = store<T>(v);
        }
      });
    }
  }

  // y [M, N] = int8 A x B's panels, threads splitting the panels. A piece is worth waking a thread
  // for: at least 256 KiB of codes over the rows (a few µs streamed: the default model's 864 x 320
  // decode projections, 140 KiB, stay on one thread, where two ran 1.5x slower) and 64 KiB; a
  // row's result does not depend on the split (see qgemm_int8_impl.h).
  void multiply_int8(const Int4Panels& b, const PackedA& a, float* y, ThreadPool* pool) const {
    const int64_t min_bytes = std::max<int64_t>(int64_t{1} << 16, (int64_t{1} << 18) / std::max<int64_t>(1, a.m));
    const int64_t min_panels = std::max<int64_t>(1, min_bytes / std::max<int64_t>(1, b.panel_code_bytes()));
    parallel_for(pool, b.panels, min_panels, [&](int64_t p0, int64_t p1) {
      kernels_->gemm_int8(b, a, p0, p1, y + p0 * kPanelCols, params_.n);
    });
  }

  // y [M, N] = packed A x B^T, threads splitting N.
  void multiply(const QWeights& w, const PackedA& a, float* panels, float* y, ThreadPool* pool) const {
    const int64_t n = params_.n;
    if (m_ <= kGemvMaxRows) {
      // A piece of N streams at least ~32 KiB of codes. Not scaled by M: where the pieces start
      // decides how columns group into register tiles, whose sums round differently, so a row's
      // result would otherwise depend on how many other rows share the call (the serving engine
      // batches sequences and needs each one's logits unchanged).
      const int64_t min_rows = std::max<int64_t>(1, (int64_t{1} << 18) / (params_.k * params_.bits));
      parallel_for(pool, n, min_rows, [&](int64_t n0, int64_t n1) { kernels_->gemv(w, a, n0, n1, y + n0, n); });
      return;
    }
    // One piece per thread, each with its own panel; pieces are whole panels of rows where N allows.
    const int64_t pieces = std::min<int64_t>(threads_, n);
    parallel_for(pool, pieces, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t n0 = n * i / pieces, n1 = n * (i + 1) / pieces;
        kernels_->gemm(w, a, n0, n1, panels + i * kernels_->panel_floats, y + n0, n);
      }
    });
  }

  MatMulNBitsParams params_;
  DType dtype_ = DType::kUndefined;
  int64_t m_ = 0;
  bool int8_ = false;  // accuracy_level >= 4 with 4-bit weights: int8 activations
  std::shared_ptr<const Int4PanelWeights> int4_panels_;  // int8 path, constant B: shared by the plans
  const QGemmKernels* kernels_ = nullptr;
  int threads_ = 1;
  int64_t row_values_ = 0;
  // Workspace regions, in floats from the start; -1 where unused.
  int64_t a_at_ = -1, scales_at_ = -1, zp_at_ = -1, packed_at_ = -1, block_scales_at_ = -1, block_sums_at_ = -1,
          terms_at_ = -1;
  int64_t panel_codes_at_ = -1, panel_scales_at_ = -1, panel_zero_at_ = -1;
  int64_t y_at_ = -1, panels_at_ = -1;
};

}  // namespace

std::unique_ptr<OpKernel> make_matmul_nbits_cpu_kernel() { return std::make_unique<MatMulNBitsKernel>(); }

void register_quantized_matmul_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = "com.microsoft", .op_type = "MatMulNBits", .device = DeviceType::kCpu,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16}, .type_input = 0,
                                .since_version = 1,
                                .create = [](const Node&) { return make_matmul_nbits_cpu_kernel(); }});
}

}  // namespace onnx_genai
