// Shape inference and validation for com.microsoft MoE and QMoE (layouts in ops/schema/moe.h).
#include "ops/schema/moe.h"

#include <array>
#include <set>

namespace onnx_genai {

namespace {

using Params = MoEParams;
const char* const kProjectionNames[Params::kProjections] = {"fc1", "fc2", "fc3"};

// QMoE inputs past fc2_global_scale: FP8 activation scales, which no CPU kernel takes.
constexpr int kQMoEInputs = 17;
constexpr int kRouterWeights = 14;

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

struct Checker {
  const Node& node;
  const std::vector<const TensorInfo*>& inputs;

  template <typename... Args>
  Status fail(const Args&... args) const { return OG_ERROR(node.describe(), ": ", args...); }
  const TensorInfo* input(int i) const {
    return i >= 0 && i < static_cast<int>(inputs.size()) ? inputs[static_cast<size_t>(i)] : nullptr;
  }
  // `what` must be `dtype` with shape `dims`.
  Status expect(const TensorInfo& t, const std::string& what, DType dtype, const std::vector<int64_t>& dims) const {
    if (t.dtype != dtype) return fail(what, " must be ", dtype_name(dtype), ", got ", dtype_name(t.dtype));
    if (t.shape != Shape(dims)) {
      return fail(what, " shape ", t.shape.to_string(), " should be ", Shape(dims).to_string());
    }
    return Status::ok();
  }
};

Status read_attributes(const Node& node, bool quantized, Params& p) {
  static const std::set<std::string> kCommon = {"k", "activation_type", "normalize_routing_weights", "use_sparse_mixer",
                                                "swiglu_fusion", "swiglu_limit", "activation_alpha", "activation_beta"};
  static const std::set<std::string> kQuantized = {"expert_weight_bits", "block_size", "quant_type", "weights_prepacked"};
  const auto fail = [&](const auto&... args) { return OG_ERROR(node.describe(), ": ", args...); };
  for (const auto& [name, attr] : node.attrs.all()) {
    if (kCommon.count(name) == 0 && !(quantized && kQuantized.count(name) != 0)) {
      return fail("unsupported attribute '", name, "'");
    }
  }
  if (!node.attrs.has("k")) return fail("attribute k is required");
  p.k = node.attrs.get_int("k", 0);
  const std::string act = node.attrs.get_string("activation_type", "relu");
  static const std::array<std::pair<const char*, Params::Activation>, 5> kActs = {{{"relu", Params::Activation::kRelu},
      {"gelu", Params::Activation::kGelu}, {"silu", Params::Activation::kSilu},
      {"identity", Params::Activation::kIdentity}, {"swiglu", Params::Activation::kSwiGLU}}};
  bool known = false;
  for (const auto& [name, value] : kActs) {
    if (act == name) p.activation = value, known = true;
  }
  if (!known) return fail("unsupported activation_type '", act, "' (relu, gelu, silu, identity or swiglu)");
  p.normalize = node.attrs.get_int("normalize_routing_weights", 0) == 1;
  const bool sparse_mixer = node.attrs.get_int("use_sparse_mixer", 0) != 0;
  if (sparse_mixer && p.k != 2) return fail("use_sparse_mixer needs k 2, got ", p.k);
  p.swiglu_fusion = node.attrs.get_int("swiglu_fusion", 0);
  if (p.swiglu_fusion < 0 || p.swiglu_fusion > 2) return fail("swiglu_fusion must be 0, 1 or 2, got ", p.swiglu_fusion);
  p.limit = node.attrs.get_float("swiglu_limit", p.limit);
  p.alpha = node.attrs.get_float("activation_alpha", p.alpha);
  p.beta = node.attrs.get_float("activation_beta", p.beta);
  p.routing = sparse_mixer ? Params::Routing::kSparseMixer
              : quantized  ? Params::Routing::kTopKSoftmax
                           : Params::Routing::kSoftmaxTopK;
  if (!quantized) return Status::ok();

  const std::string quant = node.attrs.get_string("quant_type", "int");
  if (quant != "int" && quant != "fp4") return fail("unsupported quant_type '", quant, "' (int or fp4)");
  p.quant = quant == "int" ? Params::Quant::kInt : Params::Quant::kMxfp4;
  p.bits = node.attrs.get_int("expert_weight_bits", 4);
  if (p.quant == Params::Quant::kMxfp4 && p.bits != 4) return fail("quant_type fp4 needs expert_weight_bits 4, got ", p.bits);
  if (p.bits != 2 && p.bits != 4 && p.bits != 8) return fail("expert_weight_bits must be 2, 4 or 8, got ", p.bits);
  const int64_t prepacked = node.attrs.get_int("weights_prepacked", -1);
  if (prepacked == 1) return fail("weights_prepacked 1 (an execution provider's own layout) is not supported");
  const int64_t block = node.attrs.get_int("block_size", 0);
  p.per_row = p.quant == Params::Quant::kInt && !node.attrs.has("block_size");
  if (p.quant == Params::Quant::kMxfp4) {
    if (node.attrs.has("block_size") && block != 32) return fail("quant_type fp4 needs block_size 32, got ", block);
  } else if (!p.per_row && (block < 16 || (block & (block - 1)) != 0)) {
    return fail("block_size must be a power of two >= 16, got ", block);
  }
  for (Params::Projection& fc : p.fc) fc.block_size = p.quant == Params::Quant::kMxfp4 ? 32 : block;
  return Status::ok();
}

// Input, router, k, and hidden / experts / tokens.
Status check_activations(const Checker& c, Params& p) {
  const TensorInfo* x = c.input(Params::kInput);
  const TensorInfo* router = c.input(Params::kRouter);
  if (x == nullptr || router == nullptr) return c.fail("inputs input and router_probs are required");
  if (!is_float(x->dtype)) return c.fail("input must be float32, float16 or bfloat16, got ", dtype_name(x->dtype));
  if (x->shape.rank() != 2 && x->shape.rank() != 3) return c.fail("input ", x->shape.to_string(), " must be 2-D or 3-D");
  p.dtype = x->dtype;
  p.hidden = x->shape[x->shape.rank() - 1];
  p.tokens = x->shape.numel() / std::max<int64_t>(p.hidden, 1);
  if (p.hidden <= 0) return c.fail("input ", x->shape.to_string(), " has no hidden features");
  if (router->shape.rank() != 2 || router->shape[0] != p.tokens || router->shape[1] < 1) {
    return c.fail("router_probs ", router->shape.to_string(), " should be [", p.tokens, ", experts]");
  }
  if (router->dtype != p.dtype) return c.fail("router_probs must have input's dtype ", dtype_name(p.dtype));
  p.experts = router->shape[1];
  if (p.k < 1 || p.k > p.experts) return c.fail("k must be in [1, num_experts=", p.experts, "], got ", p.k);
  return Status::ok();
}

// Which projections are there, and inter from fc2's weights.
Status check_layout(const Checker& c, bool quantized, Params& p) {
  for (int i = 0; i < Params::kProjections; ++i) {
    p.fc[i].slots = Params::slots(quantized, i);
    p.fc[i].present = c.input(p.fc[i].slots.weights) != nullptr;
  }
  if (!p.fc[0].present || !p.fc[1].present) return c.fail("inputs fc1_experts_weights and fc2_experts_weights are required");
  const bool swiglu = p.activation == Params::Activation::kSwiGLU;
  if (swiglu && p.swiglu_fusion == 0 && !p.fc[2].present) {
    return c.fail("swiglu with swiglu_fusion 0 needs fc3_experts_weights (the linear half)");
  }
  if (p.fc[2].present && swiglu && p.swiglu_fusion != 0) {
    return c.fail("fc3_experts_weights given with swiglu_fusion ", p.swiglu_fusion, " (fc1 already holds both halves)");
  }
  if (p.fc[2].present && p.quant == Params::Quant::kMxfp4) return c.fail("quant_type fp4 takes no fc3 (it has no global scale)");
  const TensorInfo& fc2 = *c.input(p.fc[1].slots.weights);
  if (fc2.shape.rank() != 3) return c.fail("fc2_experts_weights ", fc2.shape.to_string(), " must be 3-D");
  const int64_t per_byte = p.quant == Params::Quant::kFloat ? 1 : 8 / p.bits;
  p.inter = fc2.shape[2] * per_byte;
  if (p.inter <= 0) return c.fail("fc2_experts_weights ", fc2.shape.to_string(), " has no inter features");
  const bool fused = swiglu && p.swiglu_fusion != 0;
  const int64_t ns[3] = {fused ? 2 * p.inter : p.inter, p.hidden, p.inter}, ks[3] = {p.hidden, p.inter, p.hidden};
  for (int i = 0; i < Params::kProjections; ++i) {
    Params::Projection& fc = p.fc[i];
    fc.n = ns[i], fc.k = ks[i];
    if (p.quant == Params::Quant::kFloat) continue;
    if (p.per_row) fc.block_size = fc.k;
    // Per-row scales run on the block kernels with the scale repeated over blocks of 16 or more.
    if (p.per_row && fc.k % 16 != 0) {
      return c.fail(kProjectionNames[i], " input size ", fc.k, " with per-row scales must be a multiple of 16");
    }
    if (fc.k % fc.block_size != 0) {
      return c.fail(kProjectionNames[i], " input size ", fc.k, " is not a multiple of block_size ", fc.block_size);
    }
    fc.blocks = fc.k / fc.block_size;
  }
  return Status::ok();
}

Status check_projection(const Checker& c, const Params& p, int i, Params::Projection& fc) {
  const std::string name = kProjectionNames[i];
  const int64_t e = p.experts;
  const int64_t row_bytes = p.quant == Params::Quant::kFloat ? fc.k : fc.k * p.bits / 8;
  const DType wtype = p.quant == Params::Quant::kFloat ? p.dtype : DType::kU8;
  OG_RETURN_IF_ERROR(c.expect(*c.input(fc.slots.weights), name + "_experts_weights", wtype, {e, fc.n, row_bytes}));
  if (const TensorInfo* bias = c.input(fc.slots.bias)) {
    fc.has_bias = true;
    OG_RETURN_IF_ERROR(c.expect(*bias, name + "_experts_bias", p.dtype, {e, fc.n}));
  }
  if (p.quant == Params::Quant::kFloat) return Status::ok();
  const TensorInfo* scales = c.input(fc.slots.scales);
  if (scales == nullptr) return c.fail("input ", name, "_scales is required");
  const TensorInfo* zp = c.input(fc.slots.zero_points);
  if (p.quant == Params::Quant::kMxfp4) {
    OG_RETURN_IF_ERROR(c.expect(*scales, name + "_scales", DType::kF8E8M0, {e, fc.n, fc.blocks}));
    if (zp != nullptr) return c.fail(name, "_zero_points given with quant_type fp4");
    const TensorInfo* global = c.input(fc.slots.global_scale);
    if (global == nullptr) return c.fail("quant_type fp4 needs input ", name, "_global_scale");
    return c.expect(*global, name + "_global_scale", DType::kF32, {e});
  }
  const std::vector<int64_t> want = p.per_row ? std::vector<int64_t>{e, fc.n} : std::vector<int64_t>{e, fc.n, fc.blocks};
  OG_RETURN_IF_ERROR(c.expect(*scales, name + "_scales", p.scale_dtype, want));
  if (zp != nullptr) {
    fc.has_zero_points = true;
    const auto packed = [&](int64_t n) { return (n * p.bits + 7) / 8; };
    OG_RETURN_IF_ERROR(c.expect(*zp, name + "_zero_points", DType::kU8,
                                p.per_row ? std::vector<int64_t>{e, packed(fc.n)} : std::vector<int64_t>{e, fc.n, packed(fc.blocks)}));
  }
  return Status::ok();
}

}  // namespace

Params::Slots Params::slots(bool quantized, int projection) {
  if (!quantized) return Slots{.weights = 2 + 2 * projection, .bias = 3 + 2 * projection};
  Slots s{.weights = 2 + 3 * projection, .scales = 3 + 3 * projection, .bias = 4 + 3 * projection,
          .zero_points = 11 + projection};
  if (projection < 2) s.global_scale = 15 + projection;
  return s;
}

Result<Params> Params::make(const Node& node, const std::vector<const TensorInfo*>& inputs) {
  const bool quantized = node.op_type == "QMoE";
  const Checker c{node, inputs};
  const int max_inputs = quantized ? kQMoEInputs : 8;
  for (int i = max_inputs; i < static_cast<int>(inputs.size()); ++i) {
    if (inputs[static_cast<size_t>(i)] != nullptr) {
      return c.fail("input ", i, quantized ? " (an FP8 activation scale) is not supported" : " is not defined for MoE");
    }
  }
  Params p;
  OG_RETURN_IF_ERROR(read_attributes(node, quantized, p));
  OG_RETURN_IF_ERROR(check_activations(c, p));
  OG_RETURN_IF_ERROR(check_layout(c, quantized, p));
  if (p.quant == Quant::kInt) {
    const TensorInfo* scales = c.input(p.fc[0].slots.scales);
    p.scale_dtype = scales != nullptr ? scales->dtype : DType::kF32;
    if (!is_float(p.scale_dtype)) return c.fail("fc1_scales must be float32, float16 or bfloat16, got ", dtype_name(p.scale_dtype));
  }
  for (int i = 0; i < kProjections; ++i) {
    if (p.fc[i].present) OG_RETURN_IF_ERROR(check_projection(c, p, i, p.fc[i]));
  }
  if (quantized) {
    if (const TensorInfo* weights = c.input(kRouterWeights)) {
      p.router_weights = kRouterWeights;
      if (p.routing == Routing::kSparseMixer) return c.fail("router_weights given with use_sparse_mixer");
      OG_RETURN_IF_ERROR(c.expect(*weights, "router_weights", p.dtype, {p.tokens, p.experts}));
    }
  }
  return p;
}

namespace {

Status infer_moe(InferContext& ctx) {
  OG_ASSIGN_OR_RETURN(Params p, Params::make(ctx.node, ctx.inputs));
  ctx.set_output(0, p.dtype, ctx.shape(Params::kInput));
  return Status::ok();
}

}  // namespace

void register_moe_schemas(OpRegistry& registry) {
  registry.add_schema(OpSchema{.domain = "com.microsoft", .op_type = "MoE", .infer_shapes = infer_moe});
  registry.add_schema(OpSchema{.domain = "com.microsoft", .op_type = "QMoE", .infer_shapes = infer_moe});
}

}  // namespace onnx_genai
