// com.microsoft GroupQueryAttention on the GPU (semantics: ops/schema/attention.h; reference:
// ops/cpu/attention_gqa.cc): plan, launches, and the kernels of prompts and f32 decodes. The f16 /
// bf16 decode (S = 1, the step every generated token takes) and short steps (S <= 16: a
// speculative-decoding verify, a short prompt) run on the tensor-core decode kernel
// (attention_decode_kernels.cu), after gqa_copy_past_kernel when present is not the past buffer.
//
// Longer prompts, and every step in f32 (no f32 tensor-core product with f32 accuracy): up to four
// launches. In f16 / bf16, step 3 is the flash prompt kernel (attention_prompt_kernels.cu:
// tensor cores, 64 query rows of one head a block) wherever it supports the step.
//   1. gqa_append_kernel     grid (S, B): per new token, rotates the query heads (do_rotary) into
//                            the workspace [B, S, N, D] (rounded to T, as the CPU does) and writes
//                            the token's K (rotated) and V rows into present at row offset_b + s.
//   2. gqa_copy_past_kernel  grid (present_len / 16, B*Nkv), only when present is not the past
//                            buffer: past rows [0, keep_b) copied, rows after the written ones
//                            zeroed (16-byte accesses).
//   3. gqa_attention_kernel  grid (head slices * row tiles * chunks, Nkv, B), 128 threads:
//
//        block = (batch b, KV head g, up to VPB query vectors (head of g's group, row), KV chunk)
//        for each tile of 64 keys in the span the block's vectors see:
//          K, V tile  --16-byte loads-->  shared memory (K rows padded by 16 bytes: the
//                                          thread-per-key reads below hit distinct banks)
//          scores     thread (key j, half of the vectors): q . k over D from shared memory,
//                     softcap, attention_bias, masking (causal / window / chunk) -> p_s
//          softmax    warp per vector: tile max, running (m, l), correction, p = e^(x - m)
//          acc        thread per output dim: acc[v] = acc[v] * correction + sum_j p[v][j] V[j]
//        A decode (S = 1) splits [0, present_len) into `chunks`, each block leaving partial
//        (m, l, acc) in the workspace.
//   4. gqa_combine_kernel    grid (N, B*S), when the decode was split: rescales and sums the
//                            partials of the chunks that hold the row's keys.
//
// Per batch entry b, seqlens_k[b] is read on the device (see row_keys): total_b, the causal
// offset and the past rows to keep, exactly as the CPU kernel's plan_batches.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/attention_device.cuh"

namespace onnx_genai::cuda {

namespace {

constexpr int kThreads = 128;    // attention and combine blocks
constexpr int kTileKeys = 64;    // keys per shared-memory tile
constexpr int kAppendThreads = 256;
constexpr int kCopyRows = 16;    // present rows per copy block
// The prompt kernel's decode split (f32) aims at this many blocks per SM, with at least
// kMinChunkKeys keys per chunk: shorter chunks cost more in partials and merging than the extra
// parallelism gains.
constexpr int kBlocksPerSm = 2;
constexpr int64_t kMinChunkKeys = 128;

static_assert(kThreads % kTileKeys == 0 && kTileKeys == 64, "the softmax step gives each lane two keys of a tile");

template <typename T>
__global__ void __launch_bounds__(kAppendThreads) gqa_append_kernel(GqaArgs a) {
  const int64_t s = blockIdx.x, b = blockIdx.y;
  const int64_t d = a.head_size, token = b * a.q_len + s;
  const RowKeys r = row_keys(a, b);
  const T* cos = nullptr;
  const T* sin = nullptr;
  if (a.do_rotary) {
    const int64_t pos = rotary_position(a, r, b, s);
    cos = static_cast<const T*>(a.cos_cache) + pos * (a.rotary_dim / 2);
    sin = static_cast<const T*>(a.sin_cache) + pos * (a.rotary_dim / 2);
  }
  const int64_t q_items = a.do_rotary ? a.num_heads * d : 0;
  const int64_t kv_items = r.valid && s < a.kv_len ? a.kv_heads * d : 0;
  const T* query = static_cast<const T*>(a.query) + token * a.query_row;
  T* rotated_q = reinterpret_cast<T*>(static_cast<char*>(a.workspace) + a.rotated_q_offset) + token * a.num_heads * d;
  for (int64_t e = threadIdx.x; e < q_items + 2 * kv_items; e += blockDim.x) {
    if (e < q_items) {
      rotated_q[e] = head_element(query + e / d * d, e % d, cos, sin, a.rotary_dim, a.rotary_interleaved);
      continue;
    }
    const bool is_v = e - q_items >= kv_items;
    const int64_t item = (e - q_items) % kv_items, g = item / d, i = item % d;
    const T* src = static_cast<const T*>(is_v ? a.new_v : a.new_k) + token * a.new_kv_row + g * d;
    T* dst = static_cast<T*>(is_v ? a.present_v : a.present_k) + ((b * a.kv_heads + g) * a.present_len + r.offset + s) * d;
    dst[i] = is_v ? src[i] : head_element(src, i, cos, sin, a.rotary_dim, a.rotary_interleaved);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) gqa_copy_past_kernel(GqaArgs a) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t bg = blockIdx.y, b = bg / a.kv_heads;
  const RowKeys r = row_keys(a, b);
  if (!r.valid) return;
  const int64_t d = a.head_size, vecs_per_row = d / kVec, len = a.present_len;
  const int64_t written = imax(r.keep, r.offset + a.kv_len);
  const int64_t first_row = static_cast<int64_t>(blockIdx.x) * kCopyRows;
  using P = Pack<T, kVec>;
  for (int64_t idx = threadIdx.x; idx < kCopyRows * vecs_per_row; idx += blockDim.x) {
    const int64_t row = first_row + idx / vecs_per_row, col = idx % vecs_per_row * kVec;
    if (row >= len || (row >= r.keep && row < written)) continue;
    P k{}, v{};
    if (row < r.keep) {
      const int64_t src = (bg * a.past_len + row) * d + col;
      k = *reinterpret_cast<const P*>(static_cast<const T*>(a.past_k) + src);
      v = *reinterpret_cast<const P*>(static_cast<const T*>(a.past_v) + src);
    }
    const int64_t dst = (bg * len + row) * d + col;
    *reinterpret_cast<P*>(static_cast<T*>(a.present_k) + dst) = k;
    *reinterpret_cast<P*>(static_cast<T*>(a.present_v) + dst) = v;
  }
}

template <typename T>
size_t attention_smem_bytes(int vpb, int64_t d) {
  constexpr int kVec = 16 / sizeof(T);
  return static_cast<size_t>(kTileKeys * (2 * d + kVec)) * sizeof(T) +
         static_cast<size_t>(vpb * d + vpb * kTileKeys + 3 * vpb) * sizeof(float);
}

// Shared-memory state of one attention block (see the file comment).
template <typename T, int VPB>
struct AttentionSmem {
  T* k;         // [kTileKeys][D + kVec]
  T* v;         // [kTileKeys][D]
  float* q;     // [VPB][D], scaled
  float* p;     // [VPB][kTileKeys]: scores, then probabilities
  float* m;     // [VPB] running max
  float* l;     // [VPB] running sum
  float* corr;  // [VPB] this tile's accumulator correction

  __device__ AttentionSmem(void* base, int64_t d) {
    constexpr int kVec = 16 / sizeof(T);
    k = static_cast<T*>(base);
    v = k + kTileKeys * (d + kVec);
    q = reinterpret_cast<float*>(v + kTileKeys * d);
    p = q + VPB * d;
    m = p + VPB * kTileKeys;
    l = m + VPB;
    corr = l + VPB;
  }
};

// Scores of the tile's keys for the block's vectors: thread (key j, half) takes vectors
// half, half + 2, ...; masked keys score -inf.
template <typename T, int VPB>
__device__ void tile_scores(const GqaArgs& a, const AttentionSmem<T, VPB>& sm, int64_t b, int64_t first, int64_t n,
                            int nvec, const int64_t* lo, const int64_t* hi, const int* head, const int* row) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kHalves = kThreads / kTileKeys;
  constexpr int kPerThread = VPB / kHalves;
  const int64_t d = a.head_size;
  const int j = threadIdx.x % kTileKeys, half = threadIdx.x / kTileKeys;
  float sc[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) sc[i] = 0.0f;
  const T* k_row = sm.k + j * (d + kVec);
  for (int64_t c = 0; c < d; c += kVec) {
    float kf[kVec];
    load_floats<T, kVec>(k_row + c, kf);
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int v = half + kHalves * i;
      if (v >= nvec) break;
      const float4* q4 = reinterpret_cast<const float4*>(sm.q + v * d + c);
#pragma unroll
      for (int e = 0; e < kVec; e += 4) {
        const float4 q = q4[e / 4];
        sc[i] += q.x * kf[e] + q.y * kf[e + 1] + q.z * kf[e + 2] + q.w * kf[e + 3];
      }
    }
  }
  const int64_t key = first + j;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int v = half + kHalves * i;
    float x = sc[i];
    const bool seen = v < nvec && j < n && key >= lo[v] && key < hi[v];
    if (seen && a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
    if (seen && a.attention_bias != nullptr) x += bias_at<T>(a, b, head[v], row[v], key);
    sm.p[v * kTileKeys + j] = seen ? x : kNegInf;
  }
}

// Online-softmax update of every vector over the tile's scores (warp per vector).
template <typename T, int VPB>
__device__ void tile_softmax(const AttentionSmem<T, VPB>& sm, int nvec) {
  const int lane = threadIdx.x % 32;
  for (int v = threadIdx.x / 32; v < nvec; v += kThreads / 32) {
    float* p = sm.p + v * kTileKeys;
    const float x0 = p[lane], x1 = p[lane + 32], m = sm.m[v];
    float tile_max = fmaxf(x0, x1);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
    float corr = 1.0f, e0 = 0.0f, e1 = 0.0f;
    if (tile_max != kNegInf) {
      const float m_new = fmaxf(m, tile_max);
      corr = m == kNegInf ? 0.0f : expf(m - m_new);
      e0 = expf(x0 - m_new);
      e1 = expf(x1 - m_new);
      const float sum = warp_sum(e0 + e1);
      __syncwarp();
      if (lane == 0) {
        sm.l[v] = sm.l[v] * corr + sum;
        sm.m[v] = m_new;
      }
    }
    p[lane] = e0;
    p[lane + 32] = e1;
    if (lane == 0) sm.corr[v] = corr;
  }
}

// acc[v][i] (dim threadIdx.x + i * kThreads) = acc * corr + sum over the tile of p * V.
template <typename T, int VPB>
__device__ void tile_accumulate(const AttentionSmem<T, VPB>& sm, int64_t d, int nvec, float (&acc)[VPB][2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t dim = threadIdx.x + i * kThreads;
    if (dim >= d) break;
#pragma unroll
    for (int v = 0; v < VPB; ++v) {
      if (v < nvec) acc[v][i] *= sm.corr[v];
    }
    for (int j = 0; j < kTileKeys; j += 4) {
      const float v0 = to_float(sm.v[(j + 0) * d + dim]), v1 = to_float(sm.v[(j + 1) * d + dim]);
      const float v2 = to_float(sm.v[(j + 2) * d + dim]), v3 = to_float(sm.v[(j + 3) * d + dim]);
#pragma unroll
      for (int v = 0; v < VPB; ++v) {
        if (v >= nvec) break;
        const float4 p = *reinterpret_cast<const float4*>(sm.p + v * kTileKeys + j);
        acc[v][i] += p.x * v0 + p.y * v1 + p.z * v2 + p.w * v3;
      }
    }
  }
}

// K / V rows [first, first + n) of one (batch, KV head) into shared memory; rows past n zeroed
// (their probabilities are 0, and 0 * garbage could be NaN).
template <typename T, int VPB>
__device__ void load_tile(const AttentionSmem<T, VPB>& sm, const T* k, const T* v, int64_t d, int64_t first, int64_t n) {
  constexpr int kVec = 16 / sizeof(T);
  using P = Pack<T, kVec>;
  const int64_t vecs_per_row = d / kVec;
  for (int64_t idx = threadIdx.x; idx < kTileKeys * vecs_per_row; idx += kThreads) {
    const int64_t j = idx / vecs_per_row, col = idx % vecs_per_row * kVec;
    P kp{}, vp{};
    if (j < n) {
      kp = *reinterpret_cast<const P*>(k + (first + j) * d + col);
      vp = *reinterpret_cast<const P*>(v + (first + j) * d + col);
    }
    *reinterpret_cast<P*>(sm.k + j * (d + kVec) + col) = kp;
    *reinterpret_cast<P*>(sm.v + j * d + col) = vp;
  }
}

template <typename T, int VPB>
__global__ void __launch_bounds__(kThreads) gqa_attention_kernel(GqaArgs a) {
  extern __shared__ float4 smem_base[];
  __shared__ int64_t lo[VPB], hi[VPB];
  __shared__ int head[VPB], row[VPB];
  const int64_t d = a.head_size, b = blockIdx.z, g = blockIdx.y;
  const AttentionSmem<T, VPB> sm(smem_base, d);
  const int64_t chunk = blockIdx.x % a.chunks, unit = blockIdx.x / a.chunks;
  const int64_t tile = unit % a.row_tiles, slice = unit / a.row_tiles;
  const int64_t group = a.num_heads / a.kv_heads;
  const int64_t h0 = g * group + slice * a.heads_per_block;
  const int64_t nh = imin(a.heads_per_block, group - slice * a.heads_per_block);
  const int64_t s0 = tile * a.rows_per_block;
  const int nvec = static_cast<int>(nh * imin(a.rows_per_block, a.q_len - s0));
  const RowKeys r = row_keys(a, b);

  if (threadIdx.x < VPB) {
    const int v = threadIdx.x;
    int64_t vlo = 0, vhi = 0;
    head[v] = static_cast<int>(h0 + v % nh);
    row[v] = static_cast<int>(s0 + v / nh);
    if (v < nvec && r.valid) {
      key_range(a, r, row[v], vlo, vhi);
      if (a.chunks > 1) {
        vlo = imax(vlo, chunk * a.chunk_len);
        vhi = imin(vhi, (chunk + 1) * a.chunk_len);
      }
    }
    lo[v] = vlo;
    hi[v] = vhi;
    sm.m[v] = kNegInf;
    sm.l[v] = 0.0f;
  }
  const bool rotated = a.do_rotary;
  const T* q_src = rotated ? reinterpret_cast<const T*>(static_cast<const char*>(a.workspace) + a.rotated_q_offset)
                           : static_cast<const T*>(a.query);
  const int64_t q_row = rotated ? a.num_heads * d : a.query_row;
  for (int64_t idx = threadIdx.x; idx < VPB * d; idx += kThreads) {
    const int64_t v = idx / d, i = idx % d;
    float q = 0.0f;
    if (v < nvec) {
      const int64_t h = h0 + v % nh, s = s0 + v / nh;
      q = to_float(q_src[(b * a.q_len + s) * q_row + h * d + i]) * a.scale;
    }
    sm.q[idx] = q;
  }
  __syncthreads();

  int64_t span_lo = INT64_MAX, span_hi = 0;
  for (int v = 0; v < nvec; ++v) {
    if (lo[v] < hi[v]) {
      span_lo = imin(span_lo, lo[v]);
      span_hi = imax(span_hi, hi[v]);
    }
  }
  float acc[VPB][2];
#pragma unroll
  for (int v = 0; v < VPB; ++v) acc[v][0] = acc[v][1] = 0.0f;
  const int64_t cache_offset = (b * a.kv_heads + g) * a.present_len * d;
  const T* k_cache = static_cast<const T*>(a.present_k) + cache_offset;
  const T* v_cache = static_cast<const T*>(a.present_v) + cache_offset;
  for (int64_t first = span_lo; first < span_hi; first += kTileKeys) {
    const int64_t n = imin(kTileKeys, span_hi - first);
    __syncthreads();  // the previous tile is consumed
    load_tile(sm, k_cache, v_cache, d, first, n);
    __syncthreads();
    tile_scores(a, sm, b, first, n, nvec, lo, hi, head, row);
    __syncthreads();
    tile_softmax(sm, nvec);
    __syncthreads();
    tile_accumulate(sm, d, nvec, acc);
  }

  float* ml = partial_ml(a);
  float* acc_out = partial_acc(a);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t dim = threadIdx.x + i * kThreads;
    if (dim >= d) break;
#pragma unroll
    for (int vi = 0; vi < VPB; ++vi) {
      if (vi >= nvec) break;
      const int64_t h = head[vi];
      if (a.chunks == 1) {
        const float factor = finish_factor<T>(a, sm.m[vi], sm.l[vi], h);
        static_cast<T*>(a.out)[((b * a.q_len + row[vi]) * a.num_heads + h) * d + dim] = from_float<T>(acc[vi][i] * factor);
      } else {
        acc_out[((b * a.num_heads + h) * a.chunks + chunk) * d + dim] = acc[vi][i];
      }
    }
  }
  if (a.chunks > 1 && threadIdx.x < nvec) {
    float* p = ml + ((b * a.num_heads + head[threadIdx.x]) * a.chunks + chunk) * 2;
    p[0] = sm.m[threadIdx.x];
    p[1] = sm.l[threadIdx.x];
  }
}

// One (b, query row s, head) of a split decode: the partials of the chunks that hold the batch
// entry's keys (key_chunks of entry_key_span; the decode kernel skips the others without
// writing), rescaled to one max and summed. Thread (group, lane) sums 4 dims over every groups-th
// chunk, so all its loads are in flight at once.
template <typename T>
__global__ void __launch_bounds__(kThreads) gqa_combine_kernel(GqaArgs a) {
  __shared__ float weight[kMaxChunks];
  __shared__ float4 sums[kThreads];
  __shared__ float warp_part[kThreads / 32];
  const int64_t h = blockIdx.x, row = blockIdx.y, b = row / a.q_len, d = a.head_size;  // row: b * S + s
  wait_for_prior_grid();
  const RowKeys r = row_keys(a, b);
  int64_t lo = 0, hi = 0;
  if (r.valid) entry_key_span(a, r, lo, hi);
  const KeyChunks chunks = key_chunks(a, lo, hi);
  const int64_t first = chunks.begin, end = chunks.end;
  const int64_t base = (row * a.num_heads + h) * a.chunks;
  const float* ml = partial_ml(a) + base * 2;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const auto block_reduce = [&](float v, bool is_max) {
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, v, offset);
      v = is_max ? fmaxf(v, other) : v + other;
    }
    __syncthreads();  // warp_part is free (a previous reduction has been read)
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    v = warp_part[0];
    for (int w = 1; w < kThreads / 32; ++w) v = is_max ? fmaxf(v, warp_part[w]) : v + warp_part[w];
    return v;
  };
  float top = kNegInf;
  for (int64_t c = first + threadIdx.x; c < end; c += kThreads) {
    if (ml[2 * c + 1] > 0.0f) top = fmaxf(top, ml[2 * c]);
  }
  top = block_reduce(top, true);
  float l = 0.0f;
  for (int64_t c = first + threadIdx.x; c < end; c += kThreads) {
    const float w = ml[2 * c + 1] > 0.0f ? expf(ml[2 * c] - top) : 0.0f;
    weight[c - first] = w;
    l += w * ml[2 * c + 1];
  }
  l = block_reduce(l, false);  // its barriers also publish `weight`

  const int64_t lanes = d / 4, groups = kThreads / lanes;
  const int64_t dim = threadIdx.x % lanes * 4, group = threadIdx.x / lanes;
  const float* acc = partial_acc(a) + base * d;
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (group < groups) {
#pragma unroll 8
    for (int64_t c = first + group; c < end; c += groups) {
      const float w = weight[c - first];
      const float4 v = *reinterpret_cast<const float4*>(acc + c * d + dim);
      sum = make_float4(sum.x + w * v.x, sum.y + w * v.y, sum.z + w * v.z, sum.w + w * v.w);
    }
  }
  sums[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x >= lanes) return;
  const float factor = finish_factor<T>(a, top, l, h);
  float total[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t grp = 0; grp < groups; ++grp) {
    const float4 v = sums[grp * lanes + threadIdx.x];
    total[0] += v.x;
    total[1] += v.y;
    total[2] += v.z;
    total[3] += v.w;
  }
  T* out = static_cast<T*>(a.out) + (row * a.num_heads + h) * d + dim;
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = from_float<T>(total[i] * factor);
}

// To the widest head size's need: one limit serves every plan (a launch asks for what its own
// head size needs).
template <typename T, int VPB>
Status raise_smem_limit() {
  const size_t bytes = attention_smem_bytes<T>(VPB, kGqaMaxHeadSize);
  return cuda_status(cudaFuncSetAttribute(gqa_attention_kernel<T, VPB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)),
                     "raising the shared-memory limit");
}

// The prompt kernel's decode split: enough (b, KV head, head slice, chunk) units to fill the GPU
// twice, chunks of at least kMinChunkKeys keys (when there are that many), whole tiles each.
Status plan_decode_split(GqaArgs& a) {
  int device = 0, sms = 0;
  OG_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  OG_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "multiprocessor count"));
  const int64_t wanted = ceil_div(int64_t{kBlocksPerSm} * sms, std::max<int64_t>(a.batch * a.kv_heads * a.head_slices, 1));
  const int64_t chunks = std::clamp<int64_t>(wanted, 1, std::clamp<int64_t>(a.present_len / kMinChunkKeys, 1, kMaxChunks));
  a.chunk_len = ceil_div(ceil_div(a.present_len, chunks), kTileKeys) * kTileKeys;
  a.chunks = ceil_div(a.present_len, a.chunk_len);
  return Status::ok();
}

// The tensor-core decode kernel for f16 / bf16 steps of up to kTensorCoreMaxRows query rows
// (where its shared memory fits), else in f16 / bf16 the flash prompt kernel (where it supports
// the step), else the tiled prompt kernel (split over the KV length for a decode).
template <typename T>
Status plan_kernels_for(GqaArgs& a) {
  if constexpr (!std::is_same_v<T, float>) {
    if (a.q_len <= kTensorCoreMaxRows) {
      OG_RETURN_IF_ERROR(plan_tensor_core_decode<T>(a));
      if (a.decode_dims > 0) return Status::ok();
    }
    OG_RETURN_IF_ERROR(plan_flash_prompt<T>(a));
    if (a.prompt_dims > 0) return Status::ok();
  }
  const auto raise_limit = a.vectors_per_block == 8 ? raise_smem_limit<T, 8> : raise_smem_limit<T, 16>;
  OG_RETURN_IF_ERROR(raise_limit());
  return a.q_len == 1 ? plan_decode_split(a) : Status::ok();
}

// The tensor-core decode (after the past rows' copy when present is not the past buffer), else
// the append and copy, then the flash or the tiled prompt kernel (and the combine of a split f32
// decode).
template <typename T>
Status launch_kernels_for(const GqaArgs& a, cudaStream_t s) {
  const bool decode = a.decode_dims > 0;
  if (!decode && (a.do_rotary || a.kv_len > 0)) {
    gqa_append_kernel<T><<<dim3(static_cast<unsigned>(a.q_len), static_cast<unsigned>(a.batch)), kAppendThreads, 0, s>>>(a);
  }
  if (!a.shared_kv) {
    const dim3 grid(static_cast<unsigned>(ceil_div(a.present_len, kCopyRows)), static_cast<unsigned>(a.batch * a.kv_heads));
    gqa_copy_past_kernel<T><<<grid, kThreads, 0, s>>>(a);
  }
  if constexpr (!std::is_same_v<T, float>) {
    if (decode) return launch_tensor_core_decode<T>(a, s);
    if (a.prompt_dims > 0) return launch_flash_prompt<T>(a, s);
  }
  const dim3 grid(static_cast<unsigned>(a.head_slices * a.row_tiles * a.chunks), static_cast<unsigned>(a.kv_heads),
                  static_cast<unsigned>(a.batch));
  const size_t smem = attention_smem_bytes<T>(a.vectors_per_block, a.head_size);
  if (a.vectors_per_block == 8) gqa_attention_kernel<T, 8><<<grid, kThreads, smem, s>>>(a);
  else gqa_attention_kernel<T, 16><<<grid, kThreads, smem, s>>>(a);
  return a.chunks > 1 ? launch_gqa_combine<T>(a, s, false) : Status::ok();
}

}  // namespace

template <typename T>
Status launch_gqa_combine(const GqaArgs& a, cudaStream_t stream, bool after_prior) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(a.num_heads), static_cast<unsigned>(a.batch * a.q_len));
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  cudaLaunchAttribute attrs[2] = {};
  attrs[0].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
  attrs[0].val.sharedMemCarveout = kMaxSharedCarveout;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attrs;
  config.numAttrs = after_prior ? 2 : 1;
  return cuda_status(cudaLaunchKernelEx(&config, gqa_combine_kernel<T>, a), "GroupQueryAttention combine launch");
}

template Status launch_gqa_combine<float>(const GqaArgs&, cudaStream_t, bool);
template Status launch_gqa_combine<__half>(const GqaArgs&, cudaStream_t, bool);
template Status launch_gqa_combine<__nv_bfloat16>(const GqaArgs&, cudaStream_t, bool);

Status plan_gqa(GqaArgs& a) {
  if (a.head_size <= 0 || a.head_size > kGqaMaxHeadSize || a.head_size % kGqaHeadSizeMultiple != 0) {
    return OG_ERROR("head size ", a.head_size, " unsupported");
  }
  const int64_t group = a.num_heads / a.kv_heads;
  a.vectors_per_block = a.q_len == 1 && group <= 8 ? 8 : 16;
  a.heads_per_block = std::min<int64_t>(group, a.vectors_per_block);
  a.head_slices = ceil_div(group, a.heads_per_block);
  a.rows_per_block = std::clamp<int64_t>(a.vectors_per_block / a.heads_per_block, 1, a.q_len);
  a.row_tiles = ceil_div(a.q_len, a.rows_per_block);
  a.chunks = 1;
  a.chunk_len = a.present_len;
  a.decode_dims = 0;
  a.decode_cluster = false;
  a.prompt_dims = 0;
  Status (*plan_kernels)(GqaArgs&) = nullptr;
  const bool known = dispatch_float_type(a.dtype, [&]<typename T>() { plan_kernels = plan_kernels_for<T>; });
  if (!known) return OG_ERROR("unsupported dtype ", dtype_name(a.dtype));
  OG_RETURN_IF_ERROR(plan_kernels(a));

  size_t offset = 0;
  a.rotated_q_offset = offset;
  if (a.do_rotary && a.decode_dims == 0) offset += align256(static_cast<size_t>(dtype_storage_bytes(a.dtype, a.batch * a.q_len * a.num_heads * a.head_size)));
  a.cache_offset = offset;
  if (a.cache_in_workspace) offset += 2 * align256(static_cast<size_t>(dtype_storage_bytes(a.dtype, a.batch * a.kv_heads * a.present_len * a.head_size)));
  a.partial_offset = offset;
  if (a.chunks > 1 && !a.decode_cluster) {
    offset = partial_acc_offset(a) + static_cast<size_t>(a.batch * a.q_len * a.num_heads * a.chunks * a.head_size) * sizeof(float);
  }
  a.workspace_bytes = offset;
  return Status::ok();
}

Status launch_gqa(const GqaArgs& args, void* stream) {
  if (args.batch == 0 || args.q_len == 0) return Status::ok();
  GqaArgs a = args;
  if (a.cache_in_workspace) {
    char* cache = static_cast<char*>(a.workspace) + a.cache_offset;
    a.present_k = cache;
    a.present_v = cache + align256(static_cast<size_t>(dtype_storage_bytes(a.dtype, a.batch * a.kv_heads * a.present_len * a.head_size)));
  }
  Status (*launch_kernels)(const GqaArgs&, cudaStream_t) = nullptr;
  const bool known = dispatch_float_type(a.dtype, [&]<typename T>() { launch_kernels = launch_kernels_for<T>; });
  if (!known) return OG_ERROR("GroupQueryAttention: unsupported dtype ", dtype_name(a.dtype));
  OG_RETURN_IF_ERROR(launch_kernels(a, static_cast<cudaStream_t>(stream)));
  return launch_status("GroupQueryAttention kernels");
}

}  // namespace onnx_genai::cuda
