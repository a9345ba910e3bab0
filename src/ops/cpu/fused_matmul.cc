// onnx_genai MatMulNBitsSwiGLU on the CPU, the reference for the device kernels (contract in
// ops/schema/fused_matmul.h). The CPU MatMulNBits kernel computes the 2N interleaved columns into
// the workspace in A's dtype, rounding them as the unfused graph does; then each output is
// silu(gate) * up of one column pair, in f32, rounded once.
//
// onnx_genai RmsNormMatMulNBits on the CPU: the CPU kernels of the two nodes it stands for (the
// norm's, then MatMulNBits's or MatMulNBitsSwiGLU's, found in the registry), the normalised rows
// between them in the workspace: the unfused graph's results bit for bit.
#include <algorithm>
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

// A prepared CPU kernel of `node` (a temporary: prepared constants are keyed by node, so none).
Result<std::unique_ptr<OpKernel>> prepare_cpu_kernel(const PrepareContext& outer, const Node& node,
                                                     std::vector<const TensorInfo*> inputs,
                                                     std::vector<const Tensor*> values,
                                                     std::vector<const TensorInfo*> outputs, size_t& workspace_bytes) {
  std::vector<DType> dtypes;
  for (const TensorInfo* in : inputs) dtypes.push_back(in != nullptr ? in->dtype : DType::kUndefined);
  OG_ASSIGN_OR_RETURN(const KernelDef* def, OpRegistry::instance().find_kernel(node, DeviceType::kCpu, dtypes));
  std::unique_ptr<OpKernel> kernel = def->create(node);
  PrepareContext ctx{node, std::move(inputs), std::move(values), std::move(outputs), 0, outer.pool, nullptr};
  OG_RETURN_IF_ERROR(kernel->prepare(ctx));
  workspace_bytes = std::max(workspace_bytes, ctx.workspace_bytes);
  return kernel;
}

class RmsNormMatMulNBitsKernel final : public OpKernel {
 public:
  using P = RmsNormMatMulNBitsParams;

  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const P p, P::make(ctx.node, ctx.inputs));
    has_skip_ = p.has_skip;
    normalised_ = ctx.input(P::kX);
    const auto bytes = static_cast<size_t>(dtype_storage_bytes(normalised_.dtype, normalised_.shape.numel()));
    normalised_bytes_ = (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
    // The two run one after the other: they share the scratch after the normalised rows.
    size_t scratch = 0;
    std::vector<const TensorInfo*> norm_outputs{&normalised_};
    if (has_skip_) {
      norm_outputs = {&normalised_, nullptr, nullptr, ctx.has_output(P::kSum) ? &ctx.output(P::kSum) : nullptr};
    }
    OG_ASSIGN_OR_RETURN(norm_, prepare_cpu_kernel(ctx, P::norm_node(ctx.node),
                                                  P::norm_inputs<const TensorInfo*>(ctx.inputs, has_skip_),
                                                  P::norm_inputs<const Tensor*>(ctx.input_values, has_skip_),
                                                  norm_outputs, scratch));
    OG_ASSIGN_OR_RETURN(product_, prepare_cpu_kernel(ctx, P::product_node(ctx.node),
                                                     P::product_inputs<const TensorInfo*>(ctx.inputs, &normalised_),
                                                     P::product_inputs<const Tensor*>(ctx.input_values, nullptr),
                                                     {&ctx.output(P::kY)}, scratch));
    ctx.workspace_bytes = normalised_bytes_ + scratch;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    auto* normalised = static_cast<char*>(ctx.workspace);
    void* scratch = normalised + normalised_bytes_;
    const KernelTensor rows{normalised_.dtype, &normalised_.shape, normalised};
    std::vector<KernelTensor> norm_outputs{rows};
    if (has_skip_) {
      norm_outputs = {rows, {}, {}, ctx.outputs.size() > size_t{P::kSum} ? ctx.output(P::kSum) : KernelTensor{}};
    }
    const std::vector<KernelTensor> norm_inputs = P::norm_inputs<KernelTensor>(ctx.inputs, has_skip_);
    OG_RETURN_IF_ERROR(norm_->run(KernelContext{norm_inputs, norm_outputs, scratch, ctx.pool, ctx.stream}));
    const std::vector<KernelTensor> product_inputs = P::product_inputs<KernelTensor>(ctx.inputs, rows);
    return product_->run(KernelContext{product_inputs, ctx.outputs.first(1), scratch, ctx.pool, ctx.stream});
  }

 private:
  std::unique_ptr<OpKernel> norm_, product_;
  bool has_skip_ = false;
  TensorInfo normalised_;  // the norm's output [..., K], in the workspace
  size_t normalised_bytes_ = 0;
};

}  // namespace

void register_fused_matmul_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = MatMulNBitsSwiGLUParams::kDomain,
                                .op_type = MatMulNBitsSwiGLUParams::kOpType, .device = DeviceType::kCpu,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [](const Node&) { return std::make_unique<MatMulNBitsSwiGLUKernel>(); }});
  registry.add_kernel(KernelDef{.domain = RmsNormMatMulNBitsParams::kDomain,
                                .op_type = RmsNormMatMulNBitsParams::kOpType, .device = DeviceType::kCpu,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [](const Node&) { return std::make_unique<RmsNormMatMulNBitsKernel>(); }});
}

}  // namespace onnx_genai
