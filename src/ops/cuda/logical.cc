// CUDA kernels of the comparison and logical ops (Equal, Less, Greater, LessOrEqual,
// GreaterOrEqual, And, Or, Xor) and Where, with numpy broadcasting: the attention-mask
// arithmetic of Hugging Face-style decoder graphs. Semantics are the CPU kernels'
// (ops/cpu/binary.cc), the schemas are shared (ops/schema/binary.cc); computation is in
// ops/cuda/logical_kernels.cu. They broadcast like elementwise.cc's arithmetic but through one
// general index walk (no flat fast path): they produce bool and touch masks a few rows wide.
#include <vector>

#include "ops/broadcast.h"
#include "ops/cuda/logical_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"

namespace onnx_genai {

namespace {

using cuda::CompareOp;

// The output as merged broadcast dims, each input's strides along them.
Result<cuda::BroadcastIndex> broadcast_index(const PrepareContext& ctx) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) shapes.push_back(ctx.input(static_cast<int>(i)).shape);
  const Shape& out = ctx.output(0).shape;
  const BroadcastPlan plan = BroadcastPlan::make(out, shapes);
  if (plan.dims.size() > static_cast<size_t>(cuda::kMaxLogicalRank)) {
    return ctx.fail("broadcast spans ", plan.dims.size(), " dims after merging; the CUDA kernel indexes at most ",
                    cuda::kMaxLogicalRank);
  }
  cuda::BroadcastIndex index;
  index.n = out.numel();
  index.rank = static_cast<int>(plan.dims.size());
  for (int d = 0; d < index.rank; ++d) {
    const auto ud = static_cast<size_t>(d);
    index.dims[d] = plan.dims[ud];
    for (size_t k = 0; k < shapes.size(); ++k) index.strides[k][d] = plan.strides[k][ud];
  }
  return index;
}

class CompareKernel final : public OpKernel {
 public:
  explicit CompareKernel(CompareOp op) { args_.op = op; }

  Status prepare(PrepareContext& ctx) override {
    args_.dtype = ctx.input(0).dtype;
    if (!cuda::compare_supported(args_.op, args_.dtype)) {
      return ctx.fail("no CUDA kernel for dtype ", dtype_name(args_.dtype));
    }
    OG_ASSIGN_OR_RETURN(args_.index, broadcast_index(ctx));
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::CompareArgs a = args_;
    a.a = ctx.input(0).data;
    a.b = ctx.input(1).data;
    a.out = ctx.output(0).data;
    return cuda::launch_compare(a, ctx.stream);
  }

 private:
  cuda::CompareArgs args_;
};

// Where moves bytes, so it dispatches on the element size of x / y (input 1).
class WhereKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const DType dtype = ctx.input(1).dtype;
    const int bits = dtype_bits(dtype);
    if (bits != 8 && bits != 16 && bits != 32 && bits != 64) return ctx.fail("no CUDA kernel for dtype ", dtype_name(dtype));
    if (ctx.input(0).dtype != DType::kBool) return ctx.fail("condition must be bool, got ", dtype_name(ctx.input(0).dtype));
    args_.elem_bytes = bits / 8;
    OG_ASSIGN_OR_RETURN(args_.index, broadcast_index(ctx));
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::WhereArgs a = args_;
    a.cond = ctx.input(0).data;
    a.x = ctx.input(1).data;
    a.y = ctx.input(2).data;
    a.out = ctx.output(0).data;
    return cuda::launch_where(a, ctx.stream);
  }

 private:
  cuda::WhereArgs args_;
};

void add_kernel(OpRegistry& registry, const char* op, std::vector<DType> dtypes, int type_input,
                std::function<std::unique_ptr<OpKernel>(const Node&)> create) {
  registry.add_kernel(KernelDef{.domain = "", .op_type = op, .device = DeviceType::kCuda, .dtypes = std::move(dtypes),
                                .type_input = type_input, .create = std::move(create)});
}

// The dtypes launch_compare takes for `op`.
std::vector<DType> compare_dtypes(CompareOp op) {
  std::vector<DType> dtypes;
  for (const DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kI8, DType::kU8, DType::kI32, DType::kI64,
                        DType::kBool}) {
    if (cuda::compare_supported(op, d)) dtypes.push_back(d);
  }
  return dtypes;
}

}  // namespace

void register_logical_cuda_kernels(OpRegistry& registry) {
  const struct {
    const char* name;
    CompareOp op;
  } kCompare[] = {
      {"Equal", CompareOp::kEqual},     {"Less", CompareOp::kLess},
      {"Greater", CompareOp::kGreater}, {"LessOrEqual", CompareOp::kLessOrEqual},
      {"GreaterOrEqual", CompareOp::kGreaterOrEqual}, {"And", CompareOp::kAnd},
      {"Or", CompareOp::kOr},           {"Xor", CompareOp::kXor},
  };
  for (const auto& c : kCompare) {
    const CompareOp op = c.op;
    add_kernel(registry, c.name, compare_dtypes(op), 0, [op](const Node&) { return std::make_unique<CompareKernel>(op); });
  }
  // Any dtype for x / y, as on the CPU; prepare() turns down sizes without a kernel.
  add_kernel(registry, "Where", {}, 1, [](const Node&) { return std::make_unique<WhereKernel>(); });
}

}  // namespace onnx_genai
