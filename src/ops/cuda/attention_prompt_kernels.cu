// The flash prompt kernel of GroupQueryAttention (f16 / bf16): the steps the tensor-core decode
// does not take (prompts of more than 16 rows, first ones and chunks after a past), computed in
// the manner of FlashAttention-2 (semantics: ops/schema/attention.h; reference:
// ops/cpu/attention_gqa.cc). It runs after gqa_append_kernel (rotated queries into the workspace,
// the new K / V rows into present) and gqa_copy_past_kernel (when present is not the past
// buffer), so it reads only the queries (rotated or the input's) and the present cache.
//
// gqa_flash_prompt_kernel  grid (N * B, row tiles), 4 warps:
//   block = (batch b, query head h, tile of 64 query rows), over KV head g = h / (N / Nkv).
//   Row tiles are the grid's slow dimension, the last one first: under a causal mask the last rows
//   see the most keys, and starting them first evens out the grid's tail. The heads of a group
//   are neighbours in the grid, so they read the same K / V rows from L2 at about the same time.
//
//   warp w      query rows s0 + 16w .. s0 + 16w + 15: the M extent of the mma
//   prologue    Q tile [64 rows, D] --cp.async--> shared memory --ldmatrix--> registers (the A
//               fragments of every S = Q K^T below); per lane its two rows' keys [lo, hi)
//   key tiles   the block's keys (its first row's lo to its last row's hi; seqlens_k read on the
//               device) in tiles of 64 aligned down to 64: tiles above the causal diagonal or
//               below the local window are never visited. Two stages: tile i + 1's K and V rows
//               [64, D] --16-byte cp.async--> shared memory while the warps compute on tile i
//               (rows padded to an odd number of 16-byte units, so the 8 rows one ldmatrix
//               matrix reads fall in distinct banks; keys outside the block's zero-filled).
//     S = Q K^T   mma.m16n8k16 (M = 16 rows, N = 8 keys, K = 16 dims), f32
//     softmax     scale, softcap, mask (only on tiles that some row of the warp sees in part: the
//                 diagonal, the window's edge, the ragged end); online (m, l) per row in
//                 registers, log2 units, exp2
//     O += P V    mma.m16n8k16 (M = rows, N = 8 dims, K = 16 keys), P rounded to T
//   epilogue    O * finish_factor (1 / l; smooth softmax, head sink) rounded to T into the warp's
//               own Q rows of shared memory -> 16-byte stores to out [B, S, N, D]
//
// Every option but attention_bias is honoured here; plan_flash_prompt says what it leaves to the
// tiled kernel.
#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/flash_tile.cuh"

namespace onnx_genai::cuda {

namespace {

// Two blocks an SM (8 warps) is what 2 x 87 KB of shared memory at D = 128 allows; the register
// budget this leaves (255 a thread) holds the Q fragments, S and O without spilling.
constexpr int kMinBlocksPerSm = 2;
constexpr int64_t kMaxRowTiles = 65535;  // the grid's y limit


// Keys [lo, hi) query row s sees (none past the step's rows or for an entry seqlens_k rejects).
__device__ inline KeySpan row_span(const GqaArgs& a, const RowKeys& r, int64_t s) {
  if (!r.valid || s >= a.q_len) return {};
  int64_t lo = 0, hi = 0;
  key_range(a, r, s, lo, hi);
  return {static_cast<int>(lo), static_cast<int>(hi)};
}

// cp.async of the block's query rows [s0, s0 + kFlashBlockRows) of head h; rows past the step and the
// columns past head_size zero-filled.
template <typename T, int kMaxDims>
__device__ void load_query_tile(const GqaArgs& a, const FlashSmem& lay, T* smem, int64_t b, int64_t h, int64_t s0) {
  constexpr int kUnits = kMaxDims / 8;  // 16-byte units of the widest row
  static_assert(kFlashBlockRows * kUnits % kFlashThreads == 0, "whole block iterations");
  const T* query = a.do_rotary ? reinterpret_cast<const T*>(static_cast<const char*>(a.workspace) + a.rotated_q_offset)
                               : static_cast<const T*>(a.query);
  const int64_t q_row = a.do_rotary ? a.num_heads * a.head_size : a.query_row;
#pragma unroll
  for (int it = 0; it < kFlashBlockRows * kUnits / kFlashThreads; ++it) {
    const int idx = it * kFlashThreads + static_cast<int>(threadIdx.x), j = idx / kUnits, c = idx % kUnits;
    if (c * 8 >= lay.dims) continue;
    const int64_t s = s0 + j;
    const bool in = s < a.q_len && c * 8 < a.head_size;
    const T* src = in ? query + (b * a.q_len + s) * q_row + h * a.head_size + c * 8 : query;
    cp_async16(smem + lay.query() + j * lay.row + c * 8, src, in ? 16 : 0);
  }
}

// The warp's rows [w0, w0 + kFlashWarpRows) of head h: O * finish_factor rounded to T into its own
// rows of the query tile (no other warp reads them), then 16-byte stores to out.
template <typename T, int kMaxDims>
__device__ void store_rows(const GqaArgs& a, const FlashSmem& lay, T* rows_smem, WarpSoftmaxState<kMaxDims>& st, int64_t b,
                           int64_t h, int64_t w0, int lane) {
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 1);
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 2);
    const float factor = finish_factor<T>(a, st.m[rr] * kLn2, st.l[rr], h);
    T* row = rows_smem + (lane / 4 + 8 * rr) * lay.row + 2 * (lane % 4);
#pragma unroll
    for (int nt = 0; nt < kMaxDims / 8; ++nt) {
      if (nt * 8 >= lay.dims) break;
      *reinterpret_cast<uint32_t*>(row + nt * 8) = pack_pair<T>(st.acc[nt][2 * rr] * factor, st.acc[nt][2 * rr + 1] * factor);
    }
  }
  __syncwarp();
  using P = Pack<T, 8>;
  const int units = static_cast<int>(a.head_size / 8);
  for (int u = lane; u < kFlashWarpRows * units; u += 32) {
    const int j = u / units, c = u % units;
    const int64_t s = w0 + j;
    if (s >= a.q_len) break;  // rows in order: the rest are past the step too
    *reinterpret_cast<P*>(static_cast<T*>(a.out) + ((b * a.q_len + s) * a.num_heads + h) * a.head_size + c * 8) =
        *reinterpret_cast<const P*>(rows_smem + j * lay.row + c * 8);
  }
}

template <typename T, int kMaxDims>
__global__ void __launch_bounds__(kFlashThreads, kMinBlocksPerSm) gqa_flash_prompt_kernel(GqaArgs a) {
  extern __shared__ float4 prompt_smem[];
  T* smem = reinterpret_cast<T*>(prompt_smem);
  const FlashSmem lay(a.head_size);
  const int64_t h = blockIdx.x % a.num_heads, b = blockIdx.x / a.num_heads;
  const int64_t g = h / (a.num_heads / a.kv_heads);
  const int64_t s0 = static_cast<int64_t>(gridDim.y - 1 - blockIdx.y) * kFlashBlockRows;
  const RowKeys r = row_keys(a, b);
  load_query_tile<T, kMaxDims>(a, lay, smem, b, h, s0);
  cp_async_commit();

  // The block's keys: its first row's lo to its last row's hi (both grow with the row).
  const int lo = row_span(a, r, s0).lo, hi = row_span(a, r, imin(s0 + kFlashBlockRows, a.q_len) - 1).hi;
  const int first = lo & ~(kFlashKeyTile - 1);
  const int tiles = lo < hi ? (hi - first + kFlashKeyTile - 1) / kFlashKeyTile : 0;
  const int64_t kv_base = (b * a.kv_heads + g) * a.present_len * a.head_size;
  const T* k_rows = static_cast<const T*>(a.present_k) + kv_base;
  const T* v_rows = static_cast<const T*>(a.present_v) + kv_base;
  const auto contiguous = [d = a.head_size](int key) { return key * d; };
  if (tiles > 0) {
    load_key_tile<T, kMaxDims>(lay, smem + lay.keys(0), smem + lay.values(0), k_rows, v_rows, a.head_size, first, lo, hi,
                               contiguous);
  }
  cp_async_commit();

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t w0 = s0 + warp * kFlashWarpRows;
  T* warp_rows = smem + lay.query() + warp * kFlashWarpRows * lay.row;
  FlashWarp<kMaxDims> w;
  w.row = lay.row;
  w.dims = lay.dims;
  w.scale = a.scale;
  w.softcap = a.softcap;
  w.scale_log2 = a.scale * kLog2e;
  w.k_lane = (lane % 8 + lane / 16 * 8) * lay.row + lane / 8 % 2 * 8;
  w.v_lane = (lane % 8 + lane / 8 % 2 * 8) * lay.row + lane / 16 * 8;
  cp_async_wait<1>();  // the query tile has landed (this thread's copies) ...
  __syncthreads();     // ... and every thread's
  const int q_lane = (lane % 8 + lane / 8 % 2 * 8) * lay.row + lane / 16 * 8;
#pragma unroll
  for (int ks = 0; ks < kMaxDims / 16; ++ks) {
    if (ks * 16 < lay.dims) ldmatrix_x4<false>(w.q[ks], warp_rows + q_lane + ks * 16);
  }
  // Keys some row of the warp sees, [warp_lo, warp_hi), and keys every row sees, [full_lo, full_hi):
  // tiles inside the latter need no mask.
  KeySpan first_row, last_row;
  if (w0 < a.q_len) {
    first_row = row_span(a, r, w0);
    last_row = row_span(a, r, imin(w0 + kFlashWarpRows, a.q_len) - 1);
  }
  const int warp_lo = first_row.lo, warp_hi = last_row.hi, full_lo = last_row.lo, full_hi = first_row.hi;
  const KeySpan rows[2] = {row_span(a, r, w0 + lane / 4), row_span(a, r, w0 + lane / 4 + 8)};

  WarpSoftmaxState<kMaxDims> st;
  for (int i = 0; i < tiles; ++i) {
    const int k0 = first + i * kFlashKeyTile;
    if (i + 1 < tiles) {
      const int next = (i + 1) % kFlashKeyStages;
      load_key_tile<T, kMaxDims>(lay, smem + lay.keys(next), smem + lay.values(next), k_rows, v_rows, a.head_size,
                                 k0 + kFlashKeyTile, lo, hi, contiguous);
    }
    cp_async_commit();
    cp_async_wait<1>();  // tile i has landed (this thread's copies) ...
    __syncthreads();     // ... and every thread's
    const T* k_tile = smem + lay.keys(i % kFlashKeyStages);
    const T* v_tile = smem + lay.values(i % kFlashKeyStages);
    if (k0 < warp_hi && k0 + kFlashKeyTile > warp_lo) {
      if (k0 >= full_lo && k0 + kFlashKeyTile <= full_hi) attend_tile<false>(w, k_tile, v_tile, k0, rows, st, lane);
      else attend_tile<true>(w, k_tile, v_tile, k0, rows, st, lane);
    }
    __syncthreads();  // the stage is consumed before the next iteration refills it
  }
  cp_async_wait<0>();  // no copy outlives the block
  store_rows<T, kMaxDims>(a, lay, warp_rows, st, b, h, w0, lane);
}

// ---- Plan and launch ----

template <typename T, int kMaxDims>
Status plan_flash_for(GqaArgs& a) {
  OG_ASSIGN_OR_RETURN(const size_t bytes,
                      (plan_flash_smem<T, kMaxDims>(gqa_flash_prompt_kernel<T, kMaxDims>, a.head_size, "the flash prompt kernel")));
  if (bytes == 0) return Status::ok();
  a.prompt_dims = kMaxDims;
  a.prompt_smem_bytes = bytes;
  return Status::ok();
}

template <typename T, int kMaxDims>
void launch_flash_for(const GqaArgs& a, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(a.num_heads * a.batch), static_cast<unsigned>(ceil_div(a.q_len, kFlashBlockRows)));
  gqa_flash_prompt_kernel<T, kMaxDims><<<grid, kFlashThreads, a.prompt_smem_bytes, s>>>(a);
}

}  // namespace

// Left to the tiled kernel: a plan forced onto it (the benchmark's baseline); attention_bias (a
// global load per score, given when bias_keys > 0: total_sequence_length columns); head sizes
// past kFlashMaxDims; steps of more than kMaxRowTiles tiles. f32 never comes here (no
// tensor-core product with f32 accuracy).
template <typename T>
Status plan_flash_prompt(GqaArgs& a) {
  a.prompt_dims = 0;
  a.prompt_smem_bytes = 0;
  const int64_t dims = (a.head_size + 15) / 16 * 16;
  if (a.prompt_kernel == GqaPromptKernel::kTiled || a.bias_keys > 0 || dims > kFlashMaxDims ||
      ceil_div(a.q_len, kFlashBlockRows) > kMaxRowTiles) {
    return Status::ok();
  }
  return dims <= 64 ? plan_flash_for<T, 64>(a) : plan_flash_for<T, 128>(a);
}

template <typename T>
Status launch_flash_prompt(const GqaArgs& a, cudaStream_t stream) {
  if (a.prompt_dims == 64) launch_flash_for<T, 64>(a, stream);
  else launch_flash_for<T, 128>(a, stream);
  return Status::ok();  // launch_gqa checks the launches
}

template Status plan_flash_prompt<__half>(GqaArgs&);
template Status plan_flash_prompt<__nv_bfloat16>(GqaArgs&);
template Status launch_flash_prompt<__half>(const GqaArgs&, cudaStream_t);
template Status launch_flash_prompt<__nv_bfloat16>(const GqaArgs&, cudaStream_t);

}  // namespace onnx_genai::cuda
