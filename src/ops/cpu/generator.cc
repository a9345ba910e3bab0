// CPU kernels of the generator family. Output shapes were fixed at plan time from values, so
// each run only fills memory.
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "ops/cpu/copy_util.h"
#include "ops/cpu/dispatch.h"
#include "ops/op.h"
#include "ops/schema/data_params.h"

namespace onnx_genai {
namespace {

class ConstantKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    auto value = constant_value(ctx.attrs());
    if (!value) return value.status().with_context(ctx.node.describe());
    value_ = std::move(value).value();
    return Status::ok();
  }
  Status run(const KernelContext& ctx) const override {
    if (value_.nbytes() > 0) std::memcpy(ctx.output(0).data, value_.raw(), static_cast<size_t>(value_.nbytes()));
    return Status::ok();
  }

 private:
  Tensor value_;
};

class ConstantOfShapeKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const DType t = ctx.output(0).dtype;
    OG_ASSIGN_OR_RETURN(elem_, element_bytes(t));
    value_.fill(0);
    if (const Attribute* a = ctx.attrs().find("value"); a != nullptr) {
      std::memcpy(value_.data(), a->t.raw(), static_cast<size_t>(elem_));
    }
    return Status::ok();
  }
  Status run(const KernelContext& ctx) const override {
    fill_elements(ctx.output(0).data, ctx.output(0).numel(), value_.data(), elem_, ctx.pool);
    return Status::ok();
  }

 private:
  int64_t elem_ = 0;
  std::array<char, 8> value_{};
};

// out[i] = start + i * delta; the count was decided at plan time from the same values.
class RangeKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    dtype_ = ctx.input(0).dtype;
    if (dtype_ != DType::kF32 && dtype_ != DType::kF64 && dtype_ != DType::kI16 && dtype_ != DType::kI32 &&
        dtype_ != DType::kI64) {
      return ctx.fail("unsupported dtype ", dtype_name(dtype_));
    }
    return Status::ok();
  }
  // A plain switch: Range runs every decode step (position ids) and must not allocate.
  Status run(const KernelContext& ctx) const override {
    switch (dtype_) {
      case DType::kF32: fill<float>(ctx); break;
      case DType::kF64: fill<double>(ctx); break;
      case DType::kI16: fill<int16_t>(ctx); break;
      case DType::kI32: fill<int32_t>(ctx); break;
      default: fill<int64_t>(ctx); break;
    }
    return Status::ok();
  }

 private:
  template <typename T>
  static void fill(const KernelContext& ctx) {
    const T start = ctx.input(0).ptr<T>()[0];
    const T delta = ctx.input(2).ptr<T>()[0];
    T* out = ctx.output(0).ptr<T>();
    const int64_t n = ctx.output(0).numel();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  }

  DType dtype_ = DType::kUndefined;
};

// EyeLike: zeros with ones on diagonal k (column = row + k).
class EyeLikeKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const DType t = ctx.output(0).dtype;
    OG_ASSIGN_OR_RETURN(elem_, element_bytes(t));
    auto one = encode_scalar(t, 1.0);
    if (!one) return one.status().with_context(ctx.node.describe());
    one_ = *one;
    rows_ = ctx.output(0).shape[0];
    cols_ = ctx.output(0).shape[1];
    k_ = ctx.attrs().get_int("k", 0);
    return Status::ok();
  }
  Status run(const KernelContext& ctx) const override {
    auto* out = static_cast<char*>(ctx.output(0).data);
    std::memset(out, 0, static_cast<size_t>(rows_ * cols_ * elem_));
    for (int64_t i = std::max<int64_t>(0, -k_); i < rows_ && i + k_ < cols_; ++i) {
      copy_bytes(out + (i * cols_ + i + k_) * elem_, one_.data(), elem_);
    }
    return Status::ok();
  }

 private:
  int64_t elem_ = 0, rows_ = 0, cols_ = 0, k_ = 0;
  std::array<char, 8> one_{};
};

// OneHot: out [outer, depth, inner] is `off` everywhere except out[o, idx(o, p), p] = `on`, where
// indices are [outer, inner]. Indices of any numeric type are truncated to integers; negative
// ones count from depth; out-of-range ones leave their column all `off`.
class OneHotKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& out = ctx.output(0).shape;
    const int axis = normalize_axis(ctx.attrs().get_int("axis", -1), out.rank());
    OG_ASSIGN_OR_RETURN(elem_, element_bytes(ctx.output(0).dtype));
    depth_ = out[axis];
    outer_ = out.numel(0, axis);
    inner_ = out.numel(axis + 1, out.rank());
    index_type_ = ctx.input(0).dtype;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const auto* values = static_cast<const char*>(ctx.input(2).data);
    auto* out = static_cast<char*>(ctx.output(0).data);
    fill_elements(out, outer_ * depth_ * inner_, values, elem_, ctx.pool);
    return dispatch_dtype<float, Float16, BFloat16, double, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t,
                          int64_t, uint64_t>(index_type_, [&]<typename I>() {
      const I* idx = ctx.input(0).ptr<I>();
      for (int64_t o = 0; o < outer_; ++o) {
        for (int64_t p = 0; p < inner_; ++p) {
          int64_t d = static_cast<int64_t>(load(idx[o * inner_ + p]));
          if (d < 0) d += depth_;
          if (d < 0 || d >= depth_) continue;
          copy_bytes(out + ((o * depth_ + d) * inner_ + p) * elem_, values + elem_, elem_);
        }
      }
      return Status::ok();
    });
  }

 private:
  int64_t elem_ = 0, depth_ = 0, outer_ = 0, inner_ = 0;
  DType index_type_ = DType::kUndefined;
};

template <typename K>
std::unique_ptr<OpKernel> make(const Node&) {
  return std::make_unique<K>();
}

}  // namespace

void register_generator_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(any_dtype_kernel("Constant", make<ConstantKernel>));
  registry.add_kernel(any_dtype_kernel("ConstantOfShape", make<ConstantOfShapeKernel>, 9));
  registry.add_kernel(any_dtype_kernel("Range", make<RangeKernel>, 11));
  registry.add_kernel(any_dtype_kernel("EyeLike", make<EyeLikeKernel>, 9));
  registry.add_kernel(any_dtype_kernel("OneHot", make<OneHotKernel>, 9));
}

}  // namespace onnx_genai
