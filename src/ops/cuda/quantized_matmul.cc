// com.microsoft MatMulNBits, onnx_genai MatMulNBitsSwiGLU and onnx_genai RmsNormMatMulNBits
// (ops/schema/fused_matmul.h) on CUDA, 4- and 8-bit weights: the same parameters, validation and
// semantics as the CPU kernels (the schema headers), computed with f32 accumulation whatever
// accuracy_level says (the CPU's int8 path at accuracy_level 4 is an approximation of this). The
// kernel and its split of the work are planned here, from the shapes; run() only launches.
//
// Batched steps of 16 rows and more with 4-bit weights take the tiled int4 GEMM (int4_gemm.h)
// where it supports the node and its rule (int4_gemm_pays, from measurements) says it is the
// fastest: from a copy of the weights reordered once per session (PreparedConstants), made here.
//
// Up to kMaxGemvRows rows (decode, a speculative verify) the GEMV kernels (4-bit:
// quantized_matmul_kernels.h, 8-bit: quantized_matmul8_kernels.h) read each weight once for all
// rows, and so does the 4-bit tensor-core kernel up to kMaxTensorCoreRows where it runs (f16 /
// bf16, no float zero points); MatMulNBitsSwiGLU's gate / up pairs meet in their epilogue, so a
// decoder MLP's gate, up and activation are one launch. Past that (a prompt) the product is dense
// (dequantized_matmul.h: weights dequantised into the workspace, cuBLASLt's tensor cores), and
// MatMulNBitsSwiGLU's epilogue runs on its own over the product's interleaved columns.
//
// RmsNormMatMulNBits: where the tensor-core GEMV runs and the normalised rows fit
// kNormPrologueBytes (one or two decode rows), the GEMV normalises them in its prologue, one
// launch for the norm and the product. Elsewhere (more rows, the CUDA-core kernel, the dense path,
// pointers the tensor-core kernel cannot read) the RMS norm kernel writes them into the workspace
// first, and the product reads them there.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ops/cuda/dequantized_matmul.h"
#include "ops/cuda/int4_gemm.h"
#include "ops/cuda/normalization_kernels.h"
#include "ops/cuda/quantized_matmul8_kernels.h"
#include "ops/cuda/quantized_matmul_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/fused_matmul.h"
#include "ops/schema/quantized_matmul.h"

namespace onnx_genai {

namespace {

using P = MatMulNBitsParams;
using cuda::MatMulNBits4Epilogue;

constexpr size_t kWorkspaceAlignment = 256;

size_t align_up(size_t bytes) { return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment; }

// The product of a node built on MatMulNBits, planned from the shapes: the GEMV (with the
// epilogue, and the norm prologue where asked for and possible) or the dense path.
class PlannedProduct {
 public:
  // `p`: the product's parameters (MatMulNBitsSwiGLU: of its interleaved columns); MatMulNBits
  // input i >= 1 (B, scales, ...) is the node's input weights + i - 1; `m` activation rows.
  Status plan(PrepareContext& ctx, const MatMulNBitsParams& p, int weights, int64_t m, MatMulNBits4Epilogue epilogue,
              bool norm_prologue) {
    if (p.bits != 4 && p.bits != 8) return ctx.fail("no CUDA kernel for ", p.bits, "-bit weights");
    weights_ = weights;
    args_.dtype = ctx.input(0).dtype;
    args_.m = m;
    args_.n = p.n;  // MatMulNBitsSwiGLU: the interleaved columns, twice the output width
    args_.k = p.k;
    args_.block_size = p.block_size;
    args_.blocks = p.blocks;
    args_.packed_zero_points = p.has_zp && p.zp_packed;
    args_.float_zero_points = p.has_zp && !p.zp_packed;
    has_bias_ = p.has_bias;
    bits_ = static_cast<int>(p.bits);
    const auto constant = [&](int input) { return ctx.value(weight(input)) != nullptr; };
    args_.constant_weights = constant(P::kB) && constant(P::kScales) && (!p.has_zp || constant(P::kZeroPoints)) &&
                             (!p.has_bias || constant(P::kBias));
    // Past kMaxGemvRows only the 4-bit planner has a kernel (up to kMaxTensorCoreRows, where it
    // pays); it declines the rest.
    const bool many_rows = args_.m > cuda::kMaxGemvRows;
    OG_ASSIGN_OR_RETURN(const bool tiled, plan_int4_gemm(ctx, p, epilogue));
    if (tiled) return Status::ok();
    if (many_rows && bits_ == 8) return plan_dense(ctx, epilogue);
    cuda::MatMulNBits4Args gemv = args_;
    gemv.epilogue = epilogue;
    gemv.norm_prologue = norm_prologue;
    Status planned = bits_ == 8 ? cuda::plan_matmul_nbits8(gemv) : cuda::plan_matmul_nbits4(gemv);
    if (!planned.is_ok()) return ctx.fail(planned.message());
    // Many rows on the CUDA-core kernel would stream B once per 8 rows: the dense path beats it.
    if (many_rows && !gemv.tensor_core) return plan_dense(ctx, epilogue);
    args_ = gemv;
    workspace_bytes_ = args_.workspace_bytes;
    return Status::ok();
  }

  size_t workspace_bytes() const { return workspace_bytes_; }
  // Whether the plan kept the norm prologue (the GEMV planned, the rows within budget).
  bool norm_prologue() const { return args_.norm_prologue; }

  // The planned arguments with the run's pointers: activations `a` (null with the prologue), y.
  cuda::MatMulNBits4Args bind(const KernelContext& ctx, const void* a, void* y) const {
    cuda::MatMulNBits4Args bound = args_;
    bound.a = a;
    bound.b = ctx.input(weight(P::kB)).ptr<const uint8_t>();
    bound.scales = ctx.input(weight(P::kScales)).data;
    if (bound.packed_zero_points) bound.zp_packed = ctx.input(weight(P::kZeroPoints)).ptr<const uint8_t>();
    if (bound.float_zero_points) bound.zp_float = ctx.input(weight(P::kZeroPoints)).data;
    if (has_bias_) bound.bias = ctx.input(weight(P::kBias)).data;
    bound.y = y;
    return bound;
  }

  // Whether the planned GEMV runs with the prologue on `a`'s pointers.
  bool prologue_runs(const cuda::MatMulNBits4Args& a) const {
    return !dense_ && (bits_ == 8 ? cuda::matmul_nbits8_runs_tensor_core(a) : cuda::matmul_nbits4_runs_tensor_core(a));
  }

  Status run(const cuda::MatMulNBits4Args& a, void* workspace, void* stream) const {
    if (int4_weights_ != nullptr && a.norm_prologue == false && reinterpret_cast<uintptr_t>(a.a) % 16 == 0) {
      return run_int4_gemm(a, workspace, stream);
    }
    if (!dense_) {
      cuda::MatMulNBits4Args with_workspace = a;
      with_workspace.workspace = workspace;
      return bits_ == 8 ? cuda::launch_matmul_nbits8(with_workspace, stream)
                        : cuda::launch_matmul_nbits4(with_workspace, stream);
    }
    if (!swiglu_apart_) return dense_->run(a, workspace, stream);
    cuda::MatMulNBits4Args product = a;
    product.y = static_cast<char*>(workspace) + columns_at_;
    OG_RETURN_IF_ERROR(dense_->run(product, workspace, stream));
    return cuda::launch_swiglu_pairs(a.dtype, a.m, a.n / 2, product.y, a.y, stream);
  }

 private:
  int weight(int input) const { return weights_ + input - 1; }

  // The dense product's workspace; with the SwiGLU epilogue, the product's columns [m, n] after it.
  Status plan_dense(PrepareContext& ctx, MatMulNBits4Epilogue epilogue) {
    Result<cuda::DequantizedMatMul> planned = cuda::DequantizedMatMul::plan(args_, bits_, has_bias_);
    if (!planned.is_ok()) return ctx.fail(planned.status().message());
    dense_.emplace(std::move(planned).value());
    workspace_bytes_ = dense_->workspace_bytes();
    swiglu_apart_ = epilogue == MatMulNBits4Epilogue::kSwiGLU;
    if (swiglu_apart_) {
      columns_at_ = align_up(workspace_bytes_);
      workspace_bytes_ = columns_at_ + static_cast<size_t>(dtype_storage_bytes(args_.dtype, args_.m * args_.n));
    }
    return Status::ok();
  }

  // The tiled int4 GEMM where the choice or its rule asks for it and it supports the node (its
  // constant weights reordered, or found reordered by an earlier plan); args_ then keeps a
  // CUDA-core plan for activations it cannot load (not 16-byte aligned). Returns whether it did.
  Result<bool> plan_int4_gemm(PrepareContext& ctx, const MatMulNBitsParams& p, MatMulNBits4Epilogue epilogue) {
    const cuda::MatMulNBits4Choice choice = cuda::matmul_nbits4_choice();
    const bool asked = choice.kernel == cuda::MatMulNBits4Kernel::kInt4Gemm ||
                       (choice.kernel == cuda::MatMulNBits4Kernel::kAuto && cuda::int4_gemm_pays(args_.m, args_.n, args_.k));
    const Tensor* b = ctx.value(weight(P::kB));
    const Tensor* scales = ctx.value(weight(P::kScales));
    const Tensor* zero_points = p.has_zp ? ctx.value(weight(P::kZeroPoints)) : nullptr;
    if (!asked || b == nullptr || scales == nullptr || (p.has_zp && zero_points == nullptr) ||
        !cuda::int4_gemm_supports(args_.dtype, args_.n, args_.k, args_.block_size, bits_, args_.float_zero_points)
             .is_ok()) {
      return false;
    }
    const auto pack = [&] {
      return cuda::pack_int4_gemm_weights(args_.dtype, args_.n, args_.k, args_.block_size, b->data<uint8_t>(),
                                          scales->raw(), zero_points != nullptr ? zero_points->data<uint8_t>() : nullptr);
    };
    // A copy that cannot be made (device memory short: it is not yet part of the session's memory
    // plan) or planned leaves the node on the paths that read the initializers.
    auto packed = ctx.constant<cuda::Int4GemmWeights>("int4_gemm " + std::string(dtype_name(args_.dtype)), pack);
    if (!packed.is_ok()) return false;
    auto planned = cuda::plan_int4_gemm(**packed, args_.m, choice.int4_gemm_tile, choice.block_k_splits);
    if (!planned.is_ok()) return false;
    int4_weights_ = std::move(packed).value();
    int4_plan_ = *planned;
    cuda::MatMulNBits4Args fallback = args_;
    fallback.epilogue = epilogue;
    OG_RETURN_IF_ERROR(cuda::plan_matmul_nbits4(fallback, {cuda::MatMulNBits4Kernel::kCudaCore, 0}));
    args_ = fallback;
    workspace_bytes_ = int4_plan_.workspace_bytes;
    swiglu_apart_ = epilogue == MatMulNBits4Epilogue::kSwiGLU;
    if (swiglu_apart_) {
      columns_at_ = align_up(std::max(workspace_bytes_, args_.workspace_bytes));
      workspace_bytes_ = columns_at_ + static_cast<size_t>(dtype_storage_bytes(args_.dtype, args_.m * args_.n));
    }
    workspace_bytes_ = std::max(workspace_bytes_, args_.workspace_bytes);
    return true;
  }

  // The int4 GEMM's product (+ bias), into y or, with the SwiGLU epilogue, into the workspace's
  // columns and then through the epilogue kernel.
  Status run_int4_gemm(const cuda::MatMulNBits4Args& a, void* workspace, void* stream) const {
    void* columns = swiglu_apart_ ? static_cast<char*>(workspace) + columns_at_ : a.y;
    OG_RETURN_IF_ERROR(cuda::launch_int4_gemm(int4_plan_, *int4_weights_, a.a, a.bias, columns, workspace, stream));
    if (!swiglu_apart_) return Status::ok();
    return cuda::launch_swiglu_pairs(a.dtype, a.m, a.n / 2, columns, a.y, stream);
  }

  cuda::MatMulNBits4Args args_;
  std::shared_ptr<const cuda::Int4GemmWeights> int4_weights_;  // null: not planned
  cuda::Int4GemmPlan int4_plan_;
  std::optional<cuda::DequantizedMatMul> dense_;  // past kMaxGemvRows rows
  bool swiglu_apart_ = false;                     // the dense product's SwiGLU, launched after it
  size_t workspace_bytes_ = 0, columns_at_ = 0;
  int weights_ = 1;
  bool has_bias_ = false;
  int bits_ = 4;  // of the codes: 4 or 8 (plan() declines 2-bit weights)
};

template <MatMulNBits4Epilogue kEpilogue>
class MatMulNBitsCudaKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const MatMulNBitsParams p, params(ctx));
    OG_RETURN_IF_ERROR(product_.plan(ctx, p, P::kB, ctx.input(P::kA).shape.numel() / p.k, kEpilogue, false));
    ctx.workspace_bytes = product_.workspace_bytes();
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return product_.run(product_.bind(ctx, ctx.input(P::kA).data, ctx.output(0).data), ctx.workspace, ctx.stream);
  }

 private:
  static Result<MatMulNBitsParams> params(const PrepareContext& ctx) {
    if constexpr (kEpilogue == MatMulNBits4Epilogue::kNone) {
      return MatMulNBitsParams::make(ctx.node, ctx.inputs);
    } else {
      OG_ASSIGN_OR_RETURN(MatMulNBitsSwiGLUParams fused, MatMulNBitsSwiGLUParams::make(ctx.node, ctx.inputs));
      return fused.matmul;
    }
  }

  PlannedProduct product_;
};

// RmsNormMatMulNBits: the GEMV's norm prologue where it runs, else the norm kernel into the
// workspace (the normalised rows, reserved either way: a few KiB at decode) and the product.
class RmsNormMatMulNBitsCudaKernel final : public OpKernel {
 public:
  using F = RmsNormMatMulNBitsParams;

  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const F p, F::make(ctx.node, ctx.inputs));
    norm_.dtype = ctx.input(F::kX).dtype;
    norm_.rows = p.rows;
    norm_.len = p.matmul.k;
    norm_.skip_rows = std::max<int64_t>(p.skip_rows, 1);
    norm_.scale_period = norm_.bias_period = p.matmul.k;
    norm_.epsilon = p.epsilon;
    const auto epilogue = p.swiglu ? MatMulNBits4Epilogue::kSwiGLU : MatMulNBits4Epilogue::kNone;
    // The prologue reads skip row m for row m: a skip repeating over batch rows normalises apart.
    OG_RETURN_IF_ERROR(product_.plan(ctx, p.matmul, F::kB, p.rows, epilogue, p.skip_rows == p.rows));
    normalised_bytes_ = align_up(static_cast<size_t>(dtype_storage_bytes(norm_.dtype, p.rows * p.matmul.k)));
    ctx.workspace_bytes = normalised_bytes_ + product_.workspace_bytes();
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    void* normalised = ctx.workspace;
    void* scratch = static_cast<char*>(ctx.workspace) + normalised_bytes_;
    void* sum = ctx.outputs.size() > size_t{F::kSum} ? ctx.output(F::kSum).data : nullptr;
    const void* skip = ctx.has_input(F::kSkip) ? ctx.input(F::kSkip).data : nullptr;
    if (product_.norm_prologue()) {
      cuda::MatMulNBits4Args fused = product_.bind(ctx, nullptr, ctx.output(F::kY).data);
      fused.norm_x = ctx.input(F::kX).data;
      fused.norm_skip = skip;
      fused.norm_gamma = ctx.input(F::kGamma).data;
      fused.norm_sum = sum;
      fused.norm_epsilon = norm_.epsilon;
      if (product_.prologue_runs(fused)) return product_.run(fused, scratch, ctx.stream);
    }
    cuda::RmsNormArgs norm = norm_;
    norm.x = ctx.input(F::kX).data;
    norm.skip = skip;
    norm.scale = ctx.input(F::kGamma).data;
    norm.y = normalised;
    norm.sum = sum;
    OG_RETURN_IF_ERROR(cuda::launch_rms_norm(norm, ctx.stream));
    cuda::MatMulNBits4Args apart = product_.bind(ctx, normalised, ctx.output(F::kY).data);
    apart.norm_prologue = false;
    return product_.run(apart, scratch, ctx.stream);
  }

 private:
  cuda::RmsNormArgs norm_;
  PlannedProduct product_;
  size_t normalised_bytes_ = 0;
};

template <typename Kernel>
KernelDef kernel_def(const char* domain, const char* op_type) {
  return KernelDef{.domain = domain, .op_type = op_type, .device = DeviceType::kCuda,
                   .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                   .create = [](const Node&) -> std::unique_ptr<OpKernel> { return std::make_unique<Kernel>(); }};
}

}  // namespace

void register_quantized_matmul_cuda_kernels(OpRegistry& registry) {
  registry.add_kernel(kernel_def<MatMulNBitsCudaKernel<MatMulNBits4Epilogue::kNone>>("com.microsoft", "MatMulNBits"));
  registry.add_kernel(kernel_def<MatMulNBitsCudaKernel<MatMulNBits4Epilogue::kSwiGLU>>(
      MatMulNBitsSwiGLUParams::kDomain, MatMulNBitsSwiGLUParams::kOpType));
  registry.add_kernel(kernel_def<RmsNormMatMulNBitsCudaKernel>(RmsNormMatMulNBitsParams::kDomain,
                                                               RmsNormMatMulNBitsParams::kOpType));
}

}  // namespace onnx_genai
