// CPU kernels of the Gelu family (ONNX Gelu; com.microsoft FastGelu, BiasGelu, QuickGelu; semantics
// in ops/schema/activation.cc). f32 spans go straight to the AVX-512 / AVX2 gelu_f32 kernels (the
// vector tanh / erf / sigmoid of ops/cpu/avx2/elementwise_simd_impl.h with the bias add fused);
// f16 / bf16 are widened a stack block at a time and share that path. The flat element range is
// split across threads; a span never crosses a row, so its bias is one contiguous run.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/cpu/elementwise.h"
#include "ops/op.h"

namespace onnx_genai {
namespace {

constexpr int64_t kGrain = kElementwiseGrain / 8;  // transcendental per element
constexpr int64_t kBlock = 512;                    // f32 stack block for 16-bit types

// The scalar build, for CPUs without AVX2.
void gelu_scalar(GeluOp op, const float* x, const float* bias, float* y, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] + (bias != nullptr ? bias[i] : 0.0f);
    switch (op) {
      case GeluOp::kTanh: y[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v))); break;
      case GeluOp::kErf: y[i] = 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f)); break;
      case GeluOp::kQuick: y[i] = v / (1.0f + std::exp(-alpha * v)); break;
    }
  }
}

class GeluKernel final : public OpKernel {
 public:
  GeluKernel(GeluOp op, const Node& node) : op_(op), alpha_(node.attrs.get_float("alpha", 1.702f)) {}

  Status prepare(PrepareContext& ctx) override {
    const Shape& x = ctx.input(0).shape;
    dtype_ = ctx.input(0).dtype;
    numel_ = x.numel();
    has_bias_ = ctx.has_input(1);
    // Without a bias the whole tensor is one row.
    row_ = has_bias_ ? x[x.rank() - 1] : std::max<int64_t>(numel_, 1);
    if (has_bias_ && dtype_ != DType::kF32) ctx.workspace_bytes = static_cast<size_t>(row_) * sizeof(float);
    simd_ = gelu_f32(op_);
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    if (numel_ == 0) return Status::ok();
    return dispatch_dtype<float, Float16, BFloat16>(dtype_, [&]<typename T>() {
      run_typed<T>(ctx);
      return Status::ok();
    });
  }

 private:
  template <typename T>
  void run_typed(const KernelContext& ctx) const {
    const T* x = ctx.input(0).ptr<const T>();
    T* y = ctx.output(0).ptr<T>();
    const float* bias = nullptr;
    if (has_bias_) {
      if constexpr (std::is_same_v<T, float>) {
        bias = ctx.input(1).ptr<const float>();
      } else {
        widen_to_f32(ctx.input(1).ptr<const T>(), static_cast<float*>(ctx.workspace), row_);
        bias = static_cast<const float*>(ctx.workspace);
      }
    }
    parallel_for(ctx.pool, numel_, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t at = begin; at < end;) {
        const int64_t in_row = at % row_;
        int64_t n = std::min(end - at, row_ - in_row);
        if constexpr (!std::is_same_v<T, float>) n = std::min(n, kBlock);
        span<T>(x + at, bias != nullptr ? bias + in_row : nullptr, y + at, n);
        at += n;
      }
    });
  }

  template <typename T>
  void span(const T* x, const float* bias, T* y, int64_t n) const {
    if constexpr (std::is_same_v<T, float>) {
      f32_span(x, bias, y, n);
    } else {
      float buf[kBlock];
      widen_to_f32(x, buf, n);
      f32_span(buf, bias, buf, n);
      narrow_from_f32(buf, y, n);
    }
  }

  void f32_span(const float* x, const float* bias, float* y, int64_t n) const {
    if (simd_ != nullptr) simd_(x, bias, y, n, alpha_);
    else gelu_scalar(op_, x, bias, y, n, alpha_);
  }

  GeluOp op_;
  float alpha_;
  DType dtype_ = DType::kF32;
  int64_t numel_ = 0, row_ = 1;
  bool has_bias_ = false;
  GeluFn simd_ = nullptr;
};

const std::vector<DType> kGeluDtypes{DType::kF32, DType::kF16, DType::kBF16};

void add_gelu(OpRegistry& registry, const char* op_type, GeluOp op) {
  registry.add_kernel(KernelDef{.domain = "com.microsoft", .op_type = op_type, .device = DeviceType::kCpu,
                                .dtypes = kGeluDtypes, .type_input = 0, .since_version = 1,
                                .create = [op](const Node& node) { return std::make_unique<GeluKernel>(op, node); }});
}

// ONNX Gelu picks its form from the `approximate` attribute (checked by the schema).
std::unique_ptr<OpKernel> create_onnx_gelu(const Node& node) {
  const GeluOp op = node.attrs.get_string("approximate", "none") == "tanh" ? GeluOp::kTanh : GeluOp::kErf;
  return std::make_unique<GeluKernel>(op, node);
}

}  // namespace

void register_activation_cpu_kernels(OpRegistry& registry) {
  add_gelu(registry, "FastGelu", GeluOp::kTanh);
  add_gelu(registry, "BiasGelu", GeluOp::kErf);
  add_gelu(registry, "QuickGelu", GeluOp::kQuick);
  registry.add_kernel(KernelDef{.domain = "", .op_type = "Gelu", .device = DeviceType::kCpu, .dtypes = kGeluDtypes,
                                .type_input = 0, .since_version = 20, .create = create_onnx_gelu});
}

}  // namespace onnx_genai
