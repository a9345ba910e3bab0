// CPU kernels of the layout family. Transpose, DepthToSpace and SpaceToDepth are permutations of
// the input's (reshaped) dims, so each is one StridedCopy (blocked when the innermost dim moves,
// a memcpy per row when it stays). Trilu and Pad work row by row: a row is a few memcpy/memset
// runs, so their cost is bandwidth, not index arithmetic.
#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "ops/cpu/copy_util.h"
#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {
namespace {

// Output dim i walks input dim perm[i] of `in_dims` (a row-major view of input 0).
CopyLayout permuted_layout(std::span<const int64_t> in_dims, std::span<const int64_t> perm) {
  const std::vector<int64_t> in_strides = contiguous_strides(in_dims);
  CopyLayout layout;
  for (int64_t p : perm) {
    layout.dims.push_back(in_dims[static_cast<size_t>(p)]);
    layout.src_strides.push_back(in_strides[static_cast<size_t>(p)]);
  }
  layout.dst_strides = contiguous_strides(layout.dims);
  return layout;
}

// DepthToSpace views [N, C, H, W] as 6 dims and permutes them so the output
// [N, C / b^2, H * b, W * b] comes out row-major:
//   DCR: [N, b, b, C', H, W] -> [N, C', H, b, W, b]   CRD: [N, C', b, b, H, W] -> same order.
Result<CopyLayout> plan_depth_to_space(const PrepareContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const int64_t b = ctx.attrs().get_int("blocksize", 0);
  const int64_t c = in[1] / (b * b);
  const std::string mode = ctx.attrs().get_string("mode", "DCR");
  if (mode == "DCR") {
    const int64_t dims[] = {in[0], b, b, c, in[2], in[3]};
    const int64_t perm[] = {0, 3, 4, 1, 5, 2};
    return permuted_layout(dims, perm);
  }
  if (mode == "CRD") {
    const int64_t dims[] = {in[0], c, b, b, in[2], in[3]};
    const int64_t perm[] = {0, 1, 4, 2, 5, 3};
    return permuted_layout(dims, perm);
  }
  return ctx.fail("unknown mode '", mode, "'");
}

// SpaceToDepth: [N, C, H', b, W', b] -> [N, b, b, C, H', W'] = [N, C * b^2, H', W'].
Result<CopyLayout> plan_space_to_depth(const PrepareContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const int64_t b = ctx.attrs().get_int("blocksize", 0);
  const int64_t dims[] = {in[0], in[1], in[2] / b, b, in[3] / b, b};
  const int64_t perm[] = {0, 3, 5, 1, 2, 4};
  return permuted_layout(dims, perm);
}

// Trilu over [batch, M, N]: row i keeps columns j with j - i >= k (upper) or j - i <= k (lower),
// so each row is zeros, one memcpy run, zeros.
class TriluKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& in = ctx.input(0).shape;
    OG_ASSIGN_OR_RETURN(elem_, element_bytes(ctx.input(0).dtype));
    upper_ = ctx.attrs().get_int("upper", 1) != 0;
    rows_ = in[in.rank() - 2];
    cols_ = in[in.rank() - 1];
    total_rows_ = in.numel(0, in.rank() - 1);
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const int64_t k = ctx.has_input(1) ? ctx.input(1).ptr<int64_t>()[0] : 0;
    const auto* src = static_cast<const char*>(ctx.input(0).data);
    auto* dst = static_cast<char*>(ctx.output(0).data);
    const int64_t row_bytes = cols_ * elem_;
    parallel_for(ctx.pool, total_rows_, copy_min_chunk(row_bytes), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t i = r % rows_;
        // Kept columns [lo, hi); the clamps keep huge |k| from overflowing.
        const int64_t diag = std::clamp<int64_t>(k, -rows_ - 1, cols_ + 1) + i;
        const int64_t lo = upper_ ? std::clamp<int64_t>(diag, 0, cols_) : 0;
        const int64_t hi = upper_ ? cols_ : std::clamp<int64_t>(diag + 1, 0, cols_);
        char* d = dst + r * row_bytes;
        const char* s = src + r * row_bytes;
        std::memset(d, 0, static_cast<size_t>(lo * elem_));
        if (hi > lo) std::memcpy(d + lo * elem_, s + lo * elem_, static_cast<size_t>((hi - lo) * elem_));
        std::memset(d + std::max(lo, hi) * elem_, 0, static_cast<size_t>((cols_ - std::max(lo, hi)) * elem_));
      }
    });
    return Status::ok();
  }

 private:
  bool upper_ = true;
  int64_t elem_ = 0, rows_ = 0, cols_ = 0, total_rows_ = 0;
};

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// Input index read by padded position i (i may be outside [0, n)); -1 means the fill value.
inline int64_t pad_source(int64_t i, int64_t n, PadMode mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return i < 0 ? 0 : n - 1;
    case PadMode::kWrap: return ((i % n) + n) % n;
    case PadMode::kReflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      const int64_t m = ((i % period) + period) % period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

// Pad, row by row over the output's last dim: each output row maps to one input row (or to the
// fill value in constant mode); inside the row the interior is one memcpy and the pads are a few
// single-element copies.
class PadKernel final : public OpKernel {
 public:
  explicit PadKernel(const Node& node) : opset_(node.opset) {}

  Status prepare(PrepareContext& ctx) override {
    const Shape& in = ctx.input(0).shape;
    OG_ASSIGN_OR_RETURN(elem_, element_bytes(ctx.input(0).dtype));
    OG_ASSIGN_OR_RETURN(PadParams p, resolve_pads(in, ctx.attrs(), opset_, ctx.value(1), ctx.value(3)));
    const std::string mode = ctx.attrs().get_string("mode", "constant");
    mode_ = mode == "reflect" ? PadMode::kReflect : mode == "edge" ? PadMode::kEdge : mode == "wrap" ? PadMode::kWrap : PadMode::kConstant;
    rank_ = in.rank();
    if (rank_ > StridedCopy::kMaxDims) return ctx.fail("rank ", rank_, " not supported");
    in_dims_ = in.dims();
    out_dims_ = ctx.output(0).shape.dims();
    in_strides_ = in.strides();
    begin_ = p.begin;
    // Before opset 11 the fill value is a float attribute; from 11 it is input 2, read per run.
    auto fill = encode_scalar(ctx.input(0).dtype, opset_ < 11 ? ctx.attrs().get_float("value", 0.0f) : 0.0);
    if (!fill) return fill.status().with_context(ctx.node.describe());
    fill_ = *fill;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    std::array<char, 8> fill = fill_;
    if (opset_ >= 11 && ctx.has_input(2) && ctx.input(2).numel() > 0) {
      std::memcpy(fill.data(), ctx.input(2).data, static_cast<size_t>(elem_));
    }
    const int64_t out_n = rank_ == 0 ? 1 : out_dims_.back();
    const int64_t rows = out_n == 0 ? 0 : ctx.output(0).numel() / out_n;
    const auto* src = static_cast<const char*>(ctx.input(0).data);
    auto* dst = static_cast<char*>(ctx.output(0).data);
    parallel_for(ctx.pool, rows, copy_min_chunk(out_n * elem_), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) pad_row(src, dst + r * out_n * elem_, r, fill.data());
    });
    return Status::ok();
  }

 private:
  void pad_row(const char* src, char* out, int64_t row, const char* fill) const {
    const int64_t out_n = rank_ == 0 ? 1 : out_dims_.back();
    // Input row for this output row, or null when it lies in a constant pad.
    const char* in_row = src;
    for (int d = rank_ - 2; d >= 0 && in_row != nullptr; --d) {
      const size_t ud = static_cast<size_t>(d);
      const int64_t o = row % out_dims_[ud];
      row /= out_dims_[ud];
      const int64_t i = pad_source(o - begin_[ud], in_dims_[ud], mode_);
      in_row = i < 0 ? nullptr : in_row + i * in_strides_[ud] * elem_;
    }
    if (in_row == nullptr) {
      fill_elements(out, out_n, fill, elem_, nullptr);
      return;
    }
    const int64_t in_n = rank_ == 0 ? 1 : in_dims_.back();
    const int64_t b = rank_ == 0 ? 0 : begin_.back();
    const int64_t lo = std::clamp<int64_t>(b, 0, out_n);               // first interior position
    const int64_t hi = std::clamp<int64_t>(b + in_n, lo, out_n);       // end of the interior
    std::memcpy(out + lo * elem_, in_row + (lo - b) * elem_, static_cast<size_t>((hi - lo) * elem_));
    auto pad_at = [&](int64_t o) {
      const int64_t i = pad_source(o - b, in_n, mode_);
      copy_bytes(out + o * elem_, i < 0 ? fill : in_row + i * elem_, elem_);
    };
    for (int64_t o = 0; o < lo; ++o) pad_at(o);
    for (int64_t o = hi; o < out_n; ++o) pad_at(o);
  }

  int opset_;
  PadMode mode_ = PadMode::kConstant;
  int rank_ = 0;
  int64_t elem_ = 0;
  std::vector<int64_t> in_dims_, out_dims_, in_strides_, begin_;
  std::array<char, 8> fill_{};
};

}  // namespace

Result<CopyLayout> transpose_layout(const PrepareContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const std::vector<int64_t> perm = resolve_perm(ctx.attrs(), in.rank());
  return permuted_layout(in.dims(), perm);
}

void register_layout_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(any_dtype_kernel("Transpose", [](const Node&) { return make_strided_copy_kernel(transpose_layout); }));
  registry.add_kernel(any_dtype_kernel("DepthToSpace", [](const Node&) { return make_strided_copy_kernel(plan_depth_to_space); }));
  registry.add_kernel(any_dtype_kernel("SpaceToDepth", [](const Node&) { return make_strided_copy_kernel(plan_space_to_depth); }));
  registry.add_kernel(any_dtype_kernel("Trilu", [](const Node&) { return std::make_unique<TriluKernel>(); }, 14));
  registry.add_kernel(any_dtype_kernel("Pad", [](const Node& n) { return std::make_unique<PadKernel>(n); }, 2));
}

}  // namespace onnx_genai
