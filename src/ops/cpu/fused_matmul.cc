// onnx_genai MatMulNBitsSwiGLU on the CPU, the reference for the device kernels (contract in
// ops/schema/fused_matmul.h). The CPU MatMulNBits kernel computes the 2N interleaved columns into
// the workspace in A's dtype, rounding them as the unfused graph does; then each output is
// silu(gate) * up of one column pair, in f32, rounded once.
#include <cmath>

#include "core/thread_pool.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/quantized_matmul.h"
#include "ops/op.h"
#include "ops/schema/fused_matmul.h"

namespace onnx_genai {

namespace {

constexpr size_t kWorkspaceAlign = 64;  // the MatMulNBits kernel's own workspace starts aligned

class MatMulNBitsSwiGLUKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(MatMulNBitsSwiGLUParams p, MatMulNBitsSwiGLUParams::make(ctx.node, ctx.inputs));
    dtype_ = ctx.input(MatMulNBitsParams::kA).dtype;
    m_ = ctx.input(MatMulNBitsParams::kA).shape.numel() / p.matmul.k;
    n_ = p.n;
    columns_ = TensorInfo{dtype_, Shape{m_, 2 * n_}};
    // Prepared constants are keyed by node: the interleaved node is a temporary, so none.
    const Node interleaved = MatMulNBitsSwiGLUParams::interleaved_matmul(ctx.node);
    PrepareContext inner{interleaved, ctx.inputs, ctx.input_values, {&columns_}, 0, ctx.pool, nullptr};
    OG_RETURN_IF_ERROR(matmul_->prepare(inner));
    const auto bytes = static_cast<size_t>(dtype_storage_bytes(dtype_, m_ * 2 * n_));
    columns_bytes_ = (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
    ctx.workspace_bytes = columns_bytes_ + inner.workspace_bytes;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    auto* columns = static_cast<char*>(ctx.workspace);
    const KernelTensor columns_tensor{dtype_, &columns_.shape, columns};
    const KernelContext inner{ctx.inputs, {&columns_tensor, 1}, columns + columns_bytes_, ctx.pool, ctx.stream};
    OG_RETURN_IF_ERROR(matmul_->run(inner));
    return dispatch_dtype<float, Float16, BFloat16>(dtype_, [&]<typename T>() {
      swiglu(static_cast<const T*>(static_cast<void*>(columns)), ctx.output(0).ptr<T>(), ctx.pool);
      return Status::ok();
    });
  }

 private:
  // y[i] = silu(columns[2i]) * columns[2i + 1], row after row (outputs are [M, N], columns [M, 2N]).
  template <typename T>
  void swiglu(const T* columns, T* y, ThreadPool* pool) const {
    parallel_for(pool, m_ * n_, 1 << 14, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const float gate = load(columns[2 * i]), up = load(columns[2 * i + 1]);
        y[i] = store<T>(gate / (1.0f + std::exp(-gate)) * up);
      }
    });
  }

  std::unique_ptr<OpKernel> matmul_ = make_matmul_nbits_cpu_kernel();
  DType dtype_ = DType::kUndefined;
  int64_t m_ = 0, n_ = 0;
  TensorInfo columns_;  // the interleaved [M, 2N] gate and up columns, in the workspace
  size_t columns_bytes_ = 0;
};

}  // namespace

void register_fused_matmul_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = MatMulNBitsSwiGLUParams::kDomain,
                                .op_type = MatMulNBitsSwiGLUParams::kOpType, .device = DeviceType::kCpu,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [](const Node&) { return std::make_unique<MatMulNBitsSwiGLUKernel>(); }});
}

}  // namespace onnx_genai
