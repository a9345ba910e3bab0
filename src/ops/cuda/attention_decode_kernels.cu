// The tensor-core GroupQueryAttention decode (f16 / bf16, S <= kTensorCoreMaxRows query rows): the
// step every generated token takes (S = 1), a speculative-decoding verify or a short prompt
// (semantics: ops/schema/attention.h; reference: ops/cpu/attention_gqa.cc).
//
// gqa_decode_kernel  grid (chunks, Nkv * vector slices, B), 4 warps, launched as a programmatic
//                    dependent of the kernel before it. The `chunks` blocks of one (b, KV head,
//                    vector slice) split its keys; they form a thread-block cluster when there are
//                    few such units, else gqa_combine_kernel merges them (plan_decode_for).
//   query vectors  KV head g's group has S x group of them, (row s, query head), ordered by row
//                  then head; a block takes 16 (a slice), the M extent of the mma: at S = 8 and 4
//                  heads a group, 2 slices whose blocks read the same K / V (the second from L2).
//   block = (batch b, KV head g, vector slice, chunk of the entry's keys)
//   The entry's keys [lo, hi) (the union of its rows' causal ranges; seqlens_k, read on the
//   device) are divided among the blocks, at least min_chunk_keys each (key_chunks): a row far
//   shorter than the cache capacity (fixed at plan time, so that a captured graph is replayed
//   every step) runs on few blocks; the others exit, or in a cluster only take their share of the
//   final merge. Every vector masks the keys its row does not see (row s: up to offset + s).
//   prologue   the query vectors and the S new K / V rows (16-byte loads issued with the
//              seqlens_k load), cos / sin of the S positions -> shared memory, rotated there; the
//              block whose chunk holds the first new key writes the new rows to present (the
//              append); blocks reading a new key take it from shared memory (present may not
//              hold it yet)
//   warp w     steps w, w + 4, ... of 16 keys; per step:
//     K, V rows  --16-byte cp.async, 3 steps in flight per warp-->  shared memory (rows padded to
//                an odd number of 16-byte units: ldmatrix hits distinct banks)
//     S = Q K^T  mma.m16n8k16 (M = 16 query vectors, N = 8 keys, K = 16 dims), f32
//     softmax    scale, softcap, bias, mask; online (m, l) per vector in log2 units, exp2
//     O += P V   mma.m16n8k16 (M = vectors, N = 8 dims, K = 16 keys); P rounded to T
//   Every K / V byte crosses DRAM once, shared by all the vectors of a slice.
//   epilogue   the 4 warps' (m, l, O) merged in shared memory, then: one chunk, the output rows;
//              a cluster, every block reads the cluster's merged states (distributed shared
//              memory) and writes its share of the output rows; else the chunk's partials
//              (m, l, O) in the workspace, for gqa_combine_kernel.
#include <cooperative_groups.h>

#include <algorithm>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/attention_device.cuh"
#include "ops/cuda/tensor_core.cuh"

namespace onnx_genai::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = 32 * kDecodeWarps;
constexpr int kStepKeys = 16;     // keys per warp step: the K extent of mma.m16n8k16 for P.V
constexpr int kDecodeStages = 3;  // steps in flight per warp (cp.async groups)
constexpr int kDecodeVectors = 16;  // query vectors per block: the M extent of mma.m16n8k16
constexpr int64_t kMaxCluster = 16;  // Hopper's largest (non-portable) cluster
// Least keys per chunk: one step per warp in a cluster; two through the combine kernel (whose
// pass costs more than a step).
constexpr int64_t kClusterMinChunkKeys = int64_t{kStepKeys} * kDecodeWarps;
constexpr int64_t kCombineMinChunkKeys = 2 * kClusterMinChunkKeys;

// Shared memory of gqa_decode_kernel, in elements of T: per warp kDecodeStages stages of a K tile
// and a V tile (kStepKeys rows each), the block's query tile (kDecodeVectors rows), the S new K
// rows then the S new V rows, per position s one row of cos (elements [0, rotary_dim / 2)) and
// sin (the next rotary_dim / 2). A row holds head_size rounded up to 16 (the mma K extent; the pad
// is zero) plus 8: an odd number of 16-byte units, so the 8 rows one ldmatrix matrix reads fall in
// distinct banks. After the key loop the stages hold f32 merge state (offsets in floats): per
// warp (m, l) and O of its 16 vector rows, then the block's merged (m, l) and O.
struct DecodeSmem {
  int row, dims, new_count;  // elements per row; head_size rounded up to 16; new rows (S) of K and of V
  __host__ __device__ DecodeSmem(int64_t head_size, int64_t q_len)
      : row(static_cast<int>((head_size + 15) / 16 * 16 + 8)),
        dims(static_cast<int>((head_size + 15) / 16 * 16)),
        new_count(static_cast<int>(q_len)) {}
  __host__ __device__ int tile() const { return kStepKeys * row; }
  __host__ __device__ int stage(int warp, int s) const { return (warp * kDecodeStages + s) * 2 * tile(); }
  __host__ __device__ int query() const { return kDecodeWarps * kDecodeStages * 2 * tile(); }
  __host__ __device__ int new_rows() const { return query() + kDecodeVectors * row; }
  __host__ __device__ int rotary() const { return new_rows() + 2 * new_count * row; }
  __host__ __device__ size_t bytes(size_t elem) const { return static_cast<size_t>(rotary() + new_count * row) * elem; }
  __device__ int warp_ml() const { return 0; }
  __device__ int warp_acc() const { return kDecodeWarps * kDecodeVectors * 2; }
  __device__ int merged_ml() const { return warp_acc() + kDecodeWarps * kDecodeVectors * dims; }
  __device__ int merged_acc() const { return merged_ml() + kDecodeVectors * 2; }
};
// The merge state, (kDecodeWarps + 1) * kDecodeVectors rows of (dims + 2) floats, fits in the
// stages: kDecodeWarps * 2 * kDecodeStages * kStepKeys rows of (dims + 8) 2-byte elements.
static_assert((kDecodeWarps + 1) * kDecodeVectors * sizeof(float) <= kDecodeWarps * 2 * kDecodeStages * kStepKeys * 2,
              "merge state fits in the stages");

// Query vector vg of KV head g's group: its query head and row s (vectors ordered by row, then
// head), and its row of `out` viewed as [B * S * N, D].
struct QueryVector {
  int64_t head, row, out_row;
};
// 32-bit division (heads and vectors fit): a 64-bit one is a long instruction sequence, and the
// prologue and epilogue of a short decode are latency-bound on such chains.
__device__ __forceinline__ QueryVector query_vector(const GqaArgs& a, int64_t b, int64_t g, int vg) {
  const int group = static_cast<int>(a.num_heads) / static_cast<int>(a.kv_heads);
  const int64_t head = g * group + vg % group, row = vg / group;
  return {head, row, (b * a.q_len + row) * a.num_heads + head};
}

// The block's nv query vectors from v0 of KV head g's group, batch entry b.
struct BlockVectors {
  int64_t b, g, v0;
  int nv;
};

// What a lane knows of its two vectors (rows lane/4 and lane/4 + 8 of the block's M tile): the
// keys [lo, hi) each sees in the block's chunk (empty for rows past the block's vectors), and its
// query head and row (for attention_bias). Keys fit in int (seqlens_k is int32): fewer registers
// in the loop.
struct LaneVectors {
  int lo[2] = {0, 0}, hi[2] = {0, 0};
  int head[2] = {0, 0}, row[2] = {0, 0};
};

// cp.async of the K and V rows of keys [key0, key0 + kStepKeys) into a stage. Rows outside the
// block's keys [lo, hi) and the columns past head_size are zero-filled. Consecutive lanes copy
// consecutive 16 bytes of a row: 512 contiguous bytes per warp instruction at D = 128.
template <typename T, int kMaxDims>
__device__ __forceinline__ void load_step(T* k_tile, int row, const T* k_rows, const T* v_rows, int64_t d, int dims,
                                          int key0, int lo, int hi, int lane) {
  constexpr int kUnits = kMaxDims / 8;  // 16-byte units of the widest row: a power of two
  static_assert(kStepKeys * kUnits % 32 == 0, "whole warp iterations");
  T* v_tile = k_tile + kStepKeys * row;
#pragma unroll
  for (int it = 0; it < kStepKeys * kUnits / 32; ++it) {
    const int idx = it * 32 + lane, j = idx / kUnits, c = idx % kUnits;
    if (c * 8 >= dims) continue;
    const int key = key0 + j;
    const bool in = key >= lo && key < hi && c * 8 < d;
    const int64_t src = in ? key * d + c * 8 : 0;
    cp_async16(k_tile + j * row + c * 8, k_rows + src, in ? 16 : 0);
    cp_async16(v_tile + j * row + c * 8, v_rows + src, in ? 16 : 0);
  }
}

// The new rows of the block's keys [first, end) (new row key - offset) replace their rows of a
// step's tiles (keys [key0, key0 + kStepKeys)), which were copied from present before the
// appending block wrote them. Keys fit in int (seqlens_k is int32): fewer registers in the loop.
struct NewKeys {
  int first = 0, end = 0, offset = 0;
};

template <typename T>
__device__ void patch_new_rows(T* k_tile, const DecodeSmem& lay, const T* smem, const NewKeys& nk, int key0, int d,
                               int lane) {
  using P = Pack<T, 8>;
  const int first = max(key0, nk.first), end = min(key0 + kStepKeys, nk.end);
  if (first >= end) return;
  const int units = d / 8, per_tile = (end - first) * units;
  for (int u = lane; u < 2 * per_tile; u += 32) {
    const int which = u / per_tile, key = first + u % per_tile / units, c = u % units;  // which 0: K, 1: V
    *reinterpret_cast<P*>(k_tile + which * lay.tile() + (key - key0) * lay.row + c * 8) =
        *reinterpret_cast<const P*>(smem + lay.new_rows() + (which * lay.new_count + key - nk.offset) * lay.row + c * 8);
  }
  __syncwarp();
}

// Scores of one step -> probabilities: s[j][e] is (vector row lane/4 + 8(e/2), key key0 + 8j +
// 2(lane%4) + e%2). Scaled, softcapped, biased and masked like the CPU, then in log2 units the
// online-softmax update of the lane's two rows; p receives the probabilities as the A operand
// of P.V (rows = vectors, columns = the step's 16 keys), rounded to T.
template <typename T, int kMaxDims>
__device__ __forceinline__ void step_probabilities(const GqaArgs& a, float (&s)[2][4], int key0,
                                                   const LaneVectors& lv, const BlockVectors& bv,
                                                   WarpSoftmaxState<kMaxDims>& st, int lane, uint32_t (&p)[4]) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + 8 * j + 2 * (lane % 4) + e % 2;
      const int rr = e / 2;
      const bool seen = key >= lv.lo[rr] && key < lv.hi[rr];
      float x = s[j][e] * a.scale;
      if (a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
      if (seen && a.attention_bias != nullptr) x += bias_at<T>(a, bv.b, lv.head[rr], lv.row[rr], key);
      s[j][e] = seen ? x * kLog2e : kNegInf;
    }
  }
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float top = fmaxf(fmaxf(s[0][2 * rr], s[0][2 * rr + 1]), fmaxf(s[1][2 * rr], s[1][2 * rr + 1]));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));  // the row's 4 lanes
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
    const float m = fmaxf(st.m[rr], top);
    const float ref = m == kNegInf ? 0.0f : m;  // nothing seen yet: every probability is 0
    const float corr = exp2f(st.m[rr] - ref);
    st.m[rr] = m;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 2 * rr; e < 2 * rr + 2; ++e) {
        s[j][e] = exp2f(s[j][e] - ref);
        sum += s[j][e];
      }
    }
    st.l[rr] = st.l[rr] * corr + sum;
#pragma unroll
    for (int nt = 0; nt < kMaxDims / 8; ++nt) {
      st.acc[nt][2 * rr] *= corr;
      st.acc[nt][2 * rr + 1] *= corr;
    }
  }
  p[0] = pack_pair<T>(s[0][0], s[0][1]);
  p[1] = pack_pair<T>(s[0][2], s[0][3]);
  p[2] = pack_pair<T>(s[1][0], s[1][1]);
  p[3] = pack_pair<T>(s[1][2], s[1][3]);
}

// One step of 16 keys: S = Q K^T (two 8-key tiles), softmax, O += P V. `k_lane` / `v_lane` are
// this lane's ldmatrix row offsets into the K / V tile (see gqa_decode_kernel).
template <typename T, int kMaxDims>
__device__ __forceinline__ void decode_step(const GqaArgs& a, const T* k_tile, const T* v_tile, int k_lane, int v_lane,
                                            int dims, const uint32_t (&q)[kMaxDims / 16][4], int key0,
                                            const LaneVectors& lv, const BlockVectors& bv, WarpSoftmaxState<kMaxDims>& st,
                                            int lane) {
  float s[2][4] = {};
#pragma unroll
  for (int ks = 0; ks < kMaxDims / 16; ++ks) {
    if (ks * 16 >= dims) break;
    uint32_t kf[4];  // {keys 0-7, dims +0}, {keys 0-7, +8}, {keys 8-15, +0}, {keys 8-15, +8}
    ldmatrix_x4<false>(kf, k_tile + k_lane + ks * 16);
    mma_16816<T>(s[0], q[ks], kf[0], kf[1]);
    mma_16816<T>(s[1], q[ks], kf[2], kf[3]);
  }
  uint32_t p[4];
  step_probabilities<T, kMaxDims>(a, s, key0, lv, bv, st, lane, p);
#pragma unroll
  for (int nt = 0; nt < kMaxDims / 8; nt += 2) {
    if (nt * 8 >= dims) break;
    uint32_t vf[4];  // transposed: {keys 0-7, dims 8nt}, {keys 8-15, 8nt}, {keys 0-7, 8nt+8}, {keys 8-15, 8nt+8}
    ldmatrix_x4<true>(vf, v_tile + v_lane + nt * 8);
    mma_16816<T>(st.acc[nt], p, vf[0], vf[1]);
    mma_16816<T>(st.acc[nt + 1], p, vf[2], vf[3]);
  }
}

// The block's query vectors in registers (16-byte units of the query tile, zero past the block's
// vectors and past head_size): loaded before anything waits on seqlens_k, so their latency
// overlaps it.
template <typename T, int kMaxDims>
struct QueryInputs {
  using P = Pack<T, 8>;
  static constexpr int kLoads = kDecodeVectors * kMaxDims / 8 / kDecodeThreads;
  P q[kLoads];

  __device__ void load(const GqaArgs& a, const DecodeSmem& lay, int64_t b, int64_t g, int64_t v0, int nv) {
    const int64_t d = a.head_size;
    const int units = lay.dims / 8, row_units = static_cast<int>(d / 8);
    const T* query = static_cast<const T*>(a.query);
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      const int idx = static_cast<int>(threadIdx.x) + k * kDecodeThreads, v = idx / units, c = idx % units;
      q[k] = P{};
      if (v < nv && c < row_units) {
        const QueryVector qv = query_vector(a, b, g, static_cast<int>(v0 + v));
        q[k] = *reinterpret_cast<const P*>(query + (b * a.q_len + qv.row) * a.query_row + qv.head * d + c * 8);
      }
    }
  }

  // Into shared memory, with the S positions' cos / sin (rotary).
  __device__ void store(const GqaArgs& a, const DecodeSmem& lay, T* smem, const RowKeys& r, int64_t b) const {
    const int units = lay.dims / 8;
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      const int idx = static_cast<int>(threadIdx.x) + k * kDecodeThreads, v = idx / units, c = idx % units;
      if (v < kDecodeVectors) *reinterpret_cast<P*>(smem + lay.query() + v * lay.row + c * 8) = q[k];
    }
    if (!a.do_rotary) return;
    // kBatch loads in flight per thread (their latency once, not per element): all of them at
    // S = 8, rotary_dim 128.
    constexpr int kBatch = 4;
    const int64_t half = a.rotary_dim / 2, n = a.q_len * half;
    for (int64_t base = threadIdx.x; base < n; base += kBatch * kDecodeThreads) {
      T cos_at[kBatch], sin_at[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int64_t idx = base + k * kDecodeThreads;
        if (idx >= n) break;
        const int64_t at = rotary_position(a, r, b, idx / half) * half + idx % half;
        cos_at[k] = static_cast<const T*>(a.cos_cache)[at];
        sin_at[k] = static_cast<const T*>(a.sin_cache)[at];
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int64_t idx = base + k * kDecodeThreads, s = idx / half, p = idx % half;
        if (idx >= n) break;
        smem[lay.rotary() + s * lay.row + p] = cos_at[k];
        smem[lay.rotary() + s * lay.row + half + p] = sin_at[k];
      }
    }
  }
};

// cp.async of the S new K rows, then V rows, into shared memory: one commit group, before the
// stages' (no registers held while the prologue runs).
template <typename T>
__device__ void load_new_rows(const GqaArgs& a, const DecodeSmem& lay, T* smem, int64_t b, int64_t g) {
  const int row_units = static_cast<int>(a.head_size / 8), new_units = static_cast<int>(a.kv_len) * row_units;
  for (int u = static_cast<int>(threadIdx.x); u < 2 * new_units; u += kDecodeThreads) {
    const int which = u / new_units, j = u % new_units / row_units, c = u % row_units;  // which 0: K, 1: V
    const T* src = static_cast<const T*>(which == 0 ? a.new_k : a.new_v) + (b * a.q_len + j) * a.new_kv_row + g * a.head_size;
    cp_async16(smem + lay.new_rows() + (which * lay.new_count + j) * lay.row + c * 8, src + c * 8, 16);
  }
  cp_async_commit();
}

// Rotates the query tile's vectors and, with `new_k`, the new K rows in place, each at its row's
// position (rotary pairs are disjoint: a thread owns both elements of its pair).
template <typename T>
__device__ void rotate_in_place(const GqaArgs& a, const DecodeSmem& lay, T* smem, int64_t v0, int nv, bool new_k) {
  const int half = static_cast<int>(a.rotary_dim / 2);
  const int group = static_cast<int>(a.num_heads) / static_cast<int>(a.kv_heads);
  const int rows = nv + (new_k ? static_cast<int>(a.kv_len) : 0);
  for (int idx = static_cast<int>(threadIdx.x); idx < rows * half; idx += kDecodeThreads) {
    const int rr = idx / half, p = idx % half;
    const bool is_query = rr < nv;
    T* x = is_query ? smem + lay.query() + rr * lay.row : smem + lay.new_rows() + (rr - nv) * lay.row;
    const int s = is_query ? (static_cast<int>(v0) + rr) / group : rr - nv;
    const T* cos = smem + lay.rotary() + s * lay.row;
    int64_t ia, ib;
    rotary_pair(p, a.rotary_dim, a.rotary_interleaved, ia, ib);
    float ya, yb;
    rotate_pair(to_float(x[ia]), to_float(x[ib]), to_float(cos[p]), to_float(cos[half + p]), ya, yb);
    x[ia] = from_float<T>(ya);
    x[ib] = from_float<T>(yb);
  }
}

// Each block of the cluster finishes a share of the output rows from the merged (m, l, O) that the
// blocks holding keys (ranks [0, kc.end)) left in their shared memory.
template <typename T>
__device__ void cluster_finish(const GqaArgs& a, const DecodeSmem& lay, float* red, const KeyChunks& kc,
                               const BlockVectors& bv) {
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // the merged states are written
  const int d = static_cast<int>(a.head_size);
  const int count = static_cast<int>(kc.end);
  const int stride = kDecodeThreads * static_cast<int>(a.chunks);
  for (int idx = static_cast<int>(threadIdx.x + kDecodeThreads * cluster.block_rank()); idx < bv.nv * d; idx += stride) {
    const int vv = idx / d, i = idx % d;
    float m[kMaxCluster], l[kMaxCluster], o[kMaxCluster];
    float top = kNegInf;
#pragma unroll
    for (int c = 0; c < kMaxCluster; ++c) {
      m[c] = kNegInf;
      l[c] = o[c] = 0.0f;
      if (c >= count) continue;
      const float* remote = cluster.map_shared_rank(red, c);
      m[c] = remote[lay.merged_ml() + 2 * vv];
      l[c] = remote[lay.merged_ml() + 2 * vv + 1];
      o[c] = remote[lay.merged_acc() + vv * lay.dims + i];
      if (l[c] > 0.0f) top = fmaxf(top, m[c]);
    }
    float sum_l = 0.0f, sum_o = 0.0f;
#pragma unroll
    for (int c = 0; c < kMaxCluster; ++c) {
      if (l[c] <= 0.0f) continue;
      const float w = exp2f(m[c] - top);
      sum_l += w * l[c];
      sum_o += w * o[c];
    }
    const QueryVector qv = query_vector(a, bv.b, bv.g, static_cast<int>(bv.v0 + vv));
    static_cast<T*>(a.out)[qv.out_row * d + i] = from_float<T>(sum_o * finish_factor<T>(a, top * kLn2, sum_l, qv.head));
  }
  cluster.sync();  // no block leaves while another reads its shared memory
}

// Merges the 4 warps' states; writes the output rows (one chunk), the block's merged state for the
// cluster, or the chunk's partials for gqa_combine_kernel (m in natural-log units, l, O), f32.
template <typename T, int kMaxDims>
__device__ void decode_epilogue(const GqaArgs& a, const DecodeSmem& lay, float* red, WarpSoftmaxState<kMaxDims>& st,
                                const BlockVectors& bv, int64_t chunk, const KeyChunks& kc, bool has_keys, int warp,
                                int lane) {
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 1);
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 2);
  }
  __syncthreads();  // every warp is done with its stages, which the merge state overlays
  float* ml = red + lay.warp_ml();    // [warp][vector row][m, l]
  float* acc = red + lay.warp_acc();  // [warp][vector row][dims]
  const int row0 = warp * kDecodeVectors + lane / 4;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    if (lane % 4 == 0) {
      ml[(row0 + 8 * rr) * 2] = st.m[rr];
      ml[(row0 + 8 * rr) * 2 + 1] = st.l[rr];
    }
#pragma unroll
    for (int nt = 0; nt < kMaxDims / 8; ++nt) {
      if (nt * 8 >= lay.dims) break;
      *reinterpret_cast<float2*>(acc + (row0 + 8 * rr) * lay.dims + nt * 8 + 2 * (lane % 4)) =
          make_float2(st.acc[nt][2 * rr], st.acc[nt][2 * rr + 1]);
    }
  }
  __syncthreads();
  const int d = static_cast<int>(a.head_size);
  for (int idx = static_cast<int>(threadIdx.x); idx < bv.nv * d; idx += kDecodeThreads) {
    const int vv = idx / d, i = idx % d;
    float top = kNegInf;
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float* p = ml + (w * kDecodeVectors + vv) * 2;
      if (p[1] > 0.0f) top = fmaxf(top, p[0]);
    }
    float l = 0.0f, sum = 0.0f;
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float* p = ml + (w * kDecodeVectors + vv) * 2;
      if (p[1] <= 0.0f) continue;
      const float weight = exp2f(p[0] - top);
      l += weight * p[1];
      sum += weight * acc[(w * kDecodeVectors + vv) * lay.dims + i];
    }
    if (a.decode_cluster) {
      red[lay.merged_acc() + vv * lay.dims + i] = sum;
      if (i == 0) {
        red[lay.merged_ml() + 2 * vv] = top;
        red[lay.merged_ml() + 2 * vv + 1] = l;
      }
      continue;
    }
    const QueryVector qv = query_vector(a, bv.b, bv.g, static_cast<int>(bv.v0 + vv));
    if (a.chunks == 1) {
      static_cast<T*>(a.out)[qv.out_row * d + i] = from_float<T>(sum * finish_factor<T>(a, top * kLn2, l, qv.head));
    } else if (has_keys) {
      const int64_t at = qv.out_row * a.chunks + chunk;
      partial_acc(a)[at * d + i] = sum;
      if (i == 0) {
        partial_ml(a)[at * 2] = top * kLn2;
        partial_ml(a)[at * 2 + 1] = l;
      }
    }
  }
  if (a.decode_cluster) cluster_finish<T>(a, lay, red, kc, bv);
}

// The keys each of this lane's two vectors sees within the block's keys [lo, hi).
__device__ inline LaneVectors lane_vectors(const GqaArgs& a, const RowKeys& r, const BlockVectors& bv, int64_t lo,
                                           int64_t hi, int lane) {
  LaneVectors lv;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int v = lane / 4 + 8 * rr;
    if (!r.valid || v >= bv.nv) continue;
    const QueryVector qv = query_vector(a, bv.b, bv.g, static_cast<int>(bv.v0 + v));
    int64_t vlo = 0, vhi = 0;
    key_range(a, r, qv.row, vlo, vhi);
    lv.lo[rr] = static_cast<int>(imax(vlo, lo));
    lv.hi[rr] = static_cast<int>(imin(vhi, hi));
    lv.head[rr] = static_cast<int>(qv.head);
    lv.row[rr] = static_cast<int>(qv.row);
  }
  return lv;
}

// Writes the S new K (rotated) and V rows from shared memory to present rows [offset, offset + S).
template <typename T>
__device__ void append_new_rows(const GqaArgs& a, const DecodeSmem& lay, const T* smem, int64_t b, int64_t g,
                                int64_t offset) {
  const int row_units = static_cast<int>(a.head_size / 8), new_units = static_cast<int>(a.kv_len) * row_units;
  for (int u = static_cast<int>(threadIdx.x); u < 2 * new_units; u += kDecodeThreads) {
    const int which = u / new_units, j = u % new_units / row_units, c = u % row_units;
    T* present = static_cast<T*>(which == 0 ? a.present_k : a.present_v);
    const int64_t dst = ((b * a.kv_heads + g) * a.present_len + offset + j) * a.head_size + c * 8;
    *reinterpret_cast<Pack<T, 8>*>(present + dst) =
        *reinterpret_cast<const Pack<T, 8>*>(smem + lay.new_rows() + (which * lay.new_count + j) * lay.row + c * 8);
  }
}

template <typename T, int kMaxDims>
__global__ void __launch_bounds__(kDecodeThreads) gqa_decode_kernel(GqaArgs a) {
  extern __shared__ float4 decode_smem[];
  wait_for_prior_grid();
  allow_next_grid();
  T* smem = reinterpret_cast<T*>(decode_smem);
  float* red = reinterpret_cast<float*>(decode_smem);
  const DecodeSmem lay(a.head_size, a.q_len);
  const int64_t chunk = blockIdx.x, slice = blockIdx.y % a.head_slices;
  const int64_t group = a.num_heads / a.kv_heads, v0 = slice * kDecodeVectors;
  const BlockVectors bv{blockIdx.z, blockIdx.y / a.head_slices, v0, static_cast<int>(imin(kDecodeVectors, group * a.q_len - v0))};
  const int64_t b = bv.b;
  const RowKeys r = row_keys(a, b);
  QueryInputs<T, kMaxDims> inputs;
  inputs.load(a, lay, b, bv.g, v0, bv.nv);
  load_new_rows(a, lay, smem, b, bv.g);
  int64_t lo = 0, hi = 0;
  if (r.valid) entry_key_span(a, r, lo, hi);
  const KeyChunks kc = key_chunks(a, lo, hi);
  // The block whose chunk holds the first new key's row (r.offset) appends the new rows; one always does.
  const bool appends = r.valid && a.kv_len > 0 && chunk == imin(imax(r.offset - kc.first, 0) / kc.len, a.chunks - 1);
  const bool has_keys = chunk >= kc.begin && chunk < kc.end;
  if (!has_keys && !appends && a.chunks > 1) {  // nothing to do, but a cluster's merge
    cp_async_wait<0>();  // no copy outlives the block
    if (a.decode_cluster) cluster_finish<T>(a, lay, red, kc, bv);
    return;
  }
  if (r.valid) {  // the keys of this block's rows: its first row's first to its last row's end
    int64_t unused = 0;
    key_range(a, r, v0 / group, lo, unused);
    key_range(a, r, (v0 + bv.nv - 1) / group, unused, hi);
  }
  lo = imax(lo, kc.first + chunk * kc.len);
  hi = imin(hi, kc.first + (chunk + 1) * kc.len);
  // The new rows' keys among the block's: it reads them from shared memory.
  NewKeys nk;
  if (r.valid && a.kv_len > 0) {
    nk.first = static_cast<int>(imax(lo, r.offset));
    nk.end = static_cast<int>(imin(hi, r.offset + a.kv_len));
    nk.offset = static_cast<int>(r.offset);
  }
  const bool reads_new = nk.first < nk.end;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Steps of 16 keys from lo rounded down; warp w takes steps w, w + 4, ...
  // Keys fit in int (seqlens_k is int32): fewer registers in the loop.
  const int key_lo = static_cast<int>(lo), key_hi = static_cast<int>(hi), first = key_lo & ~(kStepKeys - 1);
  const int steps = key_lo < key_hi ? (key_hi - first + kStepKeys - 1) / kStepKeys : 0;
  const int my_steps = steps > warp ? (steps - warp + kDecodeWarps - 1) / kDecodeWarps : 0;
  const auto step_key = [&](int i) { return first + (i * kDecodeWarps + warp) * kStepKeys; };
  const auto stage = [&](int i) { return smem + lay.stage(warp, i % kDecodeStages); };
  const int64_t kv_base = (b * a.kv_heads + bv.g) * a.present_len * a.head_size;
  const T* k_rows = static_cast<const T*>(a.present_k) + kv_base;
  const T* v_rows = static_cast<const T*>(a.present_v) + kv_base;
#pragma unroll
  for (int i = 0; i < kDecodeStages; ++i) {  // in flight while the prologue runs
    if (i < my_steps) load_step<T, kMaxDims>(stage(i), lay.row, k_rows, v_rows, a.head_size, lay.dims, step_key(i), key_lo, key_hi, lane);
    cp_async_commit();
  }
  inputs.store(a, lay, smem, r, b);
  cp_async_wait<kDecodeStages>();  // the new rows have landed (this thread's copies; the barrier: everyone's)
  __syncthreads();
  if (a.do_rotary) {
    rotate_in_place(a, lay, smem, v0, bv.nv, reads_new || appends);
    __syncthreads();
  }
  if (appends && slice == 0) append_new_rows(a, lay, smem, b, bv.g, r.offset);  // once per KV head

  // Q fragments (A operand): {vectors 0-7, dims +0}, {vectors 8-15, +0}, {vectors 0-7, +8}, {vectors 8-15, +8}.
  uint32_t q[kMaxDims / 16][4];
  const int q_lane = (lane % 8 + lane / 8 % 2 * 8) * lay.row + lane / 16 * 8;
#pragma unroll
  for (int ks = 0; ks < kMaxDims / 16; ++ks) {
    if (ks * 16 < lay.dims) ldmatrix_x4<false>(q[ks], smem + lay.query() + q_lane + ks * 16);
  }
  const int k_lane = (lane % 8 + lane / 16 * 8) * lay.row + lane / 8 % 2 * 8;
  const int v_lane = (lane % 8 + lane / 8 % 2 * 8) * lay.row + lane / 16 * 8;
  const LaneVectors lv = lane_vectors(a, r, bv, lo, hi, lane);
  WarpSoftmaxState<kMaxDims> st;
  for (int i = 0; i < my_steps; ++i) {
    cp_async_wait<kDecodeStages - 1>();  // step i has landed (this lane's copies) ...
    __syncwarp();                        // ... and every lane's
    T* k_tile = stage(i);
    const int key0 = step_key(i);
    if (reads_new) patch_new_rows(k_tile, lay, smem, nk, key0, static_cast<int>(a.head_size), lane);
    decode_step<T, kMaxDims>(a, k_tile, k_tile + lay.tile(), k_lane, v_lane, lay.dims, q, key0, lv, bv, st, lane);
    __syncwarp();  // the stage is consumed before it is refilled
    if (i + kDecodeStages < my_steps) {
      load_step<T, kMaxDims>(stage(i), lay.row, k_rows, v_rows, a.head_size, lay.dims, step_key(i + kDecodeStages), key_lo, key_hi, lane);
    }
    cp_async_commit();
  }
  cp_async_wait<0>();
  decode_epilogue<T, kMaxDims>(a, lay, red, st, bv, chunk, kc, has_keys, warp, lane);
}

// ---- Plan and launch ----

Result<int> device_attribute(cudaDeviceAttr attribute, const char* what) {
  int device = 0, value = 0;
  OG_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  OG_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&value, attribute, device), what));
  return value;
}

// How many clusters of `size` blocks fit on the GPU at once (0 where none does).
template <typename T, int kMaxDims>
int active_clusters(const GqaArgs& a, int64_t size) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(size));
  config.blockDim = dim3(kDecodeThreads);
  config.dynamicSmemBytes = a.decode_smem_bytes;
  cudaLaunchAttribute cluster = {};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(size);
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, gqa_decode_kernel<T, kMaxDims>, &config) != cudaSuccess) {
    cudaGetLastError();  // not sticky: a smaller size is tried instead
    return 0;
  }
  return clusters;
}

// One wave: about as many blocks as fit on the GPU at once (a second, partial wave would double
// the time), each (b, KV head, vector slice) unit split into `chunks` blocks. The time goes in
// serial latency more than in bandwidth: each warp's 16-key step, and a merge pass (measured on
// the H200: about 2.4 us a step, 2.5 us a cluster merge, 4 us a combine launch). With few units
// (a wave holds kMaxCluster blocks or more per unit) a cluster of up to 16 merges in shared
// memory and splits each row's own keys down to one step per warp, so a row far shorter than the
// cache runs on few blocks with no second launch (128 keys in a 4096-key cache: 10.9 us against
// 14.3 us through the combine kernel). With many units clusters fill the SMs less well than
// plain blocks (GPC granularity) and gqa_combine_kernel merges (B8, 2048 keys: 33.7 us against
// 38-40 us in clusters). A step whose shared memory does not fit (S new rows and positions on top
// of the stages) is left to the prompt kernel: decode_dims stays 0.
template <typename T, int kMaxDims>
Status plan_decode_for(GqaArgs& a) {
  const auto kernel = gqa_decode_kernel<T, kMaxDims>;
  OG_ASSIGN_OR_RETURN(const int opt_in, device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, "shared memory per block"));
  // The limit for the widest head size and longest step of this instance: one limit serves every plan.
  const size_t limit = std::min(DecodeSmem(kMaxDims, kTensorCoreMaxRows).bytes(sizeof(T)), static_cast<size_t>(opt_in));
  const size_t bytes = DecodeSmem(a.head_size, a.q_len).bytes(sizeof(T));
  if (bytes > limit) return Status::ok();
  a.decode_dims = kMaxDims;
  a.decode_smem_bytes = bytes;
  OG_RETURN_IF_ERROR(cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(limit)),
                                 "raising the decode kernel's shared-memory limit"));
  OG_RETURN_IF_ERROR(cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                                 "allowing the decode kernel clusters of 16"));
  int per_sm = 0;
  OG_RETURN_IF_ERROR(cuda_status(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kDecodeThreads, a.decode_smem_bytes), "decode kernel occupancy"));
  OG_ASSIGN_OR_RETURN(const int sms, device_attribute(cudaDevAttrMultiProcessorCount, "multiprocessor count"));
  const int64_t vectors = a.num_heads / a.kv_heads * a.q_len;
  a.heads_per_block = std::min<int64_t>(vectors, kDecodeVectors);
  a.head_slices = ceil_div(vectors, kDecodeVectors);
  const int64_t units = std::max<int64_t>(a.batch * a.kv_heads * a.head_slices, 1);
  const int64_t per_unit = int64_t{std::max(per_sm, 1)} * sms / units;
  a.decode_cluster = per_unit >= kMaxCluster;
  a.min_chunk_keys = a.decode_cluster ? kClusterMinChunkKeys : kCombineMinChunkKeys;
  const int64_t by_keys = std::max<int64_t>(a.present_len / a.min_chunk_keys, 1);
  a.chunks = std::clamp<int64_t>(per_unit, 1, std::min(a.decode_cluster ? kMaxCluster : kMaxChunks, by_keys));
  while (a.decode_cluster && a.chunks > 1 && active_clusters<T, kMaxDims>(a, a.chunks) < units) --a.chunks;
  a.decode_cluster = a.decode_cluster && a.chunks > 1;
  a.chunk_len = 0;  // sized per row on the device (key_chunks)
  return Status::ok();
}

// Launched as a programmatic dependent of the kernel before it (the kernel waits for it before
// touching memory), so its launch overlaps that kernel's end.
template <typename T, int kMaxDims>
Status launch_decode_for(const GqaArgs& a, cudaStream_t s) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(a.chunks), static_cast<unsigned>(a.kv_heads * a.head_slices),
                        static_cast<unsigned>(a.batch));
  config.blockDim = dim3(kDecodeThreads);
  config.dynamicSmemBytes = a.decode_smem_bytes;
  config.stream = s;
  cudaLaunchAttribute attrs[3] = {};
  unsigned n = 0;
  attrs[n].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
  attrs[n++].val.sharedMemCarveout = kMaxSharedCarveout;
  attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  if (a.decode_cluster) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = static_cast<unsigned>(a.chunks);
    attrs[n].val.clusterDim.y = attrs[n].val.clusterDim.z = 1;
    ++n;
  }
  config.attrs = attrs;
  config.numAttrs = n;
  OG_RETURN_IF_ERROR(
      cuda_status(cudaLaunchKernelEx(&config, gqa_decode_kernel<T, kMaxDims>, a), "GroupQueryAttention decode launch"));
  return a.chunks > 1 && !a.decode_cluster ? launch_gqa_combine<T>(a, s, true) : Status::ok();
}

}  // namespace

template <typename T>
Status plan_tensor_core_decode(GqaArgs& a) {
  const int64_t dims = (a.head_size + 15) / 16 * 16;
  if (dims <= 64) return plan_decode_for<T, 64>(a);
  if (dims <= 128) return plan_decode_for<T, 128>(a);
  return plan_decode_for<T, 256>(a);
}

template <typename T>
Status launch_tensor_core_decode(const GqaArgs& a, cudaStream_t s) {
  if (a.decode_dims == 64) return launch_decode_for<T, 64>(a, s);
  if (a.decode_dims == 128) return launch_decode_for<T, 128>(a, s);
  return launch_decode_for<T, 256>(a, s);
}

template Status plan_tensor_core_decode<__half>(GqaArgs&);
template Status plan_tensor_core_decode<__nv_bfloat16>(GqaArgs&);
template Status launch_tensor_core_decode<__half>(const GqaArgs&, cudaStream_t);
template Status launch_tensor_core_decode<__nv_bfloat16>(const GqaArgs&, cudaStream_t);

}  // namespace onnx_genai::cuda
