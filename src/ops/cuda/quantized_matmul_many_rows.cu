// 4-bit MatMulNBits for 17..64 activation rows (a batch of decodes, a long speculative verify) on
// tensor cores, reading each weight once for all rows: y [M, N] = A [M, K] x dequantise(B)^T.
//
// The small-M GEMV's way of meeting B (tensor_core_gemv4.cuh: a warp owns 16 rows of B and
// dequantises each quad of 128 codes exactly) with up to 8 tiles of 8 activation rows per
// dequantised step, tiles past M skipped. What changes is where the
// activations come from: at 64 rows a lane needs 16 bytes of them per byte of codes, too many to
// load from L1 on the critical path (a first form that did took 6x the 16-row time at 32 rows).
// Here the block's 8 warps cover 128 rows of B over the same range of K, and stream A's rows
// through a ring of shared memory (cp.async, kStages quads ahead, one barrier per quad), so every
// warp reads the same staged quad at shared-memory latency. The codes take the same way, each
// lane's own 32 bytes a quad (no registers held while they arrive: the accumulators have them),
// only the scales and zero points wait in registers.
//
// Few row tiles (a narrow N) would leave SMs idle: then gridDim.y blocks split K and write f32
// sums into the workspace, which a second kernel adds in a fixed order (deterministic, no
// atomics) and finishes with the bias and the epilogue. One block an SM: the accumulators of
// 8 tiles take most of the registers. That leaves it issue-bound (ncu on the H200: 2 warps a
// scheduler, about 1000 instructions a warp per quad), at 0.08-0.11 of copy bandwidth on 7B
// shapes: the planner takes it only where it beat the dense path (planned_tensor_core).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/quantized_matmul_device.cuh"
#include "ops/cuda/quantized_matmul_kernels.h"
#include "ops/cuda/tensor_core.cuh"
#include "ops/cuda/tensor_core_gemv.cuh"
#include "ops/cuda/tensor_core_gemv4.cuh"

namespace onnx_genai::cuda {

namespace {

using namespace nbits4;
using namespace tensor_core_gemv;
using namespace tensor_core;

constexpr int kTiles = 8;  // of 8 activation rows: M <= 64
constexpr int kStages = 5;  // quads in flight (shared memory; scales and zero points in registers)
constexpr int kCodeSlotBytes = kWarps * 32 * 32;  // a quad's codes: 2 x 16 bytes a lane
constexpr int kBlockRows = kWarps * kTileRows;
// Elements between staged rows: a quad of 128 plus 64 bytes. A row is staged in the order its
// lanes read it (multiply_quad's STAGED): at each word, the 4 lanes of a group read 64
// consecutive bytes of their row, and the two groups of a phase of 8 lanes the other half of the
// banks, so an activation load has no bank conflicts.
template <typename T>
constexpr int kSlotStride = kQuadCodes + 64 / static_cast<int>(sizeof(T));

// Which 16-byte piece of a row's quad (k order) is staged at position j = 4 w + t: the one lane t
// reads for word w in layout Lay (tensor_core_gemv4.cuh).
template <typename Lay>
__device__ __forceinline__ int staged_piece(int j) {
  const int t = j % 4, w = j / 4;
  return (2 * lane_offset<Lay::kSpread>(t) + 2 * step_offset<Lay::kSpread>(2 * w)) / 8;
}

// Shared memory: the codes' ring, then the activations'; afterwards (a SwiGLU's column pairs meet
// there) the warps' sums.
template <typename T>
size_t activation_slot_bytes(const MatMulNBits4Args& p) {
  return static_cast<size_t>(p.m * kSlotStride<T>) * sizeof(T);
}
template <typename T>
size_t shared_bytes(const MatMulNBits4Args& p) {
  const size_t rings = kStages * (kCodeSlotBytes + activation_slot_bytes<T>(p));
  const size_t sums = sizeof(float) * kWarps * kTileRows * kTiles * 8;
  return std::max(rings, p.epilogue == MatMulNBits4Epilogue::kSwiGLU ? sums : size_t{0});
}

template <typename T, typename Lay, Zp ZP>
__global__ void __launch_bounds__(kThreads, 1) many_rows_kernel(const MatMulNBits4Args p) {
  extern __shared__ uint4 shared[];
  uint4* const lane_codes = shared + threadIdx.x * 2;  // + slot * kCodeSlotBytes / 16
  T* const slots = reinterpret_cast<T*>(shared + kStages * kCodeSlotBytes / 16);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t block_first_row = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  const int64_t first_row = block_first_row + warp * kTileRows;
  // The block's share of K; warps past N stage activations with the others but load no weights.
  const int quads = static_cast<int>(p.k / kQuadCodes), splits = static_cast<int>(gridDim.y);
  const int q_begin = quads * static_cast<int>(blockIdx.y) / splits;
  const int q_end = quads * (static_cast<int>(blockIdx.y) + 1) / splits;
  const int w_end = first_row < p.n ? q_end : q_begin;
  const int slot_elements = static_cast<int>(p.m) * kSlotStride<T>;
  LaneView<T, kTiles> v = lane_view<T, Lay, ZP, kTiles>(p, first_row, lane, slots, kSlotStride<T>);
  // The lane's activations in each slot: its row's staged pieces from 8 t (rows past M: zeros).
#pragma unroll
  for (int nt = 0; nt < kTiles; ++nt) {
    const int m = nt * 8 + lane / 4;
    if (v.a_step[nt] != 0) v.a[nt] = slots + m * kSlotStride<T> + 8 * (lane % 4);
    v.a_step[nt] = v.a_step[nt] != 0 ? slot_elements : 0;
  }

  // Quad q into ring slot `slot`: the lane's codes, and A's rows in 16-byte pieces spread over the
  // block. Always one commit group (empty past the range), so the waits below count alike on
  // every thread.
  const T* const a = static_cast<const T*>(p.a);
  const auto stage = [&](int q, int slot) {
    if (q < w_end) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        cp_async16(lane_codes + slot * kCodeSlotBytes / 16 + r, p.b + (v.codes[r] + q * kQuadBytes), 16);
      }
    }
    constexpr int kPieces = kQuadCodes * static_cast<int>(sizeof(T)) / 16;
    constexpr int kPieceElements = 16 / static_cast<int>(sizeof(T));
    if (q < q_end) {
      for (int i = static_cast<int>(threadIdx.x); i < p.m * kPieces; i += kThreads) {
        const int row = i / kPieces, at = i % kPieces;
        cp_async16(slots + slot * slot_elements + row * kSlotStride<T> + at * kPieceElements,
                   a + row * p.k + q * kQuadCodes + staged_piece<Lay>(at) * kPieceElements, 16);
      }
    }
    cp_async_commit();
  };

  float acc[kTiles][4] = {};
  Quad<T, Lay, ZP> ring[kStages];
  const auto load = [&](int q, int slot) {
    if (q < w_end) load_params(p, v, q, ring[slot]);
    stage(q, slot);
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) load(q_begin + i, i);
  for (int q0 = q_begin; q0 < q_end; q0 += kStages) {
#pragma unroll
    for (int i = 0; i < kStages; ++i) {
      const int q = q0 + i;
      // Quad q's rows are in slot i for every warp, and every warp is done with quad q - 1's
      // slot, which the stage below refills.
      cp_async_wait<kStages - 2>();
      __syncthreads();
      load(q + kStages - 1, (i + kStages - 1) % kStages);
      if (q < w_end) {
#pragma unroll
        for (int r = 0; r < 2; ++r) ring[i].codes[r] = lane_codes[i * kCodeSlotBytes / 16 + r];
        multiply_quad<T, Lay, ZP, kTiles, true>(v, q, i, ring[i], true, acc);
      }
    }
  }

  if (splits > 1) {
    // Split sums go to the workspace: [split][m][n] in f32.
    float* const sums = static_cast<float*>(p.workspace) + blockIdx.y * p.m * p.n;
    for_each_output<Lay>(acc, lane, [&](int row, int m, float sum) {
      if (first_row + row < p.n && m < p.m) sums[m * p.n + first_row + row] = sum;
    });
    return;
  }
  if (p.epilogue != MatMulNBits4Epilogue::kSwiGLU) {
    for_each_output<Lay>(acc, lane, [&](int row, int m, float sum) { store_output<T>(p, first_row + row, m, sum); });
    return;
  }
  // A SwiGLU's column pairs are rows g and g + 1 of a tile, in different lanes: they meet in
  // shared memory, over the ring once every warp is done with it.
  cp_async_wait<0>();
  __syncthreads();
  auto& partial = *reinterpret_cast<float(*)[kWarps][kTileRows][kTiles * 8]>(shared);
  for_each_output<Lay>(acc, lane, [&](int row, int m, float sum) { partial[warp][row][m] = sum; });
  __syncthreads();
  store_split_sums<T>(p, partial, 1, block_first_row);
}

// Adds the splits' sums in the workspace in a fixed order and writes y (bias, epilogue).
template <typename T>
__global__ void many_rows_sum_kernel(const MatMulNBits4Args p) {
  const bool swiglu = p.epilogue == MatMulNBits4Epilogue::kSwiGLU;
  const int64_t width = swiglu ? p.n / 2 : p.n;
  const auto* parts = static_cast<const float*>(p.workspace);
  const auto column_sum = [&](int64_t m, int64_t n) {
    float sum = 0.0f;
    for (int s = 0; s < p.block_k_splits; ++s) sum += parts[(s * p.m + m) * p.n + n];
    return sum;
  };
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.m * width;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t m = i / width, column = i % width;
    if (swiglu) {
      store_swiglu<T>(p, 2 * column, m, column_sum(m, 2 * column), column_sum(m, 2 * column + 1));
    } else {
      store_output<T>(p, column, m, column_sum(m, column));
    }
  }
}

using Kernel = void (*)(MatMulNBits4Args);

// log2 of the quantisation blocks in a quad (as the small-M kernel's plan): 0 for blocks of >= 64
// bytes (one class, no spreading), 1 for 32, 2 for 16 (spread: M > 8 always here).
template <typename T, Zp ZP>
Kernel kernel_for(int64_t block_size) {
  if (block_size >= 2 * kQuadBytes) return many_rows_kernel<T, Layout<0, false>, ZP>;
  return block_size == kQuadBytes ? many_rows_kernel<T, Layout<1, true>, ZP> : many_rows_kernel<T, Layout<2, true>, ZP>;
}

// 3 layouts x 2 zero-point kinds x f16 / bf16: 12 kernels.
Kernel kernel_for(const MatMulNBits4Args& p) {
  const bool bf16 = p.dtype == DType::kBF16;
  if (p.packed_zero_points) {
    return bf16 ? kernel_for<__nv_bfloat16, Zp::kPacked>(p.block_size) : kernel_for<__half, Zp::kPacked>(p.block_size);
  }
  return bf16 ? kernel_for<__nv_bfloat16, Zp::kNone>(p.block_size) : kernel_for<__half, Zp::kNone>(p.block_size);
}

size_t shared_bytes_of(const MatMulNBits4Args& p) {
  return p.dtype == DType::kBF16 ? shared_bytes<__nv_bfloat16>(p) : shared_bytes<__half>(p);
}

constexpr unsigned kSumThreads = 256;

unsigned sum_blocks(const MatMulNBits4Args& p) {
  const int64_t width = p.epilogue == MatMulNBits4Epilogue::kSwiGLU ? p.n / 2 : p.n;
  return static_cast<unsigned>(std::min<int64_t>(ceil_div(p.m * width, kSumThreads), 4096));
}

}  // namespace

// Splits (1 to 8, at most one per quad): the fewest waves of resident blocks per split, as each
// split's blocks take 1 / splits of the time; a split more must gain 5% (the workspace costs
// traffic: 8 bytes a split per output).
Status nbits4::plan_many_rows(MatMulNBits4Args& p, int forced_splits) {
  if (p.dtype != DType::kF16 && p.dtype != DType::kBF16) {
    return OG_ERROR("MatMulNBits (CUDA): the many-row kernel takes f16 or bf16, not ", dtype_name(p.dtype));
  }
  if (p.float_zero_points || p.m > kTiles * 8) return OG_ERROR("MatMulNBits (CUDA): no many-row kernel for this plan");
  const Kernel kernel = kernel_for(p);
  const size_t shared = shared_bytes_of(p);
  int device = 0, sms = 0, resident = 0, opt_in = 0;
  OG_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  OG_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&opt_in, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                                 "shared memory per block"));
  if (shared > static_cast<size_t>(opt_in)) return OG_ERROR("MatMulNBits (CUDA): no many-row kernel for this plan");
  // The device's limit, not this plan's need: the attribute belongs to the kernel, which every
  // plan shares, and a smaller value set by a later plan would make an earlier plan's launch fail.
  OG_RETURN_IF_ERROR(cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, opt_in),
                                 "many-row kernel shared memory"));
  OG_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                                 "multiprocessor count"));
  OG_RETURN_IF_ERROR(cuda_status(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads, shared),
                                 "occupancy"));
  if (resident == 0) return OG_ERROR("MatMulNBits (CUDA): the many-row kernel does not fit an SM");
  const int64_t wave = int64_t{resident} * sms, blocks = ceil_div(p.n, kBlockRows), quads = p.k / kQuadCodes;
  const auto cost = [&](int64_t s) { return static_cast<double>(ceil_div(blocks * s, wave)) / static_cast<double>(s); };
  int splits = 1;
  for (int s = 2; s <= kWarps && s <= quads; ++s) splits = cost(s) < 0.95 * cost(splits) ? s : splits;
  if (forced_splits != 0) {
    if (forced_splits < 0 || forced_splits > kWarps) {
      return OG_ERROR("MatMulNBits (CUDA): ", forced_splits, " K splits (1 to ", kWarps, ")");
    }
    splits = static_cast<int>(std::min<int64_t>(forced_splits, quads));
  }
  if (blocks > 0x7fffffff) return OG_ERROR("MatMulNBits (CUDA): ", p.n, " rows exceed the grid");
  p.block_k_splits = splits;
  p.workspace_bytes = splits > 1 ? static_cast<size_t>(splits * p.m * p.n) * sizeof(float) : 0;
  return Status::ok();
}

Status nbits4::launch_many_rows(const MatMulNBits4Args& p, cudaStream_t s) {
  if (p.block_k_splits > 1 && p.workspace == nullptr) {
    return OG_ERROR("MatMulNBits (CUDA): the many-row plan needs its workspace");
  }
  const dim3 grid(static_cast<unsigned>(ceil_div(p.n, kBlockRows)), static_cast<unsigned>(p.block_k_splits));
  OG_RETURN_IF_ERROR(cuda_status(launch_kernel(kernel_for(p), grid, dim3(kThreads), shared_bytes_of(p), s, false, p),
                                 "MatMulNBits many_rows_kernel launch"));
  if (p.block_k_splits == 1) return Status::ok();
  const Kernel sum = p.dtype == DType::kBF16 ? many_rows_sum_kernel<__nv_bfloat16> : many_rows_sum_kernel<__half>;
  return cuda_status(launch_kernel(sum, dim3(sum_blocks(p)), dim3(kSumThreads), 0, s, false, p),
                     "MatMulNBits many_rows_sum_kernel launch");
}

}  // namespace onnx_genai::cuda
