// onnx_genai PagedAttention on the GPU: parameters parsed and checked by the shared
// PagedAttentionParams (ops/schema/paged_attention.h, the CPU kernel's too), kernels in
// paged_attention_kernels.cu.
#include "ops/cuda/paged_attention_kernels.h"
#include "ops/cuda/register.h"
#include "ops/op.h"
#include "ops/schema/paged_attention.h"

namespace onnx_genai {

namespace {

using P = PagedAttentionParams;

// Output i's storage, or null when the node does not produce it.
void* bound_output(const KernelContext& ctx, int i) {
  return i < static_cast<int>(ctx.outputs.size()) ? ctx.output(i).data : nullptr;
}

class PagedAttentionCudaKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(const P p, P::make(ctx.node, ctx.inputs));
    if (p.head_size > cuda::kPagedMaxHeadSize) {
      return ctx.fail("the CUDA kernel supports head sizes up to ", cuda::kPagedMaxHeadSize, ", got ", p.head_size);
    }
    cuda::PagedAttentionArgs& a = args_;
    a.dtype = p.dtype;
    a.tokens = p.tokens;
    a.sequences = p.sequences;
    a.max_blocks = p.max_blocks;
    a.num_blocks = p.num_blocks;
    a.block_size = p.block_size;
    a.num_heads = p.num_heads;
    a.kv_heads = p.kv_heads;
    a.head_size = p.head_size;
    a.query_row = p.query_row_elems();
    a.new_kv_row = p.packed_qkv ? a.query_row : p.kv_heads * p.head_size;
    a.scale = p.effective_scale();
    a.softcap = p.softcap;
    a.window = p.window;
    a.do_rotary = p.do_rotary;
    a.rotary_interleaved = p.rotary_interleaved;
    a.rotary_dim = p.rotary_dim;
    a.rotary_rows = p.rotary_rows;
    packed_ = p.packed_qkv;
    has_sink_ = p.has_head_sink;
    OG_RETURN_IF_ERROR(cuda::plan_paged_attention(a));
    ctx.workspace_bytes = a.workspace_bytes;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    cuda::PagedAttentionArgs a = args_;
    a.query = ctx.input(P::kQuery).data;
    const auto* query = static_cast<const char*>(a.query);
    const int64_t elem = dtype_storage_bytes(a.dtype, 1);
    a.new_k = packed_ ? query + a.num_heads * a.head_size * elem : ctx.input(P::kKey).data;
    a.new_v = packed_ ? query + (a.num_heads + a.kv_heads) * a.head_size * elem : ctx.input(P::kValue).data;
    a.key_cache_in = ctx.input(P::kKeyCache).data;
    a.value_cache_in = ctx.input(P::kValueCache).data;
    // Without outputs bound, the new rows go into the inputs' storage (the caller's cache).
    a.key_cache = bound_output(ctx, P::kKeyCacheOut);
    a.value_cache = bound_output(ctx, P::kValueCacheOut);
    if (a.key_cache == nullptr) a.key_cache = ctx.input(P::kKeyCache).data;
    if (a.value_cache == nullptr) a.value_cache = ctx.input(P::kValueCache).data;
    a.block_tables = ctx.input(P::kBlockTables).ptr<const int32_t>();
    a.query_starts = ctx.input(P::kQueryStarts).ptr<const int32_t>();
    a.seq_lens = ctx.input(P::kSeqLens).ptr<const int32_t>();
    if (a.do_rotary) {
      a.cos_cache = ctx.input(P::kCosCache).data;
      a.sin_cache = ctx.input(P::kSinCache).data;
    }
    if (has_sink_) a.head_sink = ctx.input(P::kHeadSink).data;
    a.out = ctx.output(P::kOutput).data;
    a.partials = static_cast<float*>(ctx.workspace);
    return cuda::launch_paged_attention(a, ctx.stream);
  }

 private:
  cuda::PagedAttentionArgs args_;
  bool packed_ = false, has_sink_ = false;
};

}  // namespace

void register_paged_attention_cuda_kernels(OpRegistry& registry) {
  registry.add_kernel(KernelDef{.domain = P::kDomain, .op_type = P::kOpType, .device = DeviceType::kCuda,
                                .dtypes = {DType::kF32, DType::kF16, DType::kBF16},
                                .create = [](const Node&) -> std::unique_ptr<OpKernel> {
                                  return std::make_unique<PagedAttentionCudaKernel>();
                                }});
}

}  // namespace onnx_genai
