// com.microsoft MatMulNBits on the CPU (layout and semantics in ops/schema/quantized_matmul.h).
//
// A call packs A once into the workspace (QGemmKernels::pack_a: reordered to match how 4-bit
// codes unpack, and for accuracy_level >= 4 quantised to int8 per block), then threads split N:
//   - f32 activations, M <= kGemvMaxRows: a GEMV that decodes each weight in registers, once
//     per tile of rows of A (each row's result the same bits as alone);
//   - f32 activations, larger M: per thread, panels of B dequantised once and reused by all rows;
//   - int8 activations (accuracy_level >= 4, 4-bit weights, blocks of >= 32 values): integer dot
//     products (AVX-512 VNNI or AVX2), any M, codes decoded once per tile of rows of A.
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
    float* terms = out.block_terms + r * w.blocks;
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
      for (int64_t i = begin; i < end; ++i) {
        if (int8) {
          const float q = std::nearbyint(scale > 0.0f ? src[i] / scale : 0.0f);
          out.int8_values[r * out.row_values + i] = static_cast<int8_t>(q);
          sum += q;
        } else {
          out.values[r * out.row_values + i] = src[i];
          sum += src[i];
        }
      }
      terms[b] = int8 ? scale * sum : sum;
      if (int8) out.block_scales[r * w.blocks + b] = scale;
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

void gemm_int8(const QWeights& w, const PackedA& a, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t r = 0; r < a.m; ++r) {
      const int8_t* q = a.int8_values + r * a.row_values;
      float acc = 0.0f;
      for (int64_t b = 0; b < w.blocks; ++b) {
        const int64_t begin = b * w.block_size, end = std::min(w.k, begin + w.block_size);
        int32_t dot = 0;
        for (int64_t k = begin; k < end; ++k) dot += q[k] * static_cast<int32_t>(code(w, n, k));
        acc += w.scales[n * w.blocks + b] * (a.block_scales[r * w.blocks + b] * static_cast<float>(dot) -
                                              w.zero_point(n, b) * a.block_terms[r * w.blocks + b]);
      }
      y[r * ldy + n - n0] = acc;
    }
  }
}

constexpr QGemmKernels kQGemmKernels{.chunk = 2, .int8_chunk = 2, .int8_min_block = 16, .panel_floats = 0,
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

// Rows [r0, r1) of `a`.
PackedA packed_rows(const PackedA& a, int64_t blocks, int64_t r0, int64_t r1) {
  PackedA rows = a;
  rows.m = r1 - r0;
  if (a.values != nullptr) rows.values += r0 * a.row_values;
  if (a.int8_values != nullptr) rows.int8_values += r0 * a.row_values;
  if (a.block_scales != nullptr) rows.block_scales += r0 * blocks;
  if (a.lane_offsets != nullptr) rows.lane_offsets += r0 * (a.row_values / kInt8LaneValues);
  if (a.lane_scales != nullptr) rows.lane_scales += r0 * (a.row_values / kInt8LaneValues);
  rows.block_terms += r0 * blocks;
  return rows;
}

class MatMulNBitsKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(params_, MatMulNBitsParams::make(ctx.node, ctx.inputs));
    const MatMulNBitsParams& p = params_;
    dtype_ = ctx.input(MatMulNBitsParams::kA).dtype;
    m_ = ctx.input(MatMulNBitsParams::kA).shape.numel() / p.k;
    // Blocks too short for the int8 table's dot lanes run the f32 path (more accurate than level 4 asks).
    int8_ = p.accuracy_level >= 4 && p.bits == 4 && p.block_size >= best_int8_kernels().int8_min_block;
    kernels_ = int8_ ? &best_int8_kernels() : p.bits == 2 ? &scalar::qgemm_kernels() : &best_f32_kernels();
    threads_ = ctx.pool != nullptr ? ctx.pool->num_threads() : 1;
    const bool wide = dtype_ == DType::kF32;
    const int64_t per_col = p.n * p.blocks;
    row_values_ = packed_row_values(p.blocks, p.block_size, int8_ ? kernels_->int8_chunk : kernels_->chunk);
    const int64_t lanes = (row_values_ + kInt8LaneValues - 1) / kInt8LaneValues;
    int64_t offset = 0;
    const auto region = [&offset](int64_t floats) {
      const int64_t at = offset;
      offset += align_floats(floats);
      return at;
    };
    a_at_ = wide ? -1 : region(m_ * p.k);
    scales_at_ = wide ? -1 : region(per_col);
    zp_at_ = (p.has_zp && !p.zp_packed && !wide) ? region(per_col) : -1;
    packed_at_ = region(int8_ ? (m_ * row_values_ + 3) / 4 : m_ * row_values_);
    block_scales_at_ = int8_ ? region(m_ * p.blocks) : -1;
    lane_scales_at_ = int8_ ? region(m_ * lanes) : -1;
    lane_offsets_at_ = int8_ ? region(m_ * lanes) : -1;  // int32, float-sized
    terms_at_ = region(m_ * p.blocks);
    y_at_ = (wide && !p.has_bias) ? -1 : region(m_ * p.n);
    panels_at_ = (!int8_ && m_ > kGemvMaxRows) ? region(threads_ * kernels_->panel_floats) : -1;
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
    if (m_ == 0) return;
    float* ws = static_cast<float*>(ctx.workspace);
    const auto at = [ws](int64_t offset) { return offset < 0 ? nullptr : ws + offset; };
    const MatMulNBitsParams& p = params_;
    const int64_t per_col = p.n * p.blocks;
    const float* a = nullptr;
    QWeights w;
    w.codes = ctx.input(MatMulNBitsParams::kB).ptr<uint8_t>();
    w.rows = p.n, w.k = p.k, w.bits = p.bits, w.block_size = p.block_size, w.blocks = p.blocks;
    w.block_bytes = p.block_bytes, w.zp_row_bytes = (p.blocks * p.bits + 7) / 8;
    if constexpr (std::is_same_v<T, float>) {
      a = ctx.input(MatMulNBitsParams::kA).ptr<float>();
      w.scales = ctx.input(MatMulNBitsParams::kScales).ptr<float>();
      if (p.has_zp && !p.zp_packed) w.zp_float = ctx.input(MatMulNBitsParams::kZeroPoints).ptr<float>();
    } else {
      widen(ctx.input(MatMulNBitsParams::kA).ptr<T>(), m_ * p.k, at(a_at_));
      a = at(a_at_);
      widen(ctx.input(MatMulNBitsParams::kScales).ptr<T>(), per_col, at(scales_at_));
      w.scales = at(scales_at_);
      if (p.has_zp && !p.zp_packed) {
        widen(ctx.input(MatMulNBitsParams::kZeroPoints).ptr<T>(), per_col, at(zp_at_));
        w.zp_float = at(zp_at_);
      }
    }
    if (p.has_zp && p.zp_packed) w.zp_packed = ctx.input(MatMulNBitsParams::kZeroPoints).ptr<uint8_t>();

    PackedA packed;
    packed.m = m_;
    packed.row_values = row_values_;
    if (int8_) {
      packed.int8_values = reinterpret_cast<int8_t*>(at(packed_at_));
      packed.block_scales = at(block_scales_at_);
      packed.lane_scales = at(lane_scales_at_);
      packed.lane_offsets = reinterpret_cast<int32_t*>(at(lane_offsets_at_));
    } else {
      packed.values = at(packed_at_);
    }
    packed.block_terms = at(terms_at_);
    parallel_for(ctx.pool, m_, 4, [&](int64_t r0, int64_t r1) {
      kernels_->pack_a(w, a + r0 * p.k, int8_, packed_rows(packed, p.blocks, r0, r1));
    });

    T* out = ctx.output(0).ptr<T>();
    float* y = y_at_ < 0 ? reinterpret_cast<float*>(out) : at(y_at_);
    multiply(w, packed, at(panels_at_), y, ctx.pool);
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

  // y [M, N] = packed A x B^T, threads splitting N.
  void multiply(const QWeights& w, const PackedA& a, float* panels, float* y, ThreadPool* pool) const {
    const int64_t n = params_.n;
    if (int8_ || m_ <= kGemvMaxRows) {
      // A piece of N streams at least ~32 KiB of codes. Not scaled by M: where the pieces start
      // decides how columns group into register tiles, whose sums round differently, so a row's
      // result would otherwise depend on how many other rows share the call (the serving engine
      // batches sequences and needs each one's logits unchanged).
      const int64_t min_rows = std::max<int64_t>(1, (int64_t{1} << 18) / (params_.k * params_.bits));
      parallel_for(pool, n, min_rows, [&](int64_t n0, int64_t n1) {
        if (int8_) kernels_->gemm_int8(w, a, n0, n1, y + n0, n);
        else kernels_->gemv(w, a, n0, n1, y + n0, n);
      });
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
  const QGemmKernels* kernels_ = nullptr;
  int threads_ = 1;
  int64_t row_values_ = 0;
  // Workspace regions, in floats from the start; -1 where unused.
  int64_t a_at_ = -1, scales_at_ = -1, zp_at_ = -1, packed_at_ = -1, block_scales_at_ = -1, lane_scales_at_ = -1,
          lane_offsets_at_ = -1, terms_at_ = -1;
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
