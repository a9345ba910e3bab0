// The tensor-core PagedAttention kernel (f16 / bf16, head sizes up to 128 in multiples of 8):
// decodes and prefill chunks of many sequences in one launch, each KV byte read once per KV head
// group (semantics: ops/schema/paged_attention.h; reference: ops/cpu/paged_attention.cc). It runs
// after paged_append_kernel has written the step's keys and values into the pool, so every key
// comes from the cache.
//
// Query vectors: sequence s has n_s new tokens; KV head g's group of G = N / Nkv query heads gives
// it n_s x G vectors (row r, head g G + i), ordered by row then head. A slice is 64 of them, the
// rows of the block's four mma warps: a decode's G vectors share one slice (and one read of the
// sequence's keys), a prefill chunk's rows fill slices in turn.
//
// paged_units_kernel   one block: unit_starts[s] = the slices before sequence s (a prefix sum of
//                      ceil(n_s G / 64)), so the grid can be fixed at plan time (from the step's
//                      token and sequence counts) while the split into sequences stays on the device.
// paged_flash_kernel   grid (units, Nkv, splits), 4 warps: block = (slice of sequence s, KV head g,
//                      split z of the slice's keys); blocks past the step's slices exit.
//   prologue   the slice's 64 query vectors, rotated at their positions and rounded to T as the
//              CPU does, -> shared memory -> ldmatrix -> the A fragments of S = Q K^T
//   keys       the slice's keys (its first row's window start to its last row's position), cut
//              into `splits` equal chunks; the block's chunk in tiles of 64 aligned down to 64,
//              two shared-memory stages, each key row found through the block table (16-byte
//              cp.async; keys outside the chunk zero-filled); the flash tile step (flash_tile.cuh)
//              masks keys a row does not see only on tiles some row sees in part
//   epilogue   one split: O / l rounded to T straight to out; else (m, l, O) into the partials,
//              laid out as the CUDA-core kernel's, for paged_combine_kernel.
// Capture-safe: no allocation, no host sync, launch shapes fixed by the plan.
#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/flash_tile.cuh"
#include "ops/cuda/paged_attention_device.cuh"

namespace onnx_genai::cuda {

namespace {

constexpr int kUnitsThreads = 256;

__device__ int64_t tokens_of(const PagedAttentionArgs& a, int64_t s) {
  return imax(0, a.query_starts[s + 1] - a.query_starts[s]);
}

__device__ int64_t slices_of(const PagedAttentionArgs& a, int64_t s) {
  return ceil_div(tokens_of(a, s) * (a.num_heads / a.kv_heads), kFlashBlockRows);
}

// unit_starts[0..S]: each thread sums a contiguous run of sequences, the block scans the sums.
__global__ void __launch_bounds__(kUnitsThreads) paged_units_kernel(PagedAttentionArgs a, int32_t* unit_starts) {
  __shared__ int64_t sums[kUnitsThreads];
  const int64_t per = ceil_div(a.sequences, kUnitsThreads);
  const int64_t first = threadIdx.x * per, last = imin(first + per, a.sequences);
  int64_t mine = 0;
  for (int64_t s = first; s < last; ++s) mine += slices_of(a, s);
  sums[threadIdx.x] = mine;
  __syncthreads();
  for (int step = 1; step < kUnitsThreads; step *= 2) {  // inclusive scan (Hillis-Steele)
    const int64_t add = threadIdx.x >= step ? sums[threadIdx.x - step] : 0;
    __syncthreads();
    sums[threadIdx.x] += add;
    __syncthreads();
  }
  int64_t at = sums[threadIdx.x] - mine;
  for (int64_t s = first; s < last; ++s) {
    unit_starts[s] = static_cast<int32_t>(at);
    at += slices_of(a, s);
  }
  if (threadIdx.x == kUnitsThreads - 1) unit_starts[a.sequences] = static_cast<int32_t>(sums[threadIdx.x]);
}

// The block's sequence (last s with unit_starts[s] <= unit), or -1 past the step's slices.
__device__ int64_t sequence_of_unit(const PagedAttentionArgs& a, const int32_t* unit_starts, int64_t unit) {
  if (unit >= unit_starts[a.sequences]) return -1;
  int64_t lo = 0, hi = a.sequences - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (unit_starts[mid] <= unit) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Where the block works: sequence s, its rows' positions, the group and the key chunk.
struct SliceKeys {
  int64_t s = -1, group = 1, n = 0, v0 = 0, first_pos = 0;  // first_pos: position of row 0
  int lo = 0, hi = 0;                                         // the chunk's keys

  __device__ int64_t vectors() const { return n * group; }
  // Keys vector v sees, cut to the chunk; none for a vector past the sequence's.
  __device__ KeySpan span(const PagedAttentionArgs& a, int64_t v) const {
    if (v >= vectors()) return {};
    const int64_t pos = first_pos + v / group;
    const int64_t start = a.window >= 0 ? imax(0, pos + 1 - a.window) : 0;
    return {static_cast<int>(imax(start, lo)), static_cast<int>(imin(pos + 1, hi))};
  }
};

__device__ SliceKeys slice_keys(const PagedAttentionArgs& a, const int32_t* unit_starts) {
  SliceKeys k;
  k.s = sequence_of_unit(a, unit_starts, blockIdx.x);
  if (k.s < 0) return k;
  k.group = a.num_heads / a.kv_heads;
  k.n = tokens_of(a, k.s);
  k.v0 = (int64_t{blockIdx.x} - unit_starts[k.s]) * kFlashBlockRows;
  k.first_pos = a.seq_lens[k.s] - k.n;
  const int64_t last_v = imin(k.v0 + kFlashBlockRows, k.vectors()) - 1;
  const int64_t first_row_pos = k.first_pos + k.v0 / k.group, last_row_pos = k.first_pos + last_v / k.group;
  const int64_t lo = a.window >= 0 ? imax(0, first_row_pos + 1 - a.window) : 0, hi = imax(lo, last_row_pos + 1);
  const int64_t chunk = ceil_div(hi - lo, a.splits);
  k.lo = static_cast<int>(imin(hi, lo + blockIdx.z * chunk));
  k.hi = static_cast<int>(imin(hi, k.lo + chunk));
  return k;
}

// The slice's query vectors into the query tile: rotated at their rows' positions and rounded to
// T (the CPU's rotate_head); vectors past the sequence's and the pad columns zero.
template <typename T>
__device__ void load_queries(const PagedAttentionArgs& a, const SliceKeys& k, const FlashSmem& lay, T* tile, int64_t g) {
  const int64_t half = a.rotary_dim / 2;
  for (int e = threadIdx.x; e < kFlashBlockRows * lay.dims; e += kFlashThreads) {
    const int j = e / lay.dims, i = e % lay.dims;
    const int64_t v = k.v0 + j;
    T value = from_float<T>(0.0f);
    if (v < k.vectors() && i < a.head_size) {
      const int64_t r = v / k.group, h = g * k.group + v % k.group, pos = k.first_pos + r;
      const bool rotary = a.do_rotary && pos >= 0 && pos < a.rotary_rows;
      const T* cos = rotary ? static_cast<const T*>(a.cos_cache) + pos * half : nullptr;
      const T* sin = rotary ? static_cast<const T*>(a.sin_cache) + pos * half : nullptr;
      const T* q = static_cast<const T*>(a.query) + (a.query_starts[k.s] + r) * a.query_row + h * a.head_size;
      value = head_element(q, i, cos, sin, a.rotary_dim, a.rotary_interleaved);
    }
    tile[j * lay.row + i] = value;
  }
}

// The warp's vectors: O / l to out, or (m, l, O) to the partials of split z.
template <typename T, int kMaxDims>
__device__ void store_vectors(const PagedAttentionArgs& a, const SliceKeys& k, WarpSoftmaxState<kMaxDims>& st, int64_t g,
                              int64_t warp_v0, int lane) {
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 1);
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 2);
    const int64_t v = warp_v0 + lane / 4 + 8 * rr;
    if (v >= k.vectors()) continue;
    const int64_t t = a.query_starts[k.s] + v / k.group, h = g * k.group + v % k.group;
    const int col0 = 2 * (lane % 4);
    if (a.splits == 1) {
      const float inv = paged_finish<T>(a, st.m[rr] * kLn2, st.l[rr], h);
      T* out = static_cast<T*>(a.out) + (t * a.num_heads + h) * a.head_size;
#pragma unroll
      for (int nt = 0; nt < kMaxDims / 8; ++nt) {
        if (nt * 8 >= a.head_size) break;
        *reinterpret_cast<uint32_t*>(out + nt * 8 + col0) = pack_pair<T>(st.acc[nt][2 * rr] * inv, st.acc[nt][2 * rr + 1] * inv);
      }
      continue;
    }
    float* partial = a.partials + ((t * a.num_heads + h) * a.splits + blockIdx.z) * (a.head_size + 2);
    const bool seen = st.l[rr] > 0.0f;
    if (lane % 4 == 0) {
      partial[0] = seen ? st.m[rr] * kLn2 : kNegInf;  // the combine kernel's natural-log units
      partial[1] = st.l[rr];
    }
    if (!seen) continue;
#pragma unroll
    for (int nt = 0; nt < kMaxDims / 8; ++nt) {
      if (nt * 8 >= a.head_size) break;
      partial[2 + nt * 8 + col0] = st.acc[nt][2 * rr];
      partial[3 + nt * 8 + col0] = st.acc[nt][2 * rr + 1];
    }
  }
}

template <typename T, int kMaxDims>
__global__ void __launch_bounds__(kFlashThreads, 2) paged_flash_kernel(PagedAttentionArgs a, const int32_t* unit_starts) {
  extern __shared__ float4 paged_smem[];
  T* smem = reinterpret_cast<T*>(paged_smem);
  const SliceKeys k = slice_keys(a, unit_starts);
  if (k.s < 0) return;
  const FlashSmem lay(a.head_size);
  const int64_t g = blockIdx.y;
  load_queries<T>(a, k, lay, smem + lay.query(), g);
  const int first = k.lo & ~(kFlashKeyTile - 1);
  const int tiles = k.lo < k.hi ? (k.hi - first + kFlashKeyTile - 1) / kFlashKeyTile : 0;
  const T* k_rows = static_cast<const T*>(a.key_cache);
  const T* v_rows = static_cast<const T*>(a.value_cache);
  const auto paged = [&a, &k, g](int key) { return slot_of(a, k.s, key, g); };
  if (tiles > 0) {
    load_key_tile<T, kMaxDims>(lay, smem + lay.keys(0), smem + lay.values(0), k_rows, v_rows, a.head_size, first, k.lo,
                               k.hi, paged);
  }
  cp_async_commit();

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t warp_v0 = k.v0 + warp * kFlashWarpRows;
  FlashWarp<kMaxDims> w;
  w.row = lay.row;
  w.dims = lay.dims;
  w.scale = a.scale;
  w.softcap = a.softcap;
  w.scale_log2 = a.scale * kLog2e;
  w.k_lane = (lane % 8 + lane / 16 * 8) * lay.row + lane / 8 % 2 * 8;
  w.v_lane = (lane % 8 + lane / 8 % 2 * 8) * lay.row + lane / 16 * 8;
  __syncthreads();  // the query tile is written
  const int q_lane = (lane % 8 + lane / 8 % 2 * 8) * lay.row + lane / 16 * 8;
  const T* warp_rows = smem + lay.query() + warp * kFlashWarpRows * lay.row;
#pragma unroll
  for (int ks = 0; ks < kMaxDims / 16; ++ks) {
    if (ks * 16 < lay.dims) ldmatrix_x4<false>(w.q[ks], warp_rows + q_lane + ks * 16);
  }
  // Keys some vector of the warp sees, [warp_lo, warp_hi), and keys all of them see: tiles inside
  // the latter need no mask. Positions grow with the vector, so the first and last decide.
  const int64_t warp_last = imin(warp_v0 + kFlashWarpRows, k.vectors()) - 1;
  const KeySpan first_span = k.span(a, warp_v0), last_span = k.span(a, warp_last);
  const int warp_lo = first_span.lo, warp_hi = last_span.hi, full_lo = last_span.lo, full_hi = first_span.hi;
  const KeySpan rows[2] = {k.span(a, warp_v0 + lane / 4), k.span(a, warp_v0 + lane / 4 + 8)};

  WarpSoftmaxState<kMaxDims> st;
  for (int i = 0; i < tiles; ++i) {
    const int k0 = first + i * kFlashKeyTile;
    if (i + 1 < tiles) {
      const int next = (i + 1) % kFlashKeyStages;
      load_key_tile<T, kMaxDims>(lay, smem + lay.keys(next), smem + lay.values(next), k_rows, v_rows, a.head_size,
                                 k0 + kFlashKeyTile, k.lo, k.hi, paged);
    }
    cp_async_commit();
    cp_async_wait<1>();  // tile i has landed (this thread's copies) ...
    __syncthreads();     // ... and every thread's
    const T* k_tile = smem + lay.keys(i % kFlashKeyStages);
    const T* v_tile = smem + lay.values(i % kFlashKeyStages);
    if (warp_v0 < k.vectors() && k0 < warp_hi && k0 + kFlashKeyTile > warp_lo) {
      if (k0 >= full_lo && k0 + kFlashKeyTile <= full_hi) attend_tile<false>(w, k_tile, v_tile, k0, rows, st, lane);
      else attend_tile<true>(w, k_tile, v_tile, k0, rows, st, lane);
    }
    __syncthreads();  // the stage is consumed before the next iteration refills it
  }
  cp_async_wait<0>();  // no copy outlives the block
  store_vectors<T, kMaxDims>(a, k, st, g, warp_v0, lane);
}

template <typename T, int kMaxDims>
Status plan_for(PagedAttentionArgs& a) {
  OG_ASSIGN_OR_RETURN(const size_t bytes,
                      (plan_flash_smem<T, kMaxDims>(paged_flash_kernel<T, kMaxDims>, a.head_size, "the paged flash kernel")));
  if (bytes == 0) return Status::ok();
  a.flash_dims = kMaxDims;
  a.flash_smem_bytes = bytes;
  // Slices of 64 query vectors: at most one partly filled per sequence with tokens, and no more
  // such sequences than tokens (a one-token decode in a plan for 64 slots has 2 slices, not 65:
  // the split count below is chosen from this, so overcounting left one long decode unsplit).
  a.flash_units = ceil_div(a.tokens * (a.num_heads / a.kv_heads), kFlashBlockRows) + std::min(a.sequences, a.tokens);
  return Status::ok();
}

template <typename T, int kMaxDims>
void launch_for(const PagedAttentionArgs& a, const int32_t* unit_starts, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(a.flash_units), static_cast<unsigned>(a.kv_heads), static_cast<unsigned>(a.splits));
  paged_flash_kernel<T, kMaxDims><<<grid, kFlashThreads, a.flash_smem_bytes, s>>>(a, unit_starts);
}

}  // namespace

Status plan_paged_flash(PagedAttentionArgs& a) {
  a.flash_dims = 0;
  const bool half = a.dtype == DType::kF16, bf16 = a.dtype == DType::kBF16;
  if ((!half && !bf16) || a.head_size % 8 != 0 || a.head_size > kFlashMaxDims) return Status::ok();
  const bool narrow = a.head_size <= 64;
  if (half) return narrow ? plan_for<__half, 64>(a) : plan_for<__half, 128>(a);
  return narrow ? plan_for<__nv_bfloat16, 64>(a) : plan_for<__nv_bfloat16, 128>(a);
}

void launch_paged_flash(const PagedAttentionArgs& a, cudaStream_t s) {
  auto* unit_starts = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(a.partials) + a.unit_starts_offset);
  paged_units_kernel<<<1, kUnitsThreads, 0, s>>>(a, unit_starts);
  const bool wide = a.flash_dims == 128;
  if (a.dtype == DType::kF16) {
    if (wide) launch_for<__half, 128>(a, unit_starts, s); else launch_for<__half, 64>(a, unit_starts, s);
  } else {
    if (wide) launch_for<__nv_bfloat16, 128>(a, unit_starts, s); else launch_for<__nv_bfloat16, 64>(a, unit_starts, s);
  }
}

}  // namespace onnx_genai::cuda
