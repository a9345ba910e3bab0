// 4-bit MatMulNBits on the GPU: y [M, N] = A [M, K] x dequantise(B [N, K])^T.
//
// Decode is memory-bound: at small M every weight byte is used once per call, so the goal is to
// stream B at DRAM bandwidth, reading it once for all M rows, with as few instructions per byte
// as possible (at the H200's bandwidth each SM must consume 16 bytes of codes a clock). Two
// kernels:
//   - tensor_core (M <= 16; K a multiple of 128 and of the block; blocks of >= 32 codes; aligned
//     pointers: every decoder projection): below. M = 1 and M = 16 read the weights the same way.
//     Its many-row sibling (M = 17..64, f16 / bf16, no float zero points) is
//     quantized_matmul_many_rows.cu.
//   - cuda_core (everything else; quantized_matmul_cuda_core.cu): FMA on CUDA cores, B streamed
//     once per tile of 8 activation rows.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/quantized_matmul_device.cuh"
#include "ops/cuda/quantized_matmul_kernels.h"
#include "ops/cuda/tensor_core_gemv.cuh"
#include "ops/cuda/tensor_core_gemv4.cuh"

namespace onnx_genai::cuda {

namespace {

using namespace nbits4;
using namespace tensor_core_gemv;

// ---------------------------------------------------------------------------------------------
// tensor_core: M <= 16 on mma.sync.m16n8k16 (f16 or bf16 operands, f32 accumulators); the
// layout and dequantisation it shares with the many-row kernel are in tensor_core_gemv4.cuh.
//
// The mma computes D [16 rows of B, 8 columns] += W [16 rows of B, 16 k] x X [16 k, 8 columns];
// a warp owns a tile of 16 rows of B and streams a range of K ("quads") of it.
//
//   Streaming B. Lane (g, t) (g = lane / 4, t = lane % 4) loads 16 bytes (32 codes) of rows g
//   and g + 8 of its tile per quad: the 4 lanes of group g read 64 contiguous bytes of row g.
//   Loads are 16 bytes wide, unconditional (K is whole quads; rows past N read row N - 1, whose
//   results are dropped) and skip L1 (kept for the activations). Quads go through a ring of
//   STAGES in registers: quad q + STAGES - 1 is loaded before quad q is used. Variants, for
//   the benchmark to weigh (MatMulNBits4Kernel): a deep ring (6 quads, 2 blocks an SM instead
//   of 3 quads, 3 blocks), and 256-byte L2 fetches (the row's next quads reach L2 early).
//
//          row g     | lane 4g | lane 4g+1 | lane 4g+2 | lane 4g+3 |  <- quad q: bytes 64q..64q+63
//          row g + 8 | lane 4g | lane 4g+1 | lane 4g+2 | lane 4g+3 |
//
//   Exact weights, scales in f32. A code becomes magic + code by OR-ing it into the mantissa of
//   1024 (f16) or 128 (bf16); subtracting magic + zero point leaves q - zp exactly (f16 takes the
//   high nibble in place, as 1024 + 16 q, and one fma by 1/16 subtracts 64 + zp). A block's
//   scale multiplies the f32 mma result, so every mma column must sum codes of one block.
//   Which k a lane's code stands for is the lane's own choice (the same permutation is applied
//   to the activations it loads), so the blocks can be met two ways:
//   - Column classes (no shuffles; when classes x M <= 8). A quad spans C = 2^E blocks (E = 0
//     for blocks >= 64 bytes, 1 for 32, 2 for 16), lane t's 16 bytes lie in block t * C / 4,
//     and the mma's 8 columns are (activation row, block class) pairs: a lane loads activations
//     only for the class of its k positions and zeros otherwise, so column (m, c) sums block c
//     of row m. One scale per column, applied once per quad; the classes are added at the end.
//   - Spread (larger M): the 4 lanes of a group trade words over warp shuffles so that each
//     holds an equal share of every block; step s of the quad's 8 then reads block s >> (3 - E)
//     for all lanes, and all 8 columns are activation rows (two tiles of 8 for M > 8).
//   Activations are read through L1 (where the SM's warps share them), 16 bytes a lane for the
//   two steps of a word. Float zero points: W holds q and zp x sum(a) over the block (a second
//   mma with W = ones) is subtracted after scaling. f32 activations are split into three bf16
//   parts (hi + mid + lo is exact to f32), three mmas.
//
//   Dependent launch. The kernel starts while the previous one (which writes the activations)
//   drains: it issues its first quads of constant weights, then waits for it
//   (dependent_launch.cuh), and lets the next kernel launch once its loads are done.
//
//   Norm prologue (MatMulNBits4Args::norm_prologue, onnx_genai RmsNormMatMulNBits). Each block
//   first prefetches its first quads of weights into L2, waits, and RMS-normalises the M
//   activation rows into shared memory (tensor_core_gemv::norm_prologue: a few KiB read from L2
//   by every block); its lanes then read their activations there instead of through L1, and the
//   norm costs no launch of its own. One runtime flag, no kernel variants.
//
//   Splitting K. Small N gives few row tiles, so the 8 warps of a block may cover
//   8 / block_k_splits tiles each, splitting K between block_k_splits warps (plan() weighs
//   waves of resident blocks against memory round trips per warp). Partial sums meet in shared
//   memory and are summed in a fixed order: no atomics, no workspace, deterministic,
//   capture-safe. No thread-block clusters: their launch and cluster-wide barriers cost more
//   than they saved.
namespace tensor_core {

// Registers. Kernels that hold only codes and scales (f16, no zero points, one tile of
// activation rows) fit 80 registers: 3 blocks an SM, more loads in flight. Zero points, bf16's
// longer dequantisation, f32 splits and two activation tiles need more (up to 128: 2 blocks).
// The deep ring trades the third block for twice the quads in flight per warp (128 registers).
template <typename T, Zp ZP, int NT, bool DEEP>
constexpr int kMinBlocksPerSm = !DEEP && std::is_same_v<T, __half> && ZP == Zp::kNone && NT == 1 ? 3 : 2;

// Quads in the ring: float zero points and f32 activations hold twice the parameters or
// operands and would spill with a third. The deep ring (f16 with no zero points): 16 warps x
// 6 KiB in flight per SM (against 24 x 3 KiB), all of a warp's quads at once where K is split 8
// ways up to K = 6144; bf16 and packed zero points spill past 4.
template <typename T, Zp ZP>
constexpr int kDeepStages = std::is_same_v<T, __half> && ZP == Zp::kNone ? 6 : 4;
template <typename T, Zp ZP, bool DEEP>
constexpr int kStages = DEEP ? kDeepStages<T, ZP> : ZP == Zp::kFloat || std::is_same_v<T, float> ? 2 : 3;

// The deep ring exists for f16 / bf16 activations with no or packed zero
// points and one tile of activation rows (M <= 8): the deep ring would spill on the others, and
// fewer variants keep the build short.
template <typename T, Zp ZP, int NT>
constexpr bool kHasRingVariants = !std::is_same_v<T, float> && ZP != Zp::kFloat && NT == 1;

template <typename T, typename Lay, Zp ZP, int NT, bool DEEP>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm<T, ZP, NT, DEEP>) small_m_kernel(const MatMulNBits4Args p) {
  constexpr int STAGES = kStages<T, ZP, DEEP>;
  __shared__ float partial[kWarps][kTileRows][kMaxMTiles * 8];
  extern __shared__ uint4 norm_rows[];  // the norm prologue's (norm_prologue_bytes; else none)
  const int ksb = p.block_k_splits;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t block_first_row = static_cast<int64_t>(blockIdx.x) * (kWarps / ksb * kTileRows);
  const int64_t first_row = block_first_row + warp / ksb * kTileRows;
  // The norm prologue comes first, before the lane's state is live (registers), its scratch
  // `partial`, whose own use starts after the last quad.
  const bool normalise = p.norm_prologue;
  T* const rows = reinterpret_cast<T*>(norm_rows);
  if (normalise) {
    norm_prologue<T>(p, rows, &partial[0][0][0], first_row, static_cast<int>(p.k / kQuadCodes) * (warp % ksb) / ksb,
                     p.k / 2);
  }
  const LaneView<T, NT> v = lane_view<T, Lay, ZP, NT>(p, first_row, lane, normalise ? rows : static_cast<const T*>(p.a),
                                                      normalise ? norm_row_stride(p.k, sizeof(T)) : p.k);

  // This warp's share of K: quads [q_begin, q_end) of split warp % ksb (none past N).
  const int quads = static_cast<int>(p.k / kQuadCodes), split = warp % ksb;
  const int q_begin = quads * split / ksb, q_end = first_row < p.n ? quads * (split + 1) / ksb : q_begin;
  float acc[NT][4] = {};
  Quad<T, Lay, ZP> ring[STAGES];
  stream_quads<STAGES>(
      q_begin, q_end, p.constant_weights, [&](int q, int slot) { load_quad(p, v, q, q_end, ring[slot]); },
      [&](int q, int slot) { multiply_quad(v, q, q, ring[slot], normalise, acc); });

  const bool swiglu = p.epilogue == MatMulNBits4Epilogue::kSwiGLU;
  if (ksb == 1 && !swiglu) {
    for_each_output<Lay>(acc, lane, [&](int row, int m, float sum) { store_output<T>(p, first_row + row, m, sum); });
    return;
  }
  // Split sums meet in shared memory, and so do a SwiGLU's column pairs: rows g and g + 1 of a
  // tile are in different lanes (the fragment pairs rows g and g + 8).
  for_each_output<Lay>(acc, lane, [&](int row, int m, float sum) { partial[warp][row][m] = sum; });
  __syncthreads();
  store_split_sums<T>(p, partial, ksb, block_first_row);
}

// ---------------------------------------------------------------------------------------------
// Planning and launch.

using Kernel = void (*)(MatMulNBits4Args);

// log2 of the quantisation blocks in a quad: 0 for blocks of >= 64 bytes, 1 for 32, 2 for 16.
int block_exponent(int64_t block_size) {
  int e = 0;
  while ((kQuadBytes >> e) > block_size / 2) ++e;
  return e;
}

// The planned kernel's layout: column classes unless classes x M > 8 (then spread, M in tiles
// of 8); E = 0 has one class either way.
struct Shape {
  int e = 0;
  bool spread = false;
  int m_tiles = 1;
};

Shape shape_of(const MatMulNBits4Args& p) {
  Shape s;
  s.e = block_exponent(p.block_size);
  s.spread = s.e > 0 && (p.m << s.e) > 8;
  s.m_tiles = s.spread || s.e == 0 ? static_cast<int>(ceil_div(p.m, 8)) : 1;
  return s;
}

template <typename T, typename Lay, Zp ZP, int NT>
Kernel with_ring(bool deep) {
  if constexpr (kHasRingVariants<T, ZP, NT>) {
    if (deep) return small_m_kernel<T, Lay, ZP, NT, true>;
  }
  return small_m_kernel<T, Lay, ZP, NT, false>;
}

template <typename T, int E, bool SPREAD, int NT>
Kernel with_zero_points(Zp zp, bool deep) {
  using Lay = Layout<E, SPREAD>;
  if (zp == Zp::kFloat) return with_ring<T, Lay, Zp::kFloat, NT>(deep);
  return zp == Zp::kPacked ? with_ring<T, Lay, Zp::kPacked, NT>(deep)
                           : with_ring<T, Lay, Zp::kNone, NT>(deep);
}

// The 8 layouts a plan can pick, x 3 zero-point kinds x 3 dtypes: 72 kernels, and 20 more with
// the deep ring.
template <typename T>
Kernel kernel_for(const Shape& s, Zp zp, bool deep) {
  const bool one = s.m_tiles == 1;
  switch (s.e) {
    case 0:
      return one ? with_zero_points<T, 0, false, 1>(zp, deep) : with_zero_points<T, 0, false, 2>(zp, deep);
    case 1:
      if (!s.spread) return with_zero_points<T, 1, false, 1>(zp, deep);
      return one ? with_zero_points<T, 1, true, 1>(zp, deep) : with_zero_points<T, 1, true, 2>(zp, deep);
    default:
      if (!s.spread) return with_zero_points<T, 2, false, 1>(zp, deep);
      return one ? with_zero_points<T, 2, true, 1>(zp, deep) : with_zero_points<T, 2, true, 2>(zp, deep);
  }
}

Zp zero_points_of(const MatMulNBits4Args& p) {
  return p.float_zero_points ? Zp::kFloat : p.packed_zero_points ? Zp::kPacked : Zp::kNone;
}

Kernel kernel_for(const MatMulNBits4Args& p) {
  const Shape s = shape_of(p);
  Kernel kernel = nullptr;
  dispatch_float_type(p.dtype,
                      [&]<typename T>() { kernel = kernel_for<T>(s, zero_points_of(p), p.deep_ring); });
  return kernel;
}

// Whether the deep ring exists for the plan's shape (as kHasRingVariants
// decides).
bool ring_variants_exist(const MatMulNBits4Args& p) {
  return p.dtype != DType::kF32 && !p.float_zero_points && shape_of(p).m_tiles == 1;
}

// Quads a warp of the planned kernel keeps in flight while it waits for one.
int quads_in_flight(const MatMulNBits4Args& p) {
  if (!p.deep_ring) return 2;
  int stages = 0;
  dispatch_float_type(p.dtype, [&]<typename T>() {
    stages = p.packed_zero_points ? kDeepStages<T, Zp::kPacked> : kDeepStages<T, Zp::kNone>;
  });
  return stages - 1;
}

// Picks how many warps split K (tensor_core_gemv::plan_splits), or takes `forced_splits`.
Status plan(MatMulNBits4Args& p, int forced_splits) {
  const Kernel kernel = kernel_for(p);
  if (kernel == nullptr) return OG_ERROR("MatMulNBits (CUDA): unsupported dtype ", dtype_name(p.dtype));
  OG_ASSIGN_OR_RETURN(const int64_t wave, resident_wave(kernel, norm_prologue_bytes(p)));
  OG_ASSIGN_OR_RETURN(p.block_k_splits, plan_splits(ceil_div(p.n, kTileRows), p.k / kQuadCodes, wave,
                                                    quads_in_flight(p), forced_splits, "MatMulNBits (CUDA)"));
  p.norm_prologue = p.norm_prologue && norm_prologue_pays(ceil_div(p.n, kTileRows), p.block_k_splits, wave);
  return Status::ok();
}

// The kernel's loads need these alignments (the shapes were checked by the plan; the norm
// prologue's pointers are null or 16-byte aligned, A is null with it).
bool pointers_fit(const MatMulNBits4Args& p) {
  const uintptr_t element = p.dtype == DType::kF32 ? 4 : 2;
  const uintptr_t params = element << block_exponent(p.block_size);
  const bool norm = aligned(p.norm_x, 16) && aligned(p.norm_skip, 16) && aligned(p.norm_gamma, 16) &&
                    aligned(p.norm_sum, 16);
  return aligned(p.b, 16) && aligned(p.a, 16) && aligned(p.scales, params) && aligned(p.zp_float, params) &&
         aligned(p.zp_packed, 2) && norm;
}

Status launch(const MatMulNBits4Args& p, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>(ceil_div(ceil_div(p.n, kTileRows) * p.block_k_splits, kWarps));
  return cuda_status(launch_kernel(kernel_for(p), dim3(grid), dim3(kThreads), norm_prologue_bytes(p), s,
                                   p.dependent_launch, p),
                     "MatMulNBits small_m_kernel launch");
}

}  // namespace tensor_core

Status check_layout(const MatMulNBits4Args& p) {
  if (p.block_size < 16 || (p.block_size & (p.block_size - 1)) != 0 || p.blocks * p.block_size / 2 % 8 != 0) {
    return OG_ERROR("MatMulNBits (CUDA): block_size ", p.block_size, " must be a power of two >= 16");
  }
  if (p.dtype != DType::kF32 && p.dtype != DType::kF16 && p.dtype != DType::kBF16) {
    return OG_ERROR("MatMulNBits (CUDA): unsupported dtype ", dtype_name(p.dtype));
  }
  if (p.epilogue == MatMulNBits4Epilogue::kSwiGLU && p.n % 2 != 0) {
    return OG_ERROR("MatMulNBits (CUDA): the SwiGLU epilogue needs an even number of columns, got ", p.n);
  }
  return Status::ok();
}

// What plans given the default choice take (set_matmul_nbits4_choice: the tests).
MatMulNBits4Choice g_default_choice;

// The ring kAuto plans, from cuda_bench's side-by-side rows on the H200 (2026-12-01, dependent
// launches): the deep one for 2-8 rows of block-32 weights with K >= N, where the standard
// kernel spills registers and tall K leaves few row tiles to spread (M = 8: 18944x3584 32.2 ->
// 23.2 us, 14336x4096 25.0 -> 19.6, 4864x896 7.7 -> 4.7), and for one row where K >= 2N (K
// split 8 ways still leaves few warps an SM: 18944x3584 22.4 -> 19.7 us, 14336x4096 18.7 ->
// 16.5, 4864x896 4.6 -> 4.1); elsewhere it lost (wide N: 896x151936 at M = 8 41.0 -> 45.5, the
// fused gate/up) or made no difference.
//
// Past 16 rows, the many-row kernel where it beat the dense path (dequantised weights, cuBLASLt)
// in cuda_bench's "gemm" rows on the H200 (2026-12-02): on weights of >= 16 million codes up to 32 rows
// (3584x4608: 25.5 against 27.4 us at M = 32; 18944x3584 83.0 / 116.4; gate/up 3584x37888
// 168 / 220) and of >= 32 million up to 64 (18944x3584 96.7 / 118.2 us at M = 64; gate/up 202 /
// 221); on smaller ones the dense path won (896x9728 at M = 32: 24.8 against 16.1 us; 3584x4608
// at M = 64: 30.4 / 28.2). Elsewhere the plan declines (kCudaCore), and the op runs the dense
// path.
MatMulNBits4Kernel planned_tensor_core(const MatMulNBits4Args& args) {
  if (args.m > kMaxMTiles * 8) {
    const int64_t codes = args.n * args.k;
    const bool pays = codes >= 32'000'000 || (codes >= 16'000'000 && args.m <= 32);
    return pays ? MatMulNBits4Kernel::kTensorCore : MatMulNBits4Kernel::kCudaCore;
  }
  const bool deep = (args.m >= 2 && args.m <= 8 && args.block_size == 32 && args.k >= args.n) ||
                    (args.m == 1 && args.k >= 2 * args.n);
  return deep ? MatMulNBits4Kernel::kTensorCoreDeep : MatMulNBits4Kernel::kTensorCore;
}

}  // namespace

void set_matmul_nbits4_choice(MatMulNBits4Choice choice) { g_default_choice = choice; }
MatMulNBits4Choice matmul_nbits4_choice() { return g_default_choice; }

Status plan_matmul_nbits4(MatMulNBits4Args& args, MatMulNBits4Choice choice) {
  OG_RETURN_IF_ERROR(check_layout(args));
  if (choice == MatMulNBits4Choice{}) choice = g_default_choice;
  // The int4 GEMM is the op's to plan (it needs the reordered weights): here it is kAuto.
  if (choice.kernel == MatMulNBits4Kernel::kInt4Gemm) choice.kernel = MatMulNBits4Kernel::kAuto;
  if (choice.kernel == MatMulNBits4Kernel::kAuto) choice.kernel = planned_tensor_core(args);
  // The tensor-core kernel reads whole quads with no bound on K, blocks of >= 32 codes, and
  // indexes B and its parameters in 32 bits; past 16 rows, the many-row kernel (f16 / bf16, no
  // float zero points).
  const bool many_row_kernel_exists = args.dtype != DType::kF32 && !args.float_zero_points;
  args.tensor_core = choice.kernel != MatMulNBits4Kernel::kCudaCore && args.m >= 1 &&
                     args.m <= (many_row_kernel_exists ? kMaxTensorCoreRows : kMaxMTiles * 8) &&
                     args.k % tensor_core::kQuadCodes == 0 && args.k % args.block_size == 0 &&
                     args.block_size >= 32 && args.n * (args.k / 2) < (int64_t{1} << 32);
  // The norm prologue's rows must fit their shared-memory budget; the many-row kernel has none.
  const int64_t element = args.dtype == DType::kF32 ? 4 : 2;
  args.norm_prologue = args.norm_prologue && args.tensor_core && args.m <= kMaxMTiles * 8 &&
                       args.m * args.k * element <= kNormPrologueBytes;
  args.many_rows = args.tensor_core && args.m > kMaxMTiles * 8;
  args.workspace_bytes = 0;
  args.block_k_splits = 1;
  if (args.many_rows) {
    args.deep_ring = args.dependent_launch = false;
    return plan_many_rows(args, choice.block_k_splits);
  }
  const bool variants = args.tensor_core && tensor_core::ring_variants_exist(args);
  args.deep_ring = variants && choice.kernel == MatMulNBits4Kernel::kTensorCoreDeep;
  args.dependent_launch = args.tensor_core && choice.dependent_launch && dependent_launch_allowed();
  return args.tensor_core ? tensor_core::plan(args, choice.block_k_splits) : Status::ok();
}

Status launch_matmul_nbits4(const MatMulNBits4Args& p, void* stream) {
  if (p.m == 0 || p.n == 0) return Status::ok();
  OG_RETURN_IF_ERROR(check_layout(p));
  if ((p.zp_float != nullptr) != p.float_zero_points || (p.zp_packed != nullptr) != p.packed_zero_points) {
    return OG_ERROR("MatMulNBits (CUDA): zero points given or missing against the plan");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  // Pointers the tensor-core kernel cannot load from (possible for sub-tensors) take the
  // CUDA-core path, which has no norm prologue (its caller normalises first where
  // matmul_nbits4_runs_tensor_core says no).
  if (matmul_nbits4_runs_tensor_core(p)) return p.many_rows ? launch_many_rows(p, s) : tensor_core::launch(p, s);
  if (p.norm_prologue) return OG_ERROR("MatMulNBits (CUDA): the norm prologue needs the tensor-core kernel");
  return launch_cuda_core(p, 4, s);
}

bool matmul_nbits4_runs_tensor_core(const MatMulNBits4Args& p) { return p.tensor_core && tensor_core::pointers_fit(p); }

}  // namespace onnx_genai::cuda
