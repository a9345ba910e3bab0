// Expert projections of the CPU MoE kernel (ops/cpu/moe_experts.h).
#include "ops/cpu/moe_experts.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/cpu_features.h"
#include "ops/cpu/dispatch.h"

namespace onnx_genai {

namespace {

// The SIMD tables' tested blocks (MatMulNBits' limits).
constexpr int64_t kMaxKernelBlock = 256;
constexpr int64_t kMinKernelBlock = 16;

// e2m1: sign, 2 exponent bits, 1 mantissa bit (OCP Microscaling formats, v1.0).
constexpr float kE2M1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                             -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

const QGemmKernels& int_kernels(int64_t bits, int64_t kernel_block) {
  // 2-bit codes only have the plain loops.
  const bool simd = bits != 2 && kernel_block >= kMinKernelBlock && kernel_block <= kMaxKernelBlock &&
                    (kernel_block & (kernel_block - 1)) == 0;
  const CpuFeatures& f = cpu_features();
  if (simd && f.avx512) return avx512::qgemm_kernels();
  if (simd && f.avx2) return avx2::qgemm_kernels();
  return scalar::qgemm_kernels();
}

// The kernels' block: the scales' own, or for blocks longer than the SIMD tables take (per-row
// scales: K) the longest power of two in [16, 256] dividing it, each scale repeated over its
// pieces. The SIMD tables take powers of two in [16, 256]; other blocks run the plain loops.
int64_t kernel_block_for(int64_t k, int64_t block) {
  block = std::min(block, k);
  if (block <= kMaxKernelBlock) return block;
  for (int64_t piece = kMaxKernelBlock; piece >= kMinKernelBlock; piece /= 2) {
    if (block % piece == 0) return piece;
  }
  return block;
}

float widen_one(DType dtype, const void* data, int64_t i) {
  switch (dtype) {
    case DType::kF16: return static_cast<const Float16*>(data)[i];
    case DType::kBF16: return static_cast<const BFloat16*>(data)[i];
    default: return static_cast<const float*>(data)[i];
  }
}

// 2^(e - 127); 255 is NaN.
float e8m0(uint8_t e) { return e == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, e - 127); }

// Eight partial sums, so the compiler keeps them in one vector register.
float dot(const float* a, const float* b, int64_t k) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (; i < k; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

ExpertProjection::ExpertProjection(const MoEParams& p, int projection, DType weight_dtype) {
  const MoEParams::Projection& fc = p.fc[projection];
  quant_ = p.quant;
  weight_dtype_ = weight_dtype;
  scale_dtype_ = p.scale_dtype;
  n_ = fc.n, k_ = fc.k, bits_ = p.bits, block_size_ = fc.block_size, blocks_ = fc.blocks;
  per_row_ = p.per_row;
  zero_points_ = fc.has_zero_points;
  if (quant_ == MoEParams::Quant::kMxfp4) row_bytes_ = k_ / 2;
  if (quant_ != MoEParams::Quant::kInt) return;
  row_bytes_ = k_ * bits_ / 8;
  kernel_block_ = kernel_block_for(k_, block_size_);
  kernel_blocks_ = k_ / kernel_block_;
  kernels_ = &int_kernels(bits_, kernel_block_);
  row_values_ = packed_row_values(kernel_blocks_, kernel_block_, kernels_->chunk);
  zp_row_bytes_ = (blocks_ * bits_ + 7) / 8;
}

int64_t ExpertProjection::scratch_floats() const {
  if (quant_ == MoEParams::Quant::kInt) return kernels_->panel_floats + 2 * kMoEPieceRows * kernel_blocks_;
  if (quant_ == MoEParams::Quant::kFloat && weight_dtype_ == DType::kF32) return 0;
  return kMoEPieceRows * k_;
}

void ExpertProjection::pack(const float* a, int64_t m, float* values, float* terms) const {
  QWeights layout;
  layout.k = k_, layout.bits = bits_, layout.block_size = kernel_block_, layout.blocks = kernel_blocks_;
  PackedA out;
  out.m = m, out.row_values = row_values_, out.values = values, out.block_terms = terms;
  kernels_->pack_a(layout, a, /*int8=*/false, out);
}

// Rows [n0, n1) of expert e as the kernels read them: codes in place; scales and zero points in
// place when they already are f32 / packed per kernel block, else expanded into `scratch`.
QWeights ExpertProjection::view(const Inputs& in, int64_t e, int64_t n0, int64_t n1, float* scratch) const {
  const int64_t rows = n1 - n0, first = e * n_ + n0;
  QWeights w;
  w.codes = static_cast<const uint8_t*>(in.weights) + first * row_bytes_;
  w.rows = rows, w.k = k_, w.bits = bits_, w.block_size = kernel_block_, w.blocks = kernel_blocks_;
  w.block_bytes = kernel_block_ * bits_ / 8;
  const bool same_blocks = kernel_block_ == block_size_;
  if (same_blocks && scale_dtype_ == DType::kF32) {
    w.scales = static_cast<const float*>(in.scales) + first * blocks_;
  } else {
    float* scales = scratch;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < kernel_blocks_; ++b) {
        scales[r * kernel_blocks_ + b] = widen_one(scale_dtype_, in.scales, (first + r) * blocks_ + b * kernel_block_ / block_size_);
      }
    }
    w.scales = scales;
  }
  if (!zero_points_) return w;
  if (same_blocks && !per_row_) {
    w.zp_packed = in.zero_points + first * zp_row_bytes_;
    w.zp_row_bytes = zp_row_bytes_;
    return w;
  }
  // Per-row zero points are packed along N ([E, ceil(N * bits / 8)]); block-wise ones along blocks.
  float* zp = scratch + kMoEPieceRows * kernel_blocks_;
  const int64_t per_byte = 8 / bits_, mask = (1 << bits_) - 1;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < kernel_blocks_; ++b) {
      int64_t byte = 0, index = 0;
      if (per_row_) {
        byte = e * ((n_ * bits_ + 7) / 8) + (n0 + r) / per_byte, index = (n0 + r) % per_byte;
      } else {
        const int64_t j = b * kernel_block_ / block_size_;
        byte = (first + r) * zp_row_bytes_ + j / per_byte, index = j % per_byte;
      }
      zp[r * kernel_blocks_ + b] = static_cast<float>((in.zero_points[byte] >> (index * bits_)) & mask);
    }
  }
  w.zp_float = zp;
  return w;
}

void ExpertProjection::decode_rows(const Inputs& in, int64_t e, int64_t n0, int64_t n1, float* out) const {
  const int64_t first = e * n_ + n0, count = (n1 - n0) * k_;
  if (quant_ == MoEParams::Quant::kFloat) {
    for (int64_t i = 0; i < count; ++i) out[i] = widen_one(weight_dtype_, in.weights, first * k_ + i);
    return;
  }
  const auto* codes = static_cast<const uint8_t*>(in.weights) + first * row_bytes_;
  const auto* scales = static_cast<const uint8_t*>(in.scales) + first * blocks_;
  const float global = in.global_scales[e];
  for (int64_t i = 0; i < count; i += 2) {
    const uint8_t byte = codes[i / 2];
    const float s = e8m0(scales[i / block_size_]) * global;  // a block holds whole bytes
    out[i] = kE2M1[byte & 0x0F] * s;
    out[i + 1] = kE2M1[byte >> 4] * s;
  }
}

void ExpertProjection::multiply(const Inputs& in, int64_t e, int64_t n0, int64_t n1, const float* a, const float* packed,
                                const float* terms, int64_t m, float* scratch, float* y, int64_t ldy) const {
  if (quant_ == MoEParams::Quant::kInt) {
    const QWeights w = view(in, e, n0, n1, scratch + kernels_->panel_floats);
    PackedA pa;
    pa.m = m, pa.row_values = row_values_, pa.values = const_cast<float*>(packed), pa.block_terms = const_cast<float*>(terms);
    if (m <= kGemvMaxRows) kernels_->gemv(w, pa, 0, n1 - n0, y, ldy);
    else kernels_->gemm(w, pa, 0, n1 - n0, scratch, y, ldy);
    return;
  }
  const float* rows = nullptr;
  if (quant_ == MoEParams::Quant::kFloat && weight_dtype_ == DType::kF32) {
    rows = static_cast<const float*>(in.weights) + (e * n_ + n0) * k_;
  } else {
    decode_rows(in, e, n0, n1, scratch);
    rows = scratch;
  }
  for (int64_t n = 0; n < n1 - n0; ++n) {
    for (int64_t r = 0; r < m; ++r) y[r * ldy + n] = dot(a + r * k_, rows + n * k_, k_);
  }
}

}  // namespace onnx_genai
