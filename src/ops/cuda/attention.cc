// com.microsoft GroupQueryAttention on the GPU: parameters parsed and checked by the shared
// GqaParams (ops/schema/attention.h, the CPU kernel's too), kernels in attention_kernels.cu.
// prepare() fixes the work split and the workspace; run() fills in the pointers and launches.
#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/attention.h"

namespace onnx_genai {

namespace {

class GqaCudaKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const GqaParams p, GqaParams::make(ctx.node, ctx.inputs, ctx.value(GqaParams::kTotalSequenceLength)));
    if (p.head_size > cuda::kGqaMaxHeadSize || p.head_size % cuda::kGqaHeadSizeMultiple != 0) {
      return ctx.fail("the CUDA kernel supports head sizes that are multiples of ", cuda::kGqaHeadSizeMultiple, " up to ",
                      cuda::kGqaMaxHeadSize, ", got ", p.head_size);
    }
    if (ctx.has_output(GqaParams::kPresentKey) != ctx.has_output(GqaParams::kPresentValue)) {
      return ctx.fail("present_key and present_value must be both requested or both omitted");
    }
    has_past_ = p.has_past;
    packed_ = p.packed_qkv;
    cuda::GqaArgs& a = args_;
    a.dtype = p.dtype;
    a.batch = p.batch;
    a.q_len = p.q_len;
    a.kv_len = p.kv_len;
    a.num_heads = p.num_heads;
    a.kv_heads = p.kv_heads;
    a.head_size = p.head_size;
    a.past_len = p.past_len;
    a.present_len = p.present_len;
    a.first_prompt = p.first_prompt;
    a.causal = p.causal;
    a.smooth_softmax = p.smooth_softmax;
    a.window = p.window;
    a.scale = p.effective_scale();
    a.softcap = p.softcap;
    a.do_rotary = p.do_rotary;
    a.rotary_interleaved = p.rotary_interleaved;
    a.rotary_dim = p.rotary_dim;
    a.rotary_rows = p.rotary_rows;
    a.bias_batch = p.bias_batch;
    a.bias_heads = p.bias_heads;
    a.bias_keys = p.bias_keys;
    a.query_row = (p.packed_qkv ? p.num_heads + 2 * p.kv_heads : p.num_heads) * p.head_size;
    a.new_kv_row = p.packed_qkv ? a.query_row : p.kv_heads * p.head_size;
    a.cache_in_workspace = !ctx.has_output(GqaParams::kPresentKey);
    const Status planned = cuda::plan_gqa(a);
    if (!planned.is_ok()) return ctx.fail(planned.message());
    ctx.workspace_bytes = a.workspace_bytes;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::GqaArgs a = args_;
    a.query = ctx.input(GqaParams::kQuery).data;
    const auto* query = static_cast<const char*>(a.query);
    const int64_t elem = dtype_storage_bytes(a.dtype, 1);
    a.new_k = packed_ ? query + a.num_heads * a.head_size * elem : ctx.input(GqaParams::kKey).data;
    a.new_v = packed_ ? query + (a.num_heads + a.kv_heads) * a.head_size * elem : ctx.input(GqaParams::kValue).data;
    if (has_past_) {
      a.past_k = ctx.input(GqaParams::kPastKey).data;
      a.past_v = ctx.input(GqaParams::kPastValue).data;
    }
    if (!a.cache_in_workspace) {
      a.present_k = ctx.output(GqaParams::kPresentKey).data;
      a.present_v = ctx.output(GqaParams::kPresentValue).data;
    }
    // The runtime's shared KV cache: present is the past buffer, already holding the past rows.
    a.shared_kv = has_past_ && a.past_k == a.present_k && a.past_v == a.present_v;
    a.seqlens_k = ctx.input(GqaParams::kSeqlensK).ptr<const int32_t>();
    if (ctx.has_input(GqaParams::kPositionIds)) a.position_ids = ctx.input(GqaParams::kPositionIds).ptr<const int64_t>();
    if (a.do_rotary) {
      a.cos_cache = ctx.input(GqaParams::kCosCache).data;
      a.sin_cache = ctx.input(GqaParams::kSinCache).data;
    }
    if (ctx.has_input(GqaParams::kAttentionBias)) a.attention_bias = ctx.input(GqaParams::kAttentionBias).data;
    if (ctx.has_input(GqaParams::kHeadSink)) a.head_sink = ctx.input(GqaParams::kHeadSink).data;
    a.out = ctx.output(GqaParams::kOutput).data;
    a.workspace = ctx.workspace;
    return cuda::launch_gqa(a, ctx.stream);
  }

 private:
  cuda::GqaArgs args_;
  bool has_past_ = false;
  bool packed_ = false;
};

}  // namespace

void register_attention_cuda_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = "com.microsoft", .op_type = "GroupQueryAttention", .device = DeviceType::kCuda,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [](const Node&) -> std::unique_ptr<OpKernel> { return std::make_unique<GqaCudaKernel>(); }});
}

}  // namespace onnx_genai
