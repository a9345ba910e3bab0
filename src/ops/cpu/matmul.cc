// MatMul and Gemm on the CPU. Both reduce, at prepare, to one batched product
//   Y[b] = alpha * A[b] B[b] + beta * C      (A[b] = [M, K], B[b] = [K, N], through strides)
// that the blocked GEMM driver (gemm_driver.h) runs for f32/f16/bf16. Constant weights B are
// packed into the driver's panel layout once, here. f64 and integer types take a plain loop.
#include <algorithm>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/thread_pool.h"
#include "ops/broadcast.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/gemm_driver.h"
#include "ops/op.h"
#include "ops/schema/gemm_params.h"

namespace onnx_genai {

namespace {

bool is_gemm_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// The product a kernel computes, in element strides; data pointers are filled per run.
struct GemmLayout {
  GemmShape shape;
  GemmOperand a, b, bias;           // data pointers stay null; the run fills them
  bool has_bias = false;
  std::vector<int64_t> a_offsets;   // per batch, elements into A
  std::vector<int64_t> b_matrices;  // per batch, index of the B matrix
  int64_t b_matrix_elems = 0;       // elements from one B matrix to the next
  float alpha = 1.0f;
  float beta = 0.0f;
};

// Plain loops for f64 and integers. Integers accumulate in 64-bit unsigned arithmetic so
// overflow wraps as in numpy instead of being undefined.
template <typename T>
void simple_gemm(const GemmLayout& l, const T* a, const T* b, const T* bias, T* c) {
  using Acc = std::conditional_t<std::is_integral_v<T>, uint64_t, T>;
  const auto [batch, m, n, k] = l.shape;
  const bool scaled = l.alpha != 1.0f || bias != nullptr;
  for (int64_t bi = 0; bi < batch; ++bi) {
    const T* ab = a + l.a_offsets[static_cast<size_t>(bi)];
    const T* bb = b + l.b_matrices[static_cast<size_t>(bi)] * l.b_matrix_elems;
    for (int64_t i = 0; i < m; ++i) {
      T* row = c + (bi * m + i) * n;
      for (int64_t j = 0; j < n; ++j) {
        Acc acc{};
        for (int64_t p = 0; p < k; ++p) {
          acc += static_cast<Acc>(ab[i * l.a.rs + p * l.a.cs]) * static_cast<Acc>(bb[p * l.b.rs + j * l.b.cs]);
        }
        if (scaled) {
          double v = static_cast<double>(l.alpha) * static_cast<double>(static_cast<T>(acc));
          if (bias != nullptr) v += static_cast<double>(l.beta) * static_cast<double>(bias[i * l.bias.rs + j * l.bias.cs]);
          row[j] = static_cast<T>(v);
        } else {
          row[j] = static_cast<T>(acc);
        }
      }
    }
  }
}

// Shared by MatMul and Gemm: everything shape-dependent is decided in prepare_layout.
class GemmKernelBase : public OpKernel {
 public:
  Status run(const KernelContext& ctx) const override {
    const void* bias = layout_.has_bias ? ctx.input(2).data : nullptr;
    if (!is_gemm_float(dtype_)) {
      return dispatch_dtype<double, int32_t, int64_t, uint32_t, uint64_t>(dtype_, [&]<typename T>() {
        simple_gemm<T>(layout_, ctx.input(0).ptr<T>(), ctx.input(1).ptr<T>(), static_cast<const T*>(bias),
                       ctx.output(0).ptr<T>());
        return Status::ok();
      });
    }
    GemmArgs args;
    args.a = layout_.a;
    args.a.data = ctx.input(0).data;
    args.b = layout_.b;
    args.b.data = ctx.input(1).data;
    args.packed_b = packed_.get();
    args.a_offsets = layout_.a_offsets.data();
    args.b_offsets = packed_ ? layout_.b_matrices.data() : b_offsets_.data();
    args.c = ctx.output(0).data;
    args.alpha = layout_.alpha;
    args.beta = layout_.beta;
    args.bias = layout_.bias;
    args.bias.data = bias;
    plan_.run(args, ctx.workspace, ctx.pool);
    return Status::ok();
  }

 protected:
  Status prepare_layout(PrepareContext& ctx, GemmLayout layout) {
    dtype_ = ctx.input(0).dtype;
    if (ctx.input(1).dtype != dtype_) return ctx.fail("A and B dtypes differ");
    if (layout.has_bias && ctx.input(2).dtype != dtype_) return ctx.fail("A and C dtypes differ");
    layout_ = std::move(layout);
    if (!is_gemm_float(dtype_)) return Status::ok();
    const GemmShape& s = layout_.shape;
    const GemmIsa isa = gemm_isa();
    packed_.reset();
    if (const Tensor* b = ctx.value(1); b != nullptr && s.m * s.n * s.k > 0) {
      // Constant weights: pack every distinct B matrix once.
      GemmOperand operand = layout_.b;
      operand.data = b->raw();
      const int64_t count = *std::max_element(layout_.b_matrices.begin(), layout_.b_matrices.end()) + 1;
      const auto pack = [&] { return GemmPackedB::pack(isa, operand, s.k, s.n, count, layout_.b_matrix_elems); };
      if (const Value* weights = ctx.node.input(1); weights != nullptr && weights->is_constant()) {
        // An initializer: the same bytes in every plan, so plans share one packing.
        const std::string key = "packed_b isa" + std::to_string(static_cast<int>(isa)) + " " + std::to_string(s.k) +
                                "x" + std::to_string(s.n) + " x" + std::to_string(count) + " stride" +
                                std::to_string(layout_.b_matrix_elems) + " rs" + std::to_string(operand.rs) + " cs" +
                                std::to_string(operand.cs);
        OG_ASSIGN_OR_RETURN(packed_, ctx.constant<GemmPackedB>(key, pack));
      } else {
        OG_ASSIGN_OR_RETURN(GemmPackedB packed, pack());
        packed_ = std::make_shared<const GemmPackedB>(std::move(packed));
      }
    }
    b_offsets_.clear();
    for (int64_t mat : layout_.b_matrices) b_offsets_.push_back(mat * layout_.b_matrix_elems);
    const int threads = ctx.pool != nullptr ? ctx.pool->num_threads() : 1;
    const bool epilogue = layout_.alpha != 1.0f || layout_.has_bias;
    plan_ = GemmPlan::make(isa, s, dtype_, packed_ != nullptr, layout_.b.cs == 1, epilogue, threads);
    ctx.workspace_bytes = plan_.workspace_bytes();
    return Status::ok();
  }

 private:
  DType dtype_ = DType::kUndefined;
  GemmLayout layout_;
  std::shared_ptr<const GemmPackedB> packed_;  // shared by the session's plans
  std::vector<int64_t> b_offsets_;
  GemmPlan plan_;
};

class MatMulKernel final : public GemmKernelBase {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& a = ctx.input(0).shape;
    const Shape& b = ctx.input(1).shape;
    if (a.rank() < 1 || b.rank() < 1) return ctx.fail("inputs must have rank >= 1");
    GemmLayout l;
    const int64_t m = a.rank() >= 2 ? a[a.rank() - 2] : 1;
    const int64_t k = a[a.rank() - 1];
    const int64_t n = b.rank() >= 2 ? b[b.rank() - 1] : 1;
    if ((b.rank() >= 2 ? b[b.rank() - 2] : b[0]) != k) return ctx.fail("inner dimensions differ");
    const Shape batch_a(std::vector<int64_t>(a.dims().begin(), a.dims().end() - std::min(a.rank(), 2)));
    const Shape batch_b(std::vector<int64_t>(b.dims().begin(), b.dims().end() - std::min(b.rank(), 2)));
    l.a = {nullptr, ctx.input(0).dtype, k, 1};
    l.b = {nullptr, ctx.input(1).dtype, n, 1};
    l.b_matrix_elems = k * n;
    if (batch_b.numel() == 1) {
      // One B for every batch: fold A's batch dims into M (one big GEMM, B streamed once).
      l.shape = {1, batch_a.numel() * m, n, k};
      l.a_offsets = {0};
      l.b_matrices = {0};
      return prepare_layout(ctx, std::move(l));
    }
    const Shape batches[] = {batch_a, batch_b};
    OG_ASSIGN_OR_RETURN(Shape batch, broadcast_shapes(batches));
    l.shape = {batch.numel(), m, n, k};
    const BroadcastPlan walk = BroadcastPlan::make(batch, batches);
    // Each row of the coalesced walk is a run of batches; offsets advance by the last stride.
    walk.for_each_row(0, walk.rows(), [&](int64_t, const auto& offsets) {
      for (int64_t i = 0; i < walk.inner(); ++i) {
        l.a_offsets.push_back((offsets[0] + i * walk.strides[0].back()) * m * k);
        l.b_matrices.push_back(offsets[1] + i * walk.strides[1].back());
      }
    });
    return prepare_layout(ctx, std::move(l));
  }
};

class GemmKernel final : public GemmKernelBase {
 public:
  explicit GemmKernel(const Node& node) : params_(node) {}

  Status prepare(PrepareContext& ctx) override {
    GemmParams& p = params_;
    OG_RETURN_IF_ERROR(p.resolve(ctx));
    GemmLayout l;
    l.shape = {1, p.m, p.n, p.k};
    // A stored [K, M] when transposed: element (i, p) at p*M + i.
    const DType a = ctx.input(0).dtype, b = ctx.input(1).dtype;
    l.a = p.trans_a ? GemmOperand{nullptr, a, 1, p.m} : GemmOperand{nullptr, a, p.k, 1};
    l.b = p.trans_b ? GemmOperand{nullptr, b, 1, p.k} : GemmOperand{nullptr, b, p.n, 1};
    l.a_offsets = {0};
    l.b_matrices = {0};
    l.b_matrix_elems = p.k * p.n;
    l.alpha = p.alpha;
    l.beta = p.beta;
    if (p.has_c) {
      l.bias = {nullptr, ctx.input(2).dtype, p.c_row_stride, p.c_col_stride};
      l.has_bias = true;
    }
    return prepare_layout(ctx, std::move(l));
  }

 private:
  GemmParams params_;
};

const std::vector<DType>& matmul_dtypes() {
  static const std::vector<DType> v{DType::kF32, DType::kF16, DType::kBF16, DType::kF64,
                                    DType::kI32, DType::kI64, DType::kU32, DType::kU64};
  return v;
}

}  // namespace

void register_matmul_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = "", .op_type = "MatMul", .device = DeviceType::kCpu,
                                .dtypes = matmul_dtypes(), .type_input = 0, .since_version = 1,
                                .create = [](const Node&) { return std::make_unique<MatMulKernel>(); }});
  registry.add_kernel(KernelDef{.domain = "", .op_type = "Gemm", .device = DeviceType::kCpu,
                                .dtypes = matmul_dtypes(), .type_input = 0, .since_version = 7,
                                .create = [](const Node& node) { return std::make_unique<GemmKernel>(node); }});
}

}  // namespace onnx_genai
