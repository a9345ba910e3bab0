// CUDA kernels of the elementwise ops a decoder graph needs around its big ones: Add / Sub / Mul /
// Div / Pow with numpy broadcasting, the one-tensor math ops and activations (Sigmoid, Tanh, Neg,
// Exp, Log, Sqrt, Reciprocal, Relu, Erf, Abs; ONNX Gelu and com.microsoft FastGelu / BiasGelu /
// QuickGelu), and Cast / CastLike. The semantics are the CPU kernels' (ops/cpu/binary.cc,
// unary.cc, activation.cc) and the schemas are shared; computation is in
// ops/cuda/elementwise_kernels.cu.
#include <optional>

#include "ops/broadcast.h"
#include "ops/cuda/elementwise_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"

namespace onnx_genai {

namespace {

using cuda::Operand;

const std::vector<DType> kFloatDtypes{DType::kF32, DType::kF16, DType::kBF16};
const std::vector<DType> kArithDtypes{DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};
const std::vector<DType> kCastDtypes{DType::kF32, DType::kF16, DType::kBF16, DType::kI32,
                                     DType::kI64, DType::kBool, DType::kU8,  DType::kI8};

// How operand `input` of a merged broadcast is read by the flat kernel: the plan is one dim
// (the operand is the whole output or a scalar), or [rows, inner] with the operand either
// contiguous or one row repeated. nullopt: the general kernel is needed.
std::optional<Operand> flat_read(const BroadcastPlan& plan, int input) {
  const std::vector<int64_t>& s = plan.strides[static_cast<size_t>(input)];
  if (plan.dims.size() == 1) return s[0] == 0 ? Operand::kScalar : Operand::kContiguous;
  if (plan.dims.size() == 2 && s[1] == 1) {
    if (s[0] == plan.dims[1]) return Operand::kContiguous;
    if (s[0] == 0) return Operand::kRow;
  }
  return std::nullopt;
}

class BinaryKernel final : public OpKernel {
 public:
  explicit BinaryKernel(cuda::BinaryOp op) { args_.op = op; }

  Status prepare(PrepareContext& ctx) override {
    const DType a = ctx.input(0).dtype, b = ctx.input(1).dtype;
    if (!cuda::binary_supported(args_.op, a, b)) {
      return ctx.fail("no CUDA kernel for input dtypes ", dtype_name(a), ", ", dtype_name(b));
    }
    args_.dtype = a;
    args_.b_dtype = b;
    const Shape& out = ctx.output(0).shape;
    const Shape shapes[] = {ctx.input(0).shape, ctx.input(1).shape};
    const BroadcastPlan plan = BroadcastPlan::make(out, shapes);
    args_.n = out.numel();
    const std::optional<Operand> a_read = flat_read(plan, 0), b_read = flat_read(plan, 1);
    args_.flat = a_read && b_read;
    if (args_.flat) {
      args_.a_read = *a_read;
      args_.b_read = *b_read;
      args_.period = plan.inner();
      return Status::ok();
    }
    if (plan.dims.size() > static_cast<size_t>(cuda::kMaxBroadcastRank)) {
      return ctx.fail("broadcast of ", shapes[0].to_string(), " and ", shapes[1].to_string(), " spans ", plan.dims.size(),
                      " dims after merging; the CUDA kernel indexes at most ", cuda::kMaxBroadcastRank);
    }
    args_.rank = static_cast<int>(plan.dims.size());
    for (int d = 0; d < args_.rank; ++d) {
      const auto ud = static_cast<size_t>(d);
      args_.dims[d] = plan.dims[ud];
      args_.a_strides[d] = plan.strides[0][ud];
      args_.b_strides[d] = plan.strides[1][ud];
    }
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::BinaryArgs a = args_;
    a.a = ctx.input(0).data;
    a.b = ctx.input(1).data;
    a.out = ctx.output(0).data;
    return cuda::launch_binary(a, ctx.stream);
  }

 private:
  cuda::BinaryArgs args_;
};

// The one-tensor ops and the Gelu family; a bias (FastGelu's optional one, BiasGelu's B) is 1-D
// over the last dim of X (checked by the schema).
class UnaryKernel final : public OpKernel {
 public:
  UnaryKernel(cuda::UnaryOp op, const Node& node) {
    args_.op = op;
    args_.alpha = node.attrs.get_float("alpha", 1.702f);
  }

  Status prepare(PrepareContext& ctx) override {
    const TensorInfo& x = ctx.input(0);
    if (!cuda::unary_supported(args_.op, x.dtype)) return ctx.fail("no CUDA kernel for dtype ", dtype_name(x.dtype));
    args_.dtype = x.dtype;
    args_.n = x.shape.numel();
    has_bias_ = ctx.has_input(1);
    args_.bias_period = has_bias_ ? x.shape[x.shape.rank() - 1] : 1;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::UnaryArgs a = args_;
    a.x = ctx.input(0).data;
    a.bias = has_bias_ ? ctx.input(1).data : nullptr;
    a.y = ctx.output(0).data;
    return cuda::launch_unary(a, ctx.stream);
  }

 private:
  cuda::UnaryArgs args_;
  bool has_bias_ = false;
};

// Cast (target from `to`) and CastLike (target from input 1): the output dtype says which.
class CastKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    from_ = ctx.input(0).dtype;
    to_ = ctx.output(0).dtype;
    if (!cuda::cast_supported(from_, to_)) return ctx.fail("no CUDA kernel to cast ", dtype_name(from_), " to ", dtype_name(to_));
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return cuda::launch_cast(from_, to_, ctx.input(0).data, ctx.output(0).data, ctx.output(0).numel(), ctx.stream);
  }

 private:
  DType from_ = DType::kUndefined, to_ = DType::kUndefined;
};

void add_kernel(OpRegistry& registry, const char* domain, const char* op, const std::vector<DType>& dtypes,
                int since_version, std::function<std::unique_ptr<OpKernel>(const Node&)> create) {
  registry.add_kernel(KernelDef{.domain = domain, .op_type = op, .device = DeviceType::kCuda, .dtypes = dtypes,
                                .since_version = since_version, .create = std::move(create)});
}

void add_binary(OpRegistry& registry, const char* op, const std::vector<DType>& dtypes, cuda::BinaryOp kind) {
  add_kernel(registry, "", op, dtypes, 1, [kind](const Node&) { return std::make_unique<BinaryKernel>(kind); });
}

void add_unary(OpRegistry& registry, const char* domain, const char* op, const std::vector<DType>& dtypes,
               cuda::UnaryOp kind, int since_version = 1) {
  add_kernel(registry, domain, op, dtypes, since_version,
             [kind](const Node& node) { return std::make_unique<UnaryKernel>(kind, node); });
}

}  // namespace

void register_elementwise_cuda_kernels(OpRegistry& registry) {
  using cuda::BinaryOp;
  using cuda::UnaryOp;
  add_binary(registry, "Add", kArithDtypes, BinaryOp::kAdd);
  add_binary(registry, "Sub", kArithDtypes, BinaryOp::kSub);
  add_binary(registry, "Mul", kArithDtypes, BinaryOp::kMul);
  add_binary(registry, "Div", kArithDtypes, BinaryOp::kDiv);
  add_binary(registry, "Pow", kFloatDtypes, BinaryOp::kPow);

  const struct {
    const char* name;
    UnaryOp op;
    const std::vector<DType>& dtypes;
  } kUnary[] = {
      {"Sigmoid", UnaryOp::kSigmoid, kFloatDtypes}, {"Tanh", UnaryOp::kTanh, kFloatDtypes},
      {"Exp", UnaryOp::kExp, kFloatDtypes},         {"Log", UnaryOp::kLog, kFloatDtypes},
      {"Sqrt", UnaryOp::kSqrt, kFloatDtypes},       {"Reciprocal", UnaryOp::kReciprocal, kFloatDtypes},
      {"Erf", UnaryOp::kErf, kFloatDtypes},         {"Neg", UnaryOp::kNeg, kArithDtypes},
      {"Abs", UnaryOp::kAbs, kArithDtypes},         {"Relu", UnaryOp::kRelu, kArithDtypes},
  };
  for (const auto& u : kUnary) add_unary(registry, "", u.name, u.dtypes, u.op);
  add_unary(registry, "com.microsoft", "FastGelu", kFloatDtypes, UnaryOp::kGeluTanh);
  add_unary(registry, "com.microsoft", "BiasGelu", kFloatDtypes, UnaryOp::kGeluErf);
  add_unary(registry, "com.microsoft", "QuickGelu", kFloatDtypes, UnaryOp::kQuickGelu);
  // ONNX Gelu picks its form from `approximate` (checked by the schema).
  add_kernel(registry, "", "Gelu", kFloatDtypes, 20, [](const Node& node) {
    const bool tanh = node.attrs.get_string("approximate", "none") == "tanh";
    return std::make_unique<UnaryKernel>(tanh ? UnaryOp::kGeluTanh : UnaryOp::kGeluErf, node);
  });
  // Cast before opset 6 named its target with a string; the schema rejects that form.
  for (const char* op : {"Cast", "CastLike"}) {
    add_kernel(registry, "", op, kCastDtypes, 6, [](const Node&) { return std::make_unique<CastKernel>(); });
  }
}

}  // namespace onnx_genai
