#include "ops/cpu/gemm_driver.h"

#include <algorithm>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/cpu/gemm_kernels.h"

namespace onnx_genai {

namespace {

// Below this many multiply-adds per thread, waking another thread costs more than it saves.
constexpr int64_t kMinFmasPerChunk = int64_t{1} << 17;
// Workspace pieces start on 64-byte boundaries.
constexpr int64_t kAlignFloats = 16;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

}  // namespace

GemmIsa gemm_isa() {
  const CpuFeatures& f = cpu_features();
  return f.avx512 ? GemmIsa::kAvx512 : f.avx2 ? GemmIsa::kAvx2 : GemmIsa::kScalar;
}

const GemmKernelSet& gemm_kernels(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAvx512: return gemm_kernels_avx512();
    case GemmIsa::kAvx2: return gemm_kernels_avx2();
    case GemmIsa::kScalar: break;
  }
  return gemm_kernels_scalar();
}

Result<GemmPackedB> GemmPackedB::pack(GemmIsa isa, const GemmOperand& b, int64_t k, int64_t n, int64_t count,
                                      int64_t batch_stride) {
  const GemmKernelSet& kernels = gemm_kernels(isa);
  GemmPackedB packed;
  packed.k_ = k;
  packed.nr_ = kernels.nr;
  packed.matrix_floats_ = ceil_div(n, kernels.nr) * kernels.nr * k;
  OG_ASSIGN_OR_RETURN(packed.storage_, Tensor::allocate(DType::kF32, Shape{count * packed.matrix_floats_}));
  const int64_t elem_bytes = dtype_bits(b.dtype) / 8;
  for (int64_t i = 0; i < count; ++i) {
    GemmOperand matrix = b;
    matrix.data = static_cast<const char*>(b.data) + i * batch_stride * elem_bytes;
    kernels.pack_b(matrix, k, n, packed.storage_.data<float>() + i * packed.matrix_floats_);
  }
  return packed;
}

GemmPlan GemmPlan::make(GemmIsa isa, GemmShape shape, DType dtype, bool packed_b, bool b_unit_col_stride,
                        bool epilogue, int threads) {
  const GemmKernelSet& kernels = gemm_kernels(isa);
  GemmPlan plan;
  plan.isa = isa;
  plan.shape = shape;
  plan.dtype = dtype;
  plan.packed_b = packed_b;
  plan.epilogue = epilogue;
  const auto [batch, m, n, k] = shape;
  if (batch <= 0 || m <= 0 || n <= 0) return plan;  // nothing to compute: tasks = 0

  const int64_t work = batch * m * n * std::max<int64_t>(k, 1);
  const int64_t chunks = std::clamp<int64_t>(work / kMinFmasPerChunk, 1, std::max(1, threads));
  const int64_t panels = ceil_div(n, kernels.nr);
  plan.gemv = m == 1 && (packed_b || b_unit_col_stride);
  if (plan.gemv) {
    plan.mc = 1;
    plan.m_blocks = 1;
    plan.kc = k;
    // Each chunk streams one contiguous range of B columns (whole panels).
    plan.n_blocks = std::clamp<int64_t>(ceil_div(chunks, batch), 1, panels);
    plan.a_pack_floats = round_up(k, kAlignFloats);
  } else {
    plan.kc = k == 0 ? 1 : ceil_div(k, ceil_div(k, kernels.kc));  // equal slices of at most kernels.kc
    plan.m_blocks = ceil_div(m, kernels.mc);
    plan.mc = round_up(ceil_div(m, plan.m_blocks), kernels.mr);
    plan.m_blocks = ceil_div(m, plan.mc);
    // Enough column blocks that every chunk has a task, none wider than the kernel's nc.
    const int64_t for_threads = ceil_div(chunks, batch * plan.m_blocks);
    plan.n_blocks = std::clamp<int64_t>(std::max(ceil_div(n, kernels.nc), for_threads), 1, panels);
  }
  plan.nc = ceil_div(panels, plan.n_blocks) * kernels.nr;
  plan.n_blocks = ceil_div(n, plan.nc);
  if (!plan.gemv) {
    plan.a_pack_floats = round_up(plan.mc * plan.kc, kAlignFloats);
    plan.b_pack_floats = packed_b ? 0 : round_up(plan.kc * plan.nc, kAlignFloats);
    plan.c_tile_floats = dtype == DType::kF32 ? 0 : plan.mc * plan.nc;
  }
  plan.chunk_floats = round_up(plan.a_pack_floats + plan.b_pack_floats + plan.c_tile_floats, kAlignFloats);
  plan.tasks = batch * plan.m_blocks * plan.n_blocks;
  plan.chunks = std::min(chunks, plan.tasks);
  return plan;
}

void GemmPlan::run(const GemmArgs& args, void* workspace, ThreadPool* pool) const {
  if (tasks == 0) return;
  const GemmKernelSet& kernels = gemm_kernels(isa);
  float* base = static_cast<float*>(workspace);
  if (chunks == 1) {
    kernels.run_chunk(*this, args, 0, base);
    return;
  }
  parallel_for(pool, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) kernels.run_chunk(*this, args, c, base + c * chunk_floats);
  });
}

}  // namespace onnx_genai
