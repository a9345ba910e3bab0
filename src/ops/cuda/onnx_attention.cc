// ONNX Attention (opset 23, 24) on the GPU, run by the GroupQueryAttention kernels
// (attention_kernels.h). Parameters are parsed and checked by the shared OnnxAttentionParams
// (ops/schema/attention.h, the CPU kernel's too); results match ops/cpu/attention_onnx.cc.
// T = P + S keys (P past rows, S new rows, as many key rows as query rows).
//
//   Q / K / V 3-D [B, S, heads*D]  read in place (GqaArgs query_row / new_kv_row); the output
//                                  written in place.
//   Q / K / V 4-D [B, heads, S, D] copied into the workspace as [B, S, heads, D] and the output
//                                  back (strided copies, layout_kernels.h); with one head or one
//                                  row both layouts are the same bytes and nothing moves (decode).
//   past / present [B, Nkv, P / T, D]  GQA's separate past and present (present_len T); a
//                                  present output the node omits lives in the workspace.
//   seqlens_k                      T - 1 for every entry, written each run: GQA then writes the
//                                  new rows at P and, when causal, row s sees keys j <= P + s
//                                  (the CPU's causal offset: the past length).
//   attn_mask, nonpad_kv_seqlen    one additive attention_bias [B|1, Nq|1, S, T]: a float mask
//                                  already laid out so is passed as it is; otherwise the setup
//                                  kernel writes it (onnx_attention_kernels.h), with is_causal
//                                  folded in where nonpad_kv_seqlen moves the diagonal (no past).
//   scale (default 1/sqrt(D)), softcap  GQA's (softcap before the bias, as on the CPU).
//
// prepare() turns down what the GQA kernels cannot run, and the node then runs on the CPU:
// qk_matmul_output, a V head size other than Q's, head sizes GQA lacks, key rows != query rows,
// an empty batch or sequence.
#include <cstdint>
#include <limits>

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/layout_kernels.h"
#include "ops/cuda/onnx_attention_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/attention.h"

namespace onnx_genai {

namespace {

using P = OnnxAttentionParams;

// Workspace regions start on 256 bytes (the GQA kernels' 16-byte rows, and whole cache lines).
size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// [B, outer, inner, D] -> [B, inner, outer, D].
Result<cuda::StridedCopyPlan> swap_middle_dims(int64_t batch, int64_t outer, int64_t inner, int64_t d, int elem) {
  const int64_t dims[] = {batch, inner, outer, d};  // destination order
  const int64_t src[] = {outer * inner * d, d, inner * d, 1};
  const int64_t dst[] = {inner * outer * d, outer * d, d, 1};
  return cuda::StridedCopyPlan::make(dims, src, dst, 0, elem);
}

class OnnxAttentionCudaKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(p_, P::make(ctx.node, ctx.inputs, ctx.has_output(P::kQkMatmulOutput)));
    OG_RETURN_IF_ERROR(check_supported(ctx));
    gqa_ = {};
    setup_ = {};
    const int elem = static_cast<int>(dtype_storage_bytes(p_.dtype, 1));
    const int64_t d = p_.head_size;
    const auto bytes = [&](int64_t elements) { return static_cast<size_t>(dtype_storage_bytes(p_.dtype, elements)); };
    size_t offset = 0;
    const auto take = [&](size_t size) {
      const size_t at = offset;
      offset += align256(size);
      return at;
    };
    seqlens_offset_ = take(static_cast<size_t>(p_.batch) * sizeof(int32_t));

    // 4-D Q / K / V and output through the workspace where the layouts differ.
    move_q_ = p_.four_d && p_.q_heads > 1 && p_.q_len > 1;
    move_kv_ = p_.four_d && p_.kv_heads > 1 && p_.q_len > 1;
    if (move_q_) {
      OG_ASSIGN_OR_RETURN(q_copy_, swap_middle_dims(p_.batch, p_.q_heads, p_.q_len, d, elem));
      OG_ASSIGN_OR_RETURN(out_copy_, swap_middle_dims(p_.batch, p_.q_len, p_.q_heads, d, elem));
      q_offset_ = take(bytes(p_.batch * p_.q_len * p_.q_heads * d));
      out_offset_ = take(bytes(p_.batch * p_.q_len * p_.q_heads * d));
    }
    if (move_kv_) {
      OG_ASSIGN_OR_RETURN(kv_copy_, swap_middle_dims(p_.batch, p_.kv_heads, p_.q_len, d, elem));
      k_offset_ = take(bytes(p_.batch * p_.q_len * p_.kv_heads * d));
      v_offset_ = take(bytes(p_.batch * p_.q_len * p_.kv_heads * d));
    }
    const int64_t cache = p_.batch * p_.kv_heads * p_.total_len * d;
    k_in_workspace_ = !ctx.has_output(P::kPresentKey);
    v_in_workspace_ = !ctx.has_output(P::kPresentValue);
    if (k_in_workspace_) present_k_offset_ = take(bytes(cache));
    if (v_in_workspace_) present_v_offset_ = take(bytes(cache));

    cuda::GqaArgs& a = gqa_;
    a.dtype = p_.dtype;
    a.batch = p_.batch;
    a.q_len = a.kv_len = p_.q_len;
    a.num_heads = p_.q_heads;
    a.kv_heads = p_.kv_heads;
    a.head_size = d;
    a.past_len = p_.past_len;
    a.present_len = p_.total_len;
    a.first_prompt = p_.past_len == 0;
    a.scale = p_.effective_scale();
    a.softcap = p_.softcap;
    a.query_row = p_.q_heads * d;
    a.new_kv_row = p_.kv_heads * d;
    a.cache_in_workspace = false;
    setup_.dtype = p_.dtype;
    setup_.batch = p_.batch;
    setup_.q_len = p_.q_len;
    setup_.total_len = p_.total_len;
    plan_bias(a);
    if (build_bias_) bias_offset_ = take(bytes(a.bias_batch * a.bias_heads * p_.q_len * p_.total_len));
    const Status planned = cuda::plan_gqa(a);
    if (!planned.is_ok()) return ctx.fail(planned.message());
    gqa_offset_ = take(a.workspace_bytes);
    ctx.workspace_bytes = offset;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    char* ws = static_cast<char*>(ctx.workspace);
    cuda::GqaArgs a = gqa_;
    cuda::OnnxAttentionSetup setup = setup_;
    setup.seqlens_k = reinterpret_cast<int32_t*>(ws + seqlens_offset_);
    a.seqlens_k = setup.seqlens_k;
    if (build_bias_) {
      setup.bias = ws + bias_offset_;
      if (p_.has_mask) setup.mask = ctx.input(P::kAttnMask).data;
      if (p_.has_nonpad) setup.nonpad_kv_seqlen = ctx.input(P::kNonpadKvSeqlen).ptr<const int64_t>();
      a.attention_bias = setup.bias;
    } else if (p_.has_mask) {
      a.attention_bias = ctx.input(P::kAttnMask).data;
    }
    OG_RETURN_IF_ERROR(cuda::launch_onnx_attention_setup(setup, ctx.stream));

    OG_ASSIGN_OR_RETURN(a.query, rows(ctx, P::kQ, move_q_, q_copy_, q_offset_));
    OG_ASSIGN_OR_RETURN(a.new_k, rows(ctx, P::kK, move_kv_, kv_copy_, k_offset_));
    OG_ASSIGN_OR_RETURN(a.new_v, rows(ctx, P::kV, move_kv_, kv_copy_, v_offset_));
    if (p_.has_past) {
      a.past_k = ctx.input(P::kPastKey).data;
      a.past_v = ctx.input(P::kPastValue).data;
    }
    a.present_k = k_in_workspace_ ? ws + present_k_offset_ : ctx.output(P::kPresentKey).data;
    a.present_v = v_in_workspace_ ? ws + present_v_offset_ : ctx.output(P::kPresentValue).data;
    a.out = move_q_ ? ws + out_offset_ : ctx.output(P::kY).data;
    a.workspace = ws + gqa_offset_;
    OG_RETURN_IF_ERROR(cuda::launch_gqa(a, ctx.stream));
    if (!move_q_) return Status::ok();
    return cuda::launch_strided_copy(out_copy_, a.out, ctx.output(P::kY).data, ctx.stream);
  }

 private:
  Status check_supported(const PrepareContext& ctx) const {
    if (p_.qk_mode >= 0) return ctx.fail("the CUDA kernel does not write qk_matmul_output");
    if (p_.v_head_size != p_.head_size) {
      return ctx.fail("the CUDA kernel needs V's head size equal to Q's, got ", p_.v_head_size, " and ", p_.head_size);
    }
    if (p_.head_size > cuda::kGqaMaxHeadSize || p_.head_size % cuda::kGqaHeadSizeMultiple != 0) {
      return ctx.fail("the CUDA kernel supports head sizes that are multiples of ", cuda::kGqaHeadSizeMultiple, " up to ",
                      cuda::kGqaMaxHeadSize, ", got ", p_.head_size);
    }
    if (p_.kv_len != p_.q_len) {
      return ctx.fail("the CUDA kernel needs one key / value row per query row, got ", p_.kv_len, " and ", p_.q_len);
    }
    if (p_.batch == 0 || p_.q_len == 0) return ctx.fail("the CUDA kernel does not run an empty batch or sequence");
    if (p_.total_len > std::numeric_limits<int32_t>::max()) {
      return ctx.fail("the CUDA kernel counts keys in int32, got ", p_.total_len);
    }
    return Status::ok();
  }

  // How attn_mask and nonpad_kv_seqlen reach the GQA kernels: a float mask with a row per query
  // row (or one query row) is GQA's attention_bias as it is; any other mask, and
  // nonpad_kv_seqlen, go through a bias the setup kernel writes.
  void plan_bias(cuda::GqaArgs& a) {
    const bool mask_has_rows = p_.mask_row_stride != 0 || p_.q_len == 1;
    build_bias_ = p_.has_nonpad || (p_.has_mask && (p_.mask_bool || !mask_has_rows));
    // The CPU's causal offset is P, GQA's; nonpad_kv_seqlen without a past moves it per entry.
    const bool causal_nonpad = p_.is_causal && p_.has_nonpad && !p_.has_past;
    a.causal = p_.is_causal && !causal_nonpad;
    if (!build_bias_ && !p_.has_mask) return;
    a.bias_batch = p_.mask_batch_stride != 0 || p_.has_nonpad ? p_.batch : 1;
    a.bias_heads = p_.mask_head_stride != 0 ? p_.q_heads : 1;
    a.bias_keys = p_.total_len;
    if (!build_bias_) return;
    cuda::OnnxAttentionSetup& s = setup_;
    s.mask_bool = p_.mask_bool;
    s.mask_batch_stride = p_.mask_batch_stride;
    s.mask_head_stride = p_.mask_head_stride;
    s.mask_row_stride = p_.mask_row_stride;
    s.causal_nonpad = causal_nonpad;
    s.bias_batch = a.bias_batch;
    s.bias_heads = a.bias_heads;
  }

  // Q, K or V as GQA reads it: [B, S, heads, D] rows, the input itself or its copy in the workspace.
  Result<const void*> rows(const KernelContext& ctx, int input, bool moved, const cuda::StridedCopyPlan& copy,
                           size_t offset) const {
    const void* data = ctx.input(input).data;
    if (!moved) return data;
    void* dst = static_cast<char*>(ctx.workspace) + offset;
    OG_RETURN_IF_ERROR(cuda::launch_strided_copy(copy, data, dst, ctx.stream));
    return static_cast<const void*>(dst);
  }

  OnnxAttentionParams p_;
  cuda::GqaArgs gqa_;
  cuda::OnnxAttentionSetup setup_;
  bool build_bias_ = false;
  bool move_q_ = false, move_kv_ = false;
  bool k_in_workspace_ = false, v_in_workspace_ = false;
  cuda::StridedCopyPlan q_copy_, kv_copy_, out_copy_;
  size_t seqlens_offset_ = 0, q_offset_ = 0, out_offset_ = 0, k_offset_ = 0, v_offset_ = 0;
  size_t present_k_offset_ = 0, present_v_offset_ = 0, bias_offset_ = 0, gqa_offset_ = 0;
};

}  // namespace

void register_onnx_attention_cuda_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = "", .op_type = "Attention", .device = DeviceType::kCuda,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16}, .since_version = 23,
                                .create = [](const Node&) -> std::unique_ptr<OpKernel> {
                                  return std::make_unique<OnnxAttentionCudaKernel>();
                                }});
}

}  // namespace onnx_genai
