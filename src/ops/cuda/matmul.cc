// MatMul and Gemm on CUDA (f32 / f16 / bf16) through cuBLASLt (ops/cuda/matmul_kernels.h), with
// the CPU kernels' semantics and messages (ops/cpu/matmul.cc): numpy matmul broadcasting for
// MatMul; transposes, alpha, beta and a broadcast C for Gemm. Everything is planned in prepare
// (the product's calls, cuBLASLt's descriptors and algorithm); run() only enqueues on ctx.stream,
// so it can be recorded in a CUDA graph.
//
// MatMul's batch dims become calls of strided-batched products: the broadcast batch shape is
// walked as coalesced dims (ops/broadcast.h), each row of the walk is one call whose products
// step A and B by a fixed stride (0 where one side is broadcast). So
//   [B, S, K] x [K, N]              one product, M = B * S (A's batches stacked: B read once)
//   [B, H, S, K] x [B, H, K, N]     one call of B * H products
//   [B, H, S, K] x [1, H, K, N]     B calls of H products (B matrix h reused across the outer B)
// and a call whose B stays fixed while A's matrices are contiguous stacks them into one product.
#include <memory>
#include <string>
#include <vector>

#include "ops/broadcast.h"
#include "ops/cuda/matmul_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/gemm_params.h"

namespace onnx_genai {

namespace {

class CudaProductKernel : public OpKernel {
 protected:
  // Plans `problem`; the message of a failure names the node.
  Status plan(PrepareContext& ctx, const cuda::GemmProblem& problem) {
    Result<std::unique_ptr<cuda::CublasLtGemm>> planned = cuda::CublasLtGemm::plan(problem);
    if (!planned.is_ok()) return ctx.fail(planned.status().message());
    gemm_ = std::move(planned).value();
    ctx.workspace_bytes = gemm_->workspace_bytes();
    return Status::ok();
  }

  Status run_product(const KernelContext& ctx) const {
    return gemm_->run(ctx.input(0).data, ctx.input(1).data, ctx.output(0).data, ctx.workspace, ctx.stream);
  }

 private:
  std::unique_ptr<cuda::CublasLtGemm> gemm_;
};

class MatMulCudaKernel final : public CudaProductKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& a = ctx.input(0).shape;
    const Shape& b = ctx.input(1).shape;
    if (a.rank() < 1 || b.rank() < 1) return ctx.fail("inputs must have rank >= 1");
    cuda::GemmProblem p;
    p.dtype = ctx.input(0).dtype;
    // numpy matmul: a 1-D A is a row [1, K], a 1-D B a column [K, 1].
    p.m = a.rank() >= 2 ? a[a.rank() - 2] : 1;
    p.k = a[a.rank() - 1];
    p.n = b.rank() >= 2 ? b[b.rank() - 1] : 1;
    if ((b.rank() >= 2 ? b[b.rank() - 2] : b[0]) != p.k) return ctx.fail("inner dimensions differ");
    if (ctx.input(1).dtype != p.dtype) return ctx.fail("A and B dtypes differ");
    const Shape batches[] = {Shape(std::vector<int64_t>(a.dims().begin(), a.dims().end() - std::min(a.rank(), 2))),
                             Shape(std::vector<int64_t>(b.dims().begin(), b.dims().end() - std::min(b.rank(), 2)))};
    Result<Shape> batch = broadcast_shapes(batches);
    if (!batch.is_ok()) return ctx.fail("batch dimensions do not broadcast: ", a.to_string(), " x ", b.to_string());
    const BroadcastPlan walk = BroadcastPlan::make(batch.value(), batches);
    const int64_t a_step = walk.strides[0].back(), b_step = walk.strides[1].back();  // 1, or 0: broadcast
    p.batch = walk.inner();
    p.a_stride = a_step * p.m * p.k;
    p.b_stride = b_step * p.k * p.n;
    p.a_offsets.clear();
    p.b_offsets.clear();
    walk.for_each_row(0, walk.rows(), [&](int64_t, const auto& offsets) {
      p.a_offsets.push_back(offsets[0] * p.m * p.k);
      p.b_offsets.push_back(offsets[1] * p.k * p.n);
    });
    if (b_step == 0 && a_step == 1) {
      // One B for the call's contiguous A matrices: they are the rows of one taller A.
      p.m *= p.batch;
      p.batch = 1;
      p.a_stride = 0;
    }
    return plan(ctx, p);
  }

  Status run(const KernelContext& ctx) const override { return run_product(ctx); }
};

class GemmCudaKernel final : public CudaProductKernel {
 public:
  explicit GemmCudaKernel(const Node& node) : gemm_(node) {}

  Status prepare(PrepareContext& ctx) override {
    OG_RETURN_IF_ERROR(gemm_.resolve(ctx));
    cuda::GemmProblem p;
    p.dtype = ctx.input(0).dtype;
    p.m = gemm_.m;
    p.k = gemm_.k;
    p.n = gemm_.n;
    p.trans_a = gemm_.trans_a;
    p.trans_b = gemm_.trans_b;
    p.alpha = gemm_.alpha;
    has_addend_ = gemm_.has_c;
    if (has_addend_) {
      // Y starts as C broadcast and the product adds to it; with K == 0 there is no product and
      // the copy applies beta itself.
      addend_scale_ = p.k == 0 ? gemm_.beta : 1.0f;
      p.beta = p.k == 0 ? 1.0f : gemm_.beta;
    }
    // The CPU kernel's order of checks: shapes first, then dtypes.
    if (ctx.input(1).dtype != p.dtype) return ctx.fail("A and B dtypes differ");
    if (has_addend_ && ctx.input(2).dtype != p.dtype) return ctx.fail("A and C dtypes differ");
    return plan(ctx, p);
  }

  Status run(const KernelContext& ctx) const override {
    if (has_addend_) {
      OG_RETURN_IF_ERROR(cuda::launch_broadcast_addend(ctx.input(2).dtype, gemm_.m, gemm_.n, ctx.input(2).data,
                                                       gemm_.c_row_stride, gemm_.c_col_stride, addend_scale_,
                                                       ctx.output(0).data, ctx.stream));
    }
    return run_product(ctx);
  }

 private:
  GemmParams gemm_;
  bool has_addend_ = false;
  float addend_scale_ = 1.0f;
};

}  // namespace

void register_matmul_cuda_kernels(OpRegistry& registry) {
  const std::vector<DType> dtypes{DType::kF32, DType::kF16, DType::kBF16};
  registry.add_kernel(KernelDef{.domain = "", .op_type = "MatMul", .device = DeviceType::kCuda, .dtypes = dtypes,
                                .since_version = 1,
                                .create = [](const Node&) -> std::unique_ptr<OpKernel> {
                                  return std::make_unique<MatMulCudaKernel>();
                                }});
  registry.add_kernel(KernelDef{.domain = "", .op_type = "Gemm", .device = DeviceType::kCuda, .dtypes = dtypes,
                                .since_version = 7,
                                .create = [](const Node& node) -> std::unique_ptr<OpKernel> {
                                  return std::make_unique<GemmCudaKernel>(node);
                                }});
}

}  // namespace onnx_genai
