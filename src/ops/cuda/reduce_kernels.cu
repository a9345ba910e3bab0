// ArgMax / ArgMin and ReduceSum on the GPU (semantics in reduce_kernels.h).
//
// Memory-access plan. Every pass is x [outer, len, inner] -> y [outer, inner]:
//
//   inner == 1  one block per row (grid.x = outer; the greedy-token argmax over [B, 1, vocab]
//               logits is B blocks). Threads stride over the row in 16-byte packs (8 f16,
//               4 f32, ...), each keeping kUnroll packs in flight, after a head of at most
//               one pack's worth of single elements that brings the pointer to a 16-byte
//               boundary (row starts are only element-aligned when len is odd), and before a
//               tail of single elements. Per thread: the best (value, index) or the partial
//               sum; then warp shuffles and one shared-memory slot per warp.
//
//                 row:  | head | pack t0 | pack t1 | ... | pack tN | pack t0 | ... | tail |
//
//   inner  > 1  ArgMax: one thread per output lane walking the axis from element 0, as the CPU
//               kernel does (consecutive threads read consecutive columns: coalesced).
//               ReduceSum: blocks of kColumnTile columns x kRowSlices row slices; each thread
//               sums every kRowSlices-th row of its column, the slices meet in shared memory.
//
// A row of at least 8192 elements (a 152k-entry row of logits) is split into chunks of ~4096, one
// block each (grid.y), whose bests go to the workspace; a second launch, one warp per row, picks
// the best of them. One block for a whole row would leave the rest of the GPU idle for its
// whole read (15 us for 152k f16 measured on an H200).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/reduce_kernels.h"

namespace onnx_genai::cuda {

namespace {

constexpr int kMaxThreads = 1024;
constexpr int kUnrolledElements = 32;  // per thread, loaded as 16-byte packs before any is used
constexpr int kLaneThreads = 256;      // arg-reduce along a strided axis: one thread per lane
constexpr int64_t kMaxLaneBlocks = 1 << 16;  // a grid-stride loop covers the rest
constexpr int kColumnTile = 32;        // ReduceSum along a strided axis: columns per block
constexpr int kRowSlices = 8;          // ... and row slices per column
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = 0x7fffffff;
// Long arg-reduce rows (a 152k-entry logits row) split into chunks of about this many elements,
// one block each, so a single row keeps many SMs busy; a warp then reduces the chunks' bests.
constexpr int64_t kArgChunkElements = 4096;
constexpr int64_t kMaxArgChunks = 256;
constexpr int64_t kArgPartialBytes = 16;  // ArgBest<A> for the widest accumulator (8-byte value + index)

// ---- Types ------------------------------------------------------------------------------------

using ArgTypes = TypeList<float, __half, __nv_bfloat16, double, int8_t, uint8_t, int32_t, int64_t>;
using SumTypes = TypeList<float, __half, __nv_bfloat16, double, int32_t, int64_t>;

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// The CPU kernels' accumulator (and comparison type): f32 for 16-bit floats, int64 for integers.
template <typename T>
using acc_t = std::conditional_t<kIsHalf<T>, float, std::conditional_t<std::is_integral_v<T>, int64_t, T>>;

template <typename A, typename T>
__device__ __forceinline__ A widen(T v) {
  if constexpr (kIsHalf<T>) return to_float(v);
  else return static_cast<A>(v);
}

// One rounding (16-bit floats: to nearest even) or, for int32 sums, the low 32 bits.
template <typename T, typename A>
__device__ __forceinline__ T narrow(A v) {
  if constexpr (kIsHalf<T>) return from_float<T>(v);
  else return static_cast<T>(v);
}

template <typename A>
__device__ __forceinline__ bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) return v != v;
  else return false;
}

// ---- Row traversal and block reduction ------------------------------------------------------

// visit(element, index) for the elements of row[0, len) this thread owns, in ascending index
// order (head, then packs, then tail; see the plan at the top).
template <typename T, typename Visit>
__device__ __forceinline__ void for_each_in_row(const T* row, int64_t len, Visit&& visit) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kUnroll = kUnrolledElements / kVec < 4 ? kUnrolledElements / kVec : 4;  // 2 for 1-byte types
  using Vec = Pack<T, kVec>;
  const int64_t threads = blockDim.x, tid = threadIdx.x;
  const auto misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) % 16 / sizeof(T));
  const int64_t head = min(len, (kVec - misaligned) % kVec);
  if (tid < head) visit(row[tid], tid);
  const int64_t packs = (len - head) / kVec;
  const Vec* body = reinterpret_cast<const Vec*>(row + head);
  for (int64_t p = tid; p < packs; p += kUnroll * threads) {
    Vec loaded[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (p + u * threads < packs) loaded[u] = body[p + u * threads];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t pack = p + u * threads;
      if (pack >= packs) break;
#pragma unroll
      for (int e = 0; e < kVec; ++e) visit(loaded[u].v[e], head + pack * kVec + e);
    }
  }
  for (int64_t i = head + packs * kVec + tid; i < len; i += threads) visit(row[i], i);
}

template <typename A>
__device__ __forceinline__ A shuffle_xor(A v, int offset) {
  return __shfl_xor_sync(0xffffffffu, v, offset);
}

// The block's reduction of one state per thread under `combine`; the result is thread 0's.
// blockDim.x is a multiple of 32; `identity` fills the slots of absent warps.
template <typename S, typename Combine>
__device__ __forceinline__ S block_reduce(S s, Combine combine, S identity) {
  __shared__ S partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) s = combine(s, shuffle_xor(s, offset));
  if (lane == 0) partial[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < warps ? partial[lane] : identity;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) s = combine(s, shuffle_xor(s, offset));
  }
  return s;
}

// Threads for one block per row of `len` elements of T: one 16-byte pack each, whole warps.
template <typename T>
unsigned row_threads(int64_t len) {
  const int64_t packs = (len + 16 / static_cast<int64_t>(sizeof(T)) - 1) / (16 / static_cast<int64_t>(sizeof(T)));
  return static_cast<unsigned>(std::clamp<int64_t>((packs + 31) / 32 * 32, 32, kMaxThreads));
}

// ---- ArgMax / ArgMin ----------------------------------------------------------------------------

// index < 0: no candidate yet (NaNs are never candidates). No member initialisers: it lives in
// shared memory.
template <typename A>
struct ArgBest {
  A value;
  int64_t index;
};

template <typename A>
__device__ __forceinline__ ArgBest<A> shuffle_xor(ArgBest<A> s, int offset) {
  return {shuffle_xor(s.value, offset), shuffle_xor(s.index, offset)};
}

template <bool Max, typename A>
__device__ __forceinline__ bool beats(A v, A best) {
  if constexpr (Max) return v > best;
  else return v < best;
}

// Of two threads' bests, the better value; on equal values the first (or last) index.
template <bool Max, typename A>
__device__ __forceinline__ ArgBest<A> better_of(ArgBest<A> a, ArgBest<A> b, bool last) {
  if (b.index < 0) return a;
  if (a.index < 0 || beats<Max>(b.value, a.value)) return b;
  if (b.value == a.value && (last ? b.index > a.index : b.index < a.index)) return b;
  return a;
}

// The index the CPU kernel's contiguous-row path gives for a row's best: 0 when every element is NaN.
template <typename A>
__device__ __forceinline__ int64_t answer(ArgBest<A> best) {
  return best.index < 0 ? 0 : best.index;
}

// x [outer, len] -> y [outer] (the CPU kernel's contiguous-row path: the extreme non-NaN value's
// first (last) index). Block (o, c) takes chunk c of row o, chunk_len elements; with one chunk it
// writes y[o], else its best to partial[o * gridDim.y + c] for arg_reduce_partials_kernel.
template <typename T, bool Max>
__global__ void __launch_bounds__(kMaxThreads) arg_reduce_rows_kernel(const T* __restrict__ x, int64_t len,
                                                                       int64_t chunk_len, bool last,
                                                                       int64_t* __restrict__ y,
                                                                       ArgBest<acc_t<T>>* __restrict__ partial) {
  using A = acc_t<T>;
  const int64_t o = blockIdx.x, start = static_cast<int64_t>(blockIdx.y) * chunk_len;
  ArgBest<A> best{A{}, -1};
  // Indices reach a thread in ascending order, so an equal value replaces the best only when
  // the last index is wanted.
  for_each_in_row(x + o * len + start, min(chunk_len, len - start), [&](T element, int64_t i) {
    const A v = widen<A>(element);
    if (is_nan(v)) return;
    if (best.index < 0 || beats<Max>(v, best.value) || (last && v == best.value)) best = {v, start + i};
  });
  const auto combine = [last](ArgBest<A> a, ArgBest<A> b) { return better_of<Max>(a, b, last); };
  best = block_reduce(best, combine, ArgBest<A>{A{}, -1});
  if (threadIdx.x != 0) return;
  if (gridDim.y == 1) y[o] = answer(best);
  else partial[o * gridDim.y + blockIdx.y] = best;
}

// One warp per row: the best of its chunks' bests (better_of settles ties by index, so the
// order the lanes meet them in does not matter).
template <typename A, bool Max>
__global__ void arg_reduce_partials_kernel(const ArgBest<A>* __restrict__ partial, int64_t chunks, bool last,
                                           int64_t* __restrict__ y) {
  const int64_t o = blockIdx.x;
  ArgBest<A> best{A{}, -1};
  for (int64_t c = threadIdx.x; c < chunks; c += 32) best = better_of<Max>(best, partial[o * chunks + c], last);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) best = better_of<Max>(best, shuffle_xor(best, offset), last);
  if (threadIdx.x == 0) y[o] = answer(best);
}

// x [outer, len, inner] -> y [outer, inner], one thread per lane, element by element from
// element 0 exactly as the CPU kernel's strided path compares (so a NaN at element 0 keeps 0).
template <typename T, bool Max>
__global__ void arg_reduce_lanes_kernel(const T* __restrict__ x, int64_t* __restrict__ y, ReduceView v, bool last) {
  using A = acc_t<T>;
  const int64_t lanes = v.outer * v.inner, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < lanes; t += stride) {
    const int64_t o = t / v.inner;
    const T* lane = x + o * v.len * v.inner + (t - o * v.inner);
    A best = widen<A>(lane[0]);
    int64_t index = 0;
    for (int64_t r = 1; r < v.len; ++r) {
      const A val = widen<A>(lane[r * v.inner]);
      if (beats<Max>(val, best) || (last && val == best)) best = val, index = r;
    }
    y[t] = index;
  }
}

template <typename T, bool Max>
void launch_arg(const ArgReduceArgs& a, cudaStream_t s) {
  const ReduceView v = a.view;
  const T* x = static_cast<const T*>(a.x);
  if (v.inner == 1) {
    using A = acc_t<T>;
    static_assert(sizeof(ArgBest<A>) <= kArgPartialBytes, "the workspace holds one ArgBest per chunk");
    const int64_t chunks = arg_reduce_chunks(v), chunk_len = (v.len + chunks - 1) / chunks;
    auto* partial = static_cast<ArgBest<A>*>(a.workspace);
    const dim3 grid(static_cast<unsigned>(v.outer), static_cast<unsigned>(chunks));
    arg_reduce_rows_kernel<T, Max><<<grid, row_threads<T>(chunk_len), 0, s>>>(x, v.len, chunk_len, a.select_last, a.y,
                                                                              partial);
    if (chunks > 1) {
      arg_reduce_partials_kernel<A, Max><<<static_cast<unsigned>(v.outer), 32, 0, s>>>(partial, chunks, a.select_last, a.y);
    }
    return;
  }
  const int64_t blocks = std::clamp<int64_t>((v.outer * v.inner + kLaneThreads - 1) / kLaneThreads, 1, kMaxLaneBlocks);
  arg_reduce_lanes_kernel<T, Max><<<static_cast<unsigned>(blocks), kLaneThreads, 0, s>>>(x, a.y, v, a.select_last);
}

// ---- ReduceSum ----------------------------------------------------------------------------------

// x [outer, len] -> y [outer]: block `o` sums row o.
template <typename Src, typename Dst, typename A>
__global__ void __launch_bounds__(kMaxThreads) sum_rows_kernel(const Src* __restrict__ x, Dst* __restrict__ y,
                                                                int64_t len) {
  const int64_t o = blockIdx.x;
  A sum = 0;
  for_each_in_row(x + o * len, len, [&](Src element, int64_t) { sum += widen<A>(element); });
  sum = block_reduce(sum, [](A a, A b) { return a + b; }, A(0));
  if (threadIdx.x == 0) y[o] = narrow<Dst>(sum);
}

// x [outer, len, inner] -> y [outer, inner]: block (blockIdx.x, o) sums columns
// [blockIdx.x * kColumnTile, +kColumnTile) of outer row o (and of every gridDim.y-th after it).
template <typename Src, typename Dst, typename A>
__global__ void sum_columns_kernel(const Src* __restrict__ x, Dst* __restrict__ y, ReduceView v) {
  __shared__ A partial[kRowSlices][kColumnTile];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  for (int64_t o = blockIdx.y; o < v.outer; o += gridDim.y) {
    A sum = 0;
    if (col < v.inner) {
      const Src* column = x + o * v.len * v.inner + col;
      for (int64_t r = threadIdx.y; r < v.len; r += kRowSlices) sum += widen<A>(column[r * v.inner]);
    }
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && col < v.inner) {
#pragma unroll
      for (int slice = 1; slice < kRowSlices; ++slice) sum += partial[slice][threadIdx.x];
      y[o * v.inner + col] = narrow<Dst>(sum);
    }
    __syncthreads();  // the slots are rewritten for the next outer row
  }
}

template <typename Src, typename Dst, typename A>
void launch_sum_pass(const Src* x, Dst* y, const ReduceView& v, cudaStream_t s) {
  if (v.inner == 1) {
    sum_rows_kernel<Src, Dst, A><<<static_cast<unsigned>(v.outer), row_threads<Src>(v.len), 0, s>>>(x, y, v.len);
    return;
  }
  const dim3 grid(static_cast<unsigned>((v.inner + kColumnTile - 1) / kColumnTile),
                  static_cast<unsigned>(std::min(v.outer, kMaxGridY)));
  sum_columns_kernel<Src, Dst, A><<<grid, dim3(kColumnTile, kRowSlices), 0, s>>>(x, y, v);
}

// The grid dims the passes need fit (grid.x holds rows, or column tiles).
Status check_grid(const ReduceView& v, const char* what) {
  const int64_t blocks = v.inner == 1 ? v.outer : (v.inner + kColumnTile - 1) / kColumnTile;
  if (blocks > kMaxGridX) return OG_ERROR(what, ": ", blocks, " blocks exceed one grid dimension");
  return Status::ok();
}

}  // namespace

bool arg_reduce_supported(DType dtype) {
  return listed(ArgTypes{}, dtype);
}

int64_t arg_reduce_chunks(const ReduceView& v) {
  if (v.inner != 1 || v.len < 2 * kArgChunkElements) return 1;
  return std::min<int64_t>((v.len + kArgChunkElements - 1) / kArgChunkElements, kMaxArgChunks);
}

int64_t arg_reduce_workspace_bytes(const ReduceView& v) {
  const int64_t chunks = arg_reduce_chunks(v);
  return chunks > 1 ? v.outer * chunks * kArgPartialBytes : 0;
}

Status launch_arg_reduce(const ArgReduceArgs& a, void* stream) {
  const ReduceView v = a.view;
  if (v.outer == 0 || v.inner == 0) return Status::ok();
  if (v.len <= 0) return OG_ERROR("arg reduce: empty axis");
  if (v.inner == 1) OG_RETURN_IF_ERROR(check_grid(v, "arg reduce"));
  const auto s = static_cast<cudaStream_t>(stream);
  const bool known = dispatch(ArgTypes{}, a.dtype, [&]<typename T>() {
    if (a.max) launch_arg<T, true>(a, s);
    else launch_arg<T, false>(a, s);
  });
  if (!known) return OG_ERROR("arg reduce: unsupported dtype ", dtype_name(a.dtype));
  return launch_status("arg_reduce kernel");
}

bool reduce_sum_supported(DType dtype) {
  return listed(SumTypes{}, dtype);
}

int64_t reduce_sum_accumulator_bytes(DType dtype) {
  int64_t bytes = 0;
  dispatch(SumTypes{}, dtype, [&]<typename T>() { bytes = static_cast<int64_t>(sizeof(acc_t<T>)); });
  return bytes;
}

Status launch_reduce_sum(const ReduceSumArgs& a, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (a.empty_input) {
    // The sum of no elements is 0, whose bytes are all zero in every supported dtype.
    if (a.out_elems == 0) return Status::ok();
    return cuda_status(cudaMemsetAsync(a.y, 0, static_cast<size_t>(dtype_storage_bytes(a.dtype, a.out_elems)), s),
                       "ReduceSum of an empty input");
  }
  if (a.passes.empty()) return OG_ERROR("ReduceSum: no passes planned");
  for (const ReduceView& v : a.passes) OG_RETURN_IF_ERROR(check_grid(v, "ReduceSum"));
  const size_t n = a.passes.size();
  const bool known = dispatch(SumTypes{}, a.dtype, [&]<typename T>() {
    using A = acc_t<T>;
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
    if (n == 1) return launch_sum_pass<T, T, A>(x, y, a.passes[0], s);
    A* buffers[2] = {static_cast<A*>(a.workspace),
                     reinterpret_cast<A*>(static_cast<char*>(a.workspace) + a.second_buffer_offset)};
    launch_sum_pass<T, A, A>(x, buffers[0], a.passes[0], s);
    for (size_t p = 1; p + 1 < n; ++p) launch_sum_pass<A, A, A>(buffers[(p - 1) % 2], buffers[p % 2], a.passes[p], s);
    launch_sum_pass<A, T, A>(buffers[(n - 2) % 2], y, a.passes[n - 1], s);
  });
  if (!known) return OG_ERROR("ReduceSum: unsupported dtype ", dtype_name(a.dtype));
  return launch_status("ReduceSum kernel");
}

}  // namespace onnx_genai::cuda
