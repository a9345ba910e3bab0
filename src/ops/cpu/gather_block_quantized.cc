// com.microsoft GatherBlockQuantized on the CPU (layout in ops/schema/gather_block_quantized.h).
//
// The output is [outer, n, slice]: for each outer index o and index i, the data slice
// [o, indices[i], ...] of `slice` codes is dequantised. When quantize_axis is the last axis and
// its rows start on whole bytes (always for uint8; int4 / uint4 with an even row length), which
// covers the embedding table, a slice is whole rows and each row is decoded a block-piece at a
// time through a small table of (code - zero_point) * scale built per block: two lookups per
// byte for 4-bit codes, and only the gathered rows are touched. Other axis layouts dequantise
// code by code. Indices are checked before any work: a bad one is an error, never a read out of
// bounds.
#include <algorithm>
#include <type_traits>

#include "core/thread_pool.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/elementwise.h"
#include "ops/op.h"
#include "ops/schema/gather_block_quantized.h"

namespace onnx_genai {

namespace {

using Params = GatherBlockQuantizedParams;

constexpr int64_t kMinChunkElems = int64_t{1} << 14;
constexpr int64_t kPiece = 256;  // codes decoded per table; divides every block or is the whole block

// Code `i` of an array of `bits`-wide codes packed low bits first.
inline int32_t packed_code(const uint8_t* p, int64_t i, int64_t bits) {
  if (bits == 8) return p[i];
  const int64_t per_byte = 8 / bits;
  return (p[i / per_byte] >> (i % per_byte * bits)) & ((1 << bits) - 1);
}

// How codes and zero points are stored.
struct Codec {
  int64_t bits = 4;
  bool is_signed = false;        // int4: nibbles are two's complement
  int64_t zp_row_bytes = 0;      // uint8 below 8 bits: zero points packed per row of blocks
  int64_t blocks = 1;
  int32_t default_zero_point = 0;

  int32_t value(int32_t code) const { return is_signed && code >= 8 ? code - 16 : code; }
  int32_t code(const uint8_t* data, int64_t i) const { return value(packed_code(data, i, bits)); }
  // The zero point of block `scale_index` (a flat index into scales).
  int32_t zero_point(const uint8_t* zp, int64_t scale_index) const {
    if (zp == nullptr) return default_zero_point;
    if (zp_row_bytes == 0) return value(packed_code(zp, scale_index, bits));
    return packed_code(zp + scale_index / blocks * zp_row_bytes, scale_index % blocks, bits);
  }
};

// dst[i] = dequantised code (first + i), i < n, all within one block of a byte-aligned row.
template <int Bits>
void decode_piece(const Codec& c, const uint8_t* row, int64_t first, int64_t n, int32_t zp, float scale, float* dst) {
  if constexpr (Bits == 8) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(row[first + i] - zp) * scale;
  } else {
    constexpr int kPerByte = 8 / Bits, kMask = (1 << Bits) - 1;
    float table[1 << Bits];
    for (int v = 0; v <= kMask; ++v) table[v] = static_cast<float>(c.value(v) - zp) * scale;
    const uint8_t* bytes = row + first / kPerByte;
    for (int64_t b = 0; b < n / kPerByte; ++b) {
      for (int t = 0; t < kPerByte; ++t) dst[b * kPerByte + t] = table[(bytes[b] >> (t * Bits)) & kMask];
    }
  }
}

class GatherBlockQuantizedKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(p_, Params::make(ctx.node, ctx.inputs));
    name_ = ctx.node.describe();
    const Shape& codes = p_.codes;
    const int g = p_.gather_axis, q = p_.quantize_axis;
    outer_ = codes.numel(0, g);
    axis_n_ = codes[g];
    slice_ = codes.numel(g + 1, codes.rank());
    q_len_ = codes[q];
    q_inner_ = codes.numel(q + 1, codes.rank());
    codec_.bits = p_.bits;
    codec_.is_signed = p_.data_dtype == DType::kI4;
    codec_.blocks = p_.blocks;
    if (p_.data_dtype == DType::kU8) {
      codec_.default_zero_point = 1 << (p_.bits - 1);
      if (p_.bits < 8) codec_.zp_row_bytes = (p_.blocks * p_.bits + 7) / 8;
    }
    row_bytes_ = q_len_ * p_.bits / 8;
    by_rows_ = q == codes.rank() - 1 && g < q && q_len_ * p_.bits % 8 == 0;
    out_dtype_ = ctx.input(Params::kScales).dtype;
    index_dtype_ = ctx.input(Params::kIndices).dtype;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const auto body = [&]<typename I>() {
      const I* idx = ctx.input(Params::kIndices).ptr<const I>();
      const int64_t n = ctx.input(Params::kIndices).numel();
      for (int64_t i = 0; i < n; ++i) {
        if (idx[i] < -axis_n_ || idx[i] >= axis_n_) {
          return OG_ERROR(name_, ": index ", idx[i], " at position ", i, " out of range for gather_axis dim of size ", axis_n_);
        }
      }
      if (outer_ * n * slice_ == 0) return Status::ok();
      return dispatch_dtype<float, Float16, BFloat16>(out_dtype_, [&]<typename T>() {
        run_typed<T>(ctx, idx, n);
        return Status::ok();
      });
    };
    return index_dtype_ == DType::kI32 ? body.template operator()<int32_t>() : body.template operator()<int64_t>();
  }

 private:
  template <typename T, typename I>
  void run_typed(const KernelContext& ctx, const I* idx, int64_t n) const {
    const auto* data = static_cast<const uint8_t*>(ctx.input(Params::kData).data);
    const T* scales = ctx.input(Params::kScales).ptr<const T>();
    const auto* zp = p_.has_zero_points ? static_cast<const uint8_t*>(ctx.input(Params::kZeroPoints).data) : nullptr;
    T* out = ctx.output(0).ptr<T>();
    parallel_for(ctx.pool, outer_ * n, std::max<int64_t>(1, kMinChunkElems / std::max<int64_t>(slice_, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t u = begin; u < end; ++u) {
                     const int64_t i = idx[u % n];
                     const int64_t source = (u / n * axis_n_ + (i < 0 ? i + axis_n_ : i)) * slice_;  // first code
                     if (by_rows_) {
                       for (int64_t r = source / q_len_; r < (source + slice_) / q_len_; ++r) {
                         dequantize_row(data, scales, zp, r, out + u * slice_ + (r * q_len_ - source));
                       }
                     } else {
                       for (int64_t e = 0; e < slice_; ++e) out[u * slice_ + e] = dequantize_code<T>(data, scales, zp, source + e);
                     }
                   }
                 });
  }

  // Row r of the codes (quantize_axis last) into dst[0, q_len_), one block piece at a time.
  template <typename T>
  void dequantize_row(const uint8_t* data, const T* scales, const uint8_t* zp, int64_t r, T* dst) const {
    const uint8_t* row = data + r * row_bytes_;
    const int64_t piece = std::min(kPiece, p_.block_size);
    float buf[kPiece];
    for (int64_t j = 0; j < q_len_; j += piece) {
      const int64_t m = std::min(piece, q_len_ - j);
      const int64_t scale_index = r * p_.blocks + j / p_.block_size;
      const float scale = static_cast<float>(load(scales[scale_index]));
      const int32_t zero = codec_.zero_point(zp, scale_index);
      float* f32 = nullptr;
      if constexpr (std::is_same_v<T, float>) f32 = dst + j;
      else f32 = buf;
      switch (p_.bits) {
        case 2: decode_piece<2>(codec_, row, j, m, zero, scale, f32); break;
        case 4: decode_piece<4>(codec_, row, j, m, zero, scale, f32); break;
        default: decode_piece<8>(codec_, row, j, m, zero, scale, f32); break;
      }
      if constexpr (!std::is_same_v<T, float>) narrow_from_f32(buf, dst + j, m);
    }
  }

  // Any layout: code d of the flat code array, its block's scale found through quantize_axis.
  template <typename T>
  T dequantize_code(const uint8_t* data, const T* scales, const uint8_t* zp, int64_t d) const {
    const int64_t outer = d / (q_len_ * q_inner_), along = d / q_inner_ % q_len_, inner = d % q_inner_;
    const int64_t scale_index = (outer * p_.blocks + along / p_.block_size) * q_inner_ + inner;
    const float v = static_cast<float>(codec_.code(data, d) - codec_.zero_point(zp, scale_index)) *
                    static_cast<float>(load(scales[scale_index]));
    return store<T>(v);
  }

  Params p_;
  std::string name_;
  Codec codec_;
  int64_t outer_ = 0, axis_n_ = 0, slice_ = 0;  // codes = [outer, axis_n, slice] around gather_axis
  int64_t q_len_ = 0, q_inner_ = 1;             // quantize_axis length and the codes after it
  int64_t row_bytes_ = 0;
  bool by_rows_ = false;
  DType out_dtype_ = DType::kF32, index_dtype_ = DType::kI64;
};

}  // namespace

void register_gather_block_quantized_cpu_kernel(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = "com.microsoft", .op_type = "GatherBlockQuantized", .device = DeviceType::kCpu,
                                .dtypes = {DType::kU8, DType::kU4, DType::kI4}, .type_input = Params::kData,
                                .since_version = 1,
                                .create = [](const Node&) { return std::make_unique<GatherBlockQuantizedKernel>(); }});
}

}  // namespace onnx_genai
