// The FlashAttention-2 tile step shared by the tensor-core attention kernels that stream K / V
// tiles through shared memory (attention_prompt_kernels.cu: GroupQueryAttention prompts over a
// contiguous cache; paged_attention_flash.cu: PagedAttention over block tables): a block of 4
// warps, each owning 16 query rows (the M extent of mma.m16n8k16), takes tiles of 64 keys
// through two shared-memory stages. What differs between the kernels — where a key row lives,
// which keys a row sees, the epilogue — stays in them. .cu files only.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/attention_device.cuh"
#include "ops/cuda/tensor_core.cuh"

namespace onnx_genai::cuda {

inline constexpr int kFlashWarps = 4;
inline constexpr int kFlashThreads = 32 * kFlashWarps;
inline constexpr int kFlashWarpRows = 16;  // query rows per warp: the M extent of mma.m16n8k16
inline constexpr int kFlashBlockRows = kFlashWarps * kFlashWarpRows;
inline constexpr int kFlashKeyTile = 64;   // keys per shared-memory tile
inline constexpr int kFlashKeyStages = 2;  // tiles in shared memory: one computed on, one loading
inline constexpr int64_t kFlashMaxDims = 128;   // 256 dims of Q fragments and O accumulators would spill

// Keys [lo, hi) a query row sees; keys fit in int (lengths are int32): fewer registers in the loop.
struct KeySpan {
  int lo = 0, hi = 0;
};

static_assert(kFlashKeyTile % 16 == 0, "whole mma K steps of keys");

// Shared memory, in elements of T: the block's query tile (kFlashBlockRows rows), then per stage a K
// tile and a V tile (kFlashKeyTile rows each). A row holds head_size rounded up to 16 (the mma K
// extent; the pad is zero) plus 8: an odd number of 16-byte units.
struct FlashSmem {
  int dims, row;
  __host__ __device__ explicit FlashSmem(int64_t head_size)
      : dims(static_cast<int>((head_size + 15) / 16 * 16)), row(dims + 8) {}
  __host__ __device__ int query() const { return 0; }
  __host__ __device__ int keys(int stage) const { return (kFlashBlockRows + stage * 2 * kFlashKeyTile) * row; }
  __host__ __device__ int values(int stage) const { return keys(stage) + kFlashKeyTile * row; }
  __host__ __device__ size_t bytes(size_t elem) const { return static_cast<size_t>(keys(kFlashKeyStages)) * elem; }
};

// cp.async of the K and V rows of keys [k0, k0 + kFlashKeyTile) into a stage; keys outside
// [lo, hi), keys whose row_of(key) is negative (no storage) and the columns past head_size
// zero-filled. row_of gives the element offset of a key's row in k_rows / v_rows. Consecutive
// threads copy consecutive 16 bytes of a row.
template <typename T, int kMaxDims, typename RowOf>
__device__ __forceinline__ void load_key_tile(const FlashSmem& lay, T* k_dst, T* v_dst, const T* k_rows, const T* v_rows,
                                              int64_t d, int k0, int lo, int hi, RowOf row_of) {
  constexpr int kUnits = kMaxDims / 8;
  static_assert(kFlashKeyTile * kUnits % kFlashThreads == 0, "whole block iterations");
#pragma unroll
  for (int it = 0; it < kFlashKeyTile * kUnits / kFlashThreads; ++it) {
    const int idx = it * kFlashThreads + static_cast<int>(threadIdx.x), j = idx / kUnits, c = idx % kUnits;
    if (c * 8 >= lay.dims) continue;
    const int key = k0 + j;
    const int64_t row = key >= lo && key < hi && c * 8 < d ? row_of(key) : -1;
    const int64_t src = row >= 0 ? row + c * 8 : 0;
    cp_async16(k_dst + j * lay.row + c * 8, k_rows + src, row >= 0 ? 16 : 0);
    cp_async16(v_dst + j * lay.row + c * 8, v_rows + src, row >= 0 ? 16 : 0);
  }
}

// What one warp's tile step needs besides the tiles: its lanes' ldmatrix row offsets into a K / V
// tile (k_lane, v_lane), the smem row length, the Q fragments and the score scale.
template <int kMaxDims>
struct FlashWarp {
  int k_lane, v_lane, row, dims;
  float scale, softcap;
  float scale_log2;                  // scale * log2(e): scores straight to log2 units
  uint32_t q[kMaxDims / 16][4];      // {rows 0-7, dims +0}, {rows 8-15, +0}, {rows 0-7, +8}, {rows 8-15, +8}
};

// S = Q K^T for one tile: s[j][e] is (row lane/4 + 8(e/2), key 8j + 2(lane%4) + e%2 of the tile).
template <typename T, int kMaxDims>
__device__ __forceinline__ void tile_scores(const FlashWarp<kMaxDims>& w, const T* k_tile, float (&s)[kFlashKeyTile / 8][4]) {
#pragma unroll
  for (int ks = 0; ks < kMaxDims / 16; ++ks) {
    if (ks * 16 >= w.dims) break;
#pragma unroll
    for (int kp = 0; kp < kFlashKeyTile / 16; ++kp) {
      uint32_t kf[4];  // {keys 0-7, dims +0}, {keys 0-7, +8}, {keys 8-15, +0}, {keys 8-15, +8}
      ldmatrix_x4<false>(kf, k_tile + w.k_lane + kp * 16 * w.row + ks * 16);
      mma_16816<T>(s[2 * kp], w.q[ks], kf[0], kf[1]);
      mma_16816<T>(s[2 * kp + 1], w.q[ks], kf[2], kf[3]);
    }
  }
}

// Scores -> probabilities in place: scaled (and softcapped) like the CPU, in log2 units, masked to
// each row's keys when kMasked; then the online-softmax update of the lane's two rows (their 4
// lanes' max), the accumulators rescaled.
template <bool kMasked, int kMaxDims>
__device__ __forceinline__ void tile_softmax(const FlashWarp<kMaxDims>& w, int k0,
                                             const KeySpan (&rows)[2], float (&s)[kFlashKeyTile / 8][4],
                                             WarpSoftmaxState<kMaxDims>& st, int lane) {
  // Two loops, not a select per score: tanhf must not run where there is no softcap.
  if (w.softcap > 0.0f) {
#pragma unroll
    for (int j = 0; j < kFlashKeyTile / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = w.softcap * tanhf(s[j][e] * w.scale / w.softcap) * kLog2e;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kFlashKeyTile / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] *= w.scale_log2;
    }
  }
  if constexpr (kMasked) {
#pragma unroll
    for (int j = 0; j < kFlashKeyTile / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + 8 * j + 2 * (lane % 4) + e % 2;
        const KeySpan& span = rows[e / 2];
        if (key < span.lo || key >= span.hi) s[j][e] = kNegInf;
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float top = kNegInf;
#pragma unroll
    for (int j = 0; j < kFlashKeyTile / 8; ++j) top = fmaxf(top, fmaxf(s[j][2 * rr], s[j][2 * rr + 1]));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));  // the row's 4 lanes
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
    const float m = fmaxf(st.m[rr], top);
    const float ref = m == kNegInf ? 0.0f : m;  // nothing seen yet: every probability is 0
    const float corr = exp2f(st.m[rr] - ref);
    st.m[rr] = m;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kFlashKeyTile / 8; ++j) {
      s[j][2 * rr] = exp2f(s[j][2 * rr] - ref);
      s[j][2 * rr + 1] = exp2f(s[j][2 * rr + 1] - ref);
      sum += s[j][2 * rr] + s[j][2 * rr + 1];
    }
    st.l[rr] = st.l[rr] * corr + sum;
#pragma unroll
    for (int nt = 0; nt < kMaxDims / 8; ++nt) {
      st.acc[nt][2 * rr] *= corr;
      st.acc[nt][2 * rr + 1] *= corr;
    }
  }
}

// O += P V for one tile, P (the probabilities, rounded to T) as the A operand 16 keys at a time.
template <typename T, int kMaxDims>
__device__ __forceinline__ void tile_accumulate(const FlashWarp<kMaxDims>& w, const T* v_tile,
                                                const float (&s)[kFlashKeyTile / 8][4], WarpSoftmaxState<kMaxDims>& st) {
#pragma unroll
  for (int kk = 0; kk < kFlashKeyTile / 16; ++kk) {
    const uint32_t p[4] = {pack_pair<T>(s[2 * kk][0], s[2 * kk][1]), pack_pair<T>(s[2 * kk][2], s[2 * kk][3]),
                           pack_pair<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                           pack_pair<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int nt = 0; nt < kMaxDims / 8; nt += 2) {
      if (nt * 8 >= w.dims) break;
      uint32_t vf[4];  // transposed: {keys 0-7, dims 8nt}, {keys 8-15, 8nt}, {keys 0-7, 8nt+8}, {keys 8-15, 8nt+8}
      ldmatrix_x4<true>(vf, v_tile + w.v_lane + kk * 16 * w.row + nt * 8);
      mma_16816<T>(st.acc[nt], p, vf[0], vf[1]);
      mma_16816<T>(st.acc[nt + 1], p, vf[2], vf[3]);
    }
  }
}

template <bool kMasked, typename T, int kMaxDims>
__device__ __forceinline__ void attend_tile(const FlashWarp<kMaxDims>& w, const T* k_tile,
                                            const T* v_tile, int k0, const KeySpan (&rows)[2], WarpSoftmaxState<kMaxDims>& st,
                                            int lane) {
  float s[kFlashKeyTile / 8][4] = {};
  tile_scores<T, kMaxDims>(w, k_tile, s);
  tile_softmax<kMasked, kMaxDims>(w, k0, rows, s, st, lane);
  tile_accumulate<T, kMaxDims>(w, v_tile, s, st);
}


// Host side, once per plan: the shared memory a kernel of this family needs at `head_size` (0 when
// it does not fit the device), after raising the kernel's limit to what its widest head size
// needs (one limit serves every plan) and giving all of L1 to shared memory (two blocks an SM
// need 2 x 87 KB at D = 128).
template <typename T, int kMaxDims, typename Kernel>
Result<size_t> plan_flash_smem(Kernel kernel, int64_t head_size, const char* what) {
  int device = 0, opt_in = 0;
  OG_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  OG_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&opt_in, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                                 "shared memory per block"));
  const size_t bytes = FlashSmem(head_size).bytes(sizeof(T));
  const size_t limit = std::min(FlashSmem(kMaxDims).bytes(sizeof(T)), static_cast<size_t>(opt_in));
  if (bytes > limit) return size_t{0};
  OG_RETURN_IF_ERROR(cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(limit)),
                                 "raising the shared-memory limit").with_context(what));
  OG_RETURN_IF_ERROR(cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                      static_cast<int>(kMaxSharedCarveout)),
                                 "the shared-memory carveout").with_context(what));
  return bytes;
}

}  // namespace onnx_genai::cuda
