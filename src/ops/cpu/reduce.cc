// CPU kernels of the reduce family: Reduce*, ArgMax/ArgMin, TopK, CumSum.
//
// Memory-access plan. Every kernel sees its input as [outer, len, inner] around the axis it
// works along (for Reduce*: around each coalesced run of reduced axes):
//   inner == 1  each output reads one contiguous run of `len` elements (a row): f32 sums, sums
//               of squares and max go to the AVX-512/AVX2 row kernels of softmax and
//               normalization, the rest use several independent accumulators the compiler
//               vectorises;
//   inner  > 1  a tile of kTile adjacent output columns is accumulated row by row: every read is
//               a contiguous kTile-wide run and the accumulators stay in L1 (no strided walks).
// Reduce* over separated runs (axes {0, 2} of [a, b, c]) reduces the innermost run into
// workspace first, then the next run, so each pass is one of the two shapes above.
// Work is split over outer rows (and column tiles) with parallel_for; chunks cover at least
// kMinChunkElems input elements so small tensors stay on one thread.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/thread_pool.h"
#include "ops/cpu/avx2/norm_rows.h"
#include "ops/cpu/avx2/softmax_rows.h"
#include "ops/cpu/dispatch.h"
#include "ops/op.h"
#include "ops/schema/reduce.h"

namespace onnx_genai {

namespace {

constexpr int64_t kTile = 64;
constexpr int64_t kMinChunkElems = int64_t{1} << 15;
constexpr int kLanes = 8;  // independent accumulators in a row reduction

int64_t min_chunk(int64_t elems_per_item) {
  return std::max<int64_t>(1, kMinChunkElems / std::max<int64_t>(1, elems_per_item));
}

using AxisView = ReducePass;
AxisView view_around(const Shape& s, int axis) { return {s.numel(0, axis), s[axis], s.numel(axis + 1, s.rank())}; }

template <typename... Ts> struct TypeList {};
template <typename... Ts> std::vector<DType> dtypes_of(TypeList<Ts...>) { return {DTypeOf<Ts>::value...}; }
template <typename... Ts, typename F> Status dispatch(TypeList<Ts...>, DType dtype, F&& fn) {
  return dispatch_dtype<Ts...>(dtype, std::forward<F>(fn));
}

using FloatTypes = TypeList<float, Float16, BFloat16, double>;
using NumericTypes = TypeList<float, Float16, BFloat16, double, int32_t, int64_t>;
using OrderedTypes = TypeList<float, Float16, BFloat16, double, int8_t, uint8_t, int32_t, int64_t>;

// Accumulator: f32 for 32/16-bit floats, f64 for f64, int64 for integers.
template <typename T>
using acc_t = std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<std::is_same_v<T, double>, double, float>>;

template <typename A> A load_as(const auto& v) { return static_cast<A>(load(v)); }

// ---------------------------------------------------------------------------------------------
// Reduce*

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// An op = per-element map (first pass only) + combine + final map (last pass only).
// LogSumExp is handled apart: each pass is a full, max-shifted log-sum-exp.
template <ReduceOp Op, typename A>
struct ReduceMath {
  static constexpr bool kAdds = Op == ReduceOp::kSum || Op == ReduceOp::kMean || Op == ReduceOp::kL1 ||
                                Op == ReduceOp::kL2 || Op == ReduceOp::kLogSum || Op == ReduceOp::kSumSquare;
  static A init() {
    if constexpr (Op == ReduceOp::kMax) return std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
    else if constexpr (Op == ReduceOp::kMin) return std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
    else if constexpr (Op == ReduceOp::kProd) return A(1);
    else return A(0);
  }
  static A map(A x) {
    if constexpr (Op == ReduceOp::kL1) return x < A(0) ? -x : x;
    else if constexpr (Op == ReduceOp::kL2 || Op == ReduceOp::kSumSquare) return x * x;
    else return x;
  }
  static A combine(A a, A x) {
    if constexpr (kAdds) return a + x;
    else if constexpr (Op == ReduceOp::kMax) return x > a ? x : a;
    else if constexpr (Op == ReduceOp::kMin) return x < a ? x : a;
    else return a * x;
  }
  static A finish(A a, int64_t count) {
    if constexpr (Op == ReduceOp::kMean) return a / static_cast<A>(count);
    else if constexpr (Op == ReduceOp::kL2) return std::sqrt(a);
    else if constexpr (Op == ReduceOp::kLogSum) return std::log(a);
    else return a;
  }
};

// max + log(sum(exp(x - max))) of a contiguous row; f32 rows use the softmax SIMD kernels.
template <typename A, typename Src>
A log_sum_exp_row(const Src* x, int64_t n) {
  if constexpr (std::is_same_v<Src, float> && std::is_same_v<A, float>) {
    const SoftmaxRowKernels& k = best_softmax_row_kernels();
    const float m = k.max(x, n);
    return std::isfinite(m) ? m + std::log(k.exp_sum(x, m, nullptr, n)) : m;
  } else {
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, load_as<A>(x[i]));
    if (!std::isfinite(m)) return m;
    A s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(load_as<A>(x[i]) - m);
    return m + std::log(s);
  }
}

// The same for `width` columns of `len` rows `stride` apart, sweeping whole row slices.
template <typename A, typename Src>
void log_sum_exp_tile(const Src* x, int64_t len, int64_t stride, int64_t width, A* out) {
  A sum[kTile];
  std::fill(out, out + width, -std::numeric_limits<A>::infinity());
  std::fill(sum, sum + width, A(0));
  for (int64_t r = 0; r < len; ++r) {
    for (int64_t j = 0; j < width; ++j) out[j] = std::max(out[j], load_as<A>(x[r * stride + j]));
  }
  for (int64_t r = 0; r < len; ++r) {
    if constexpr (std::is_same_v<Src, float> && std::is_same_v<A, float>) {
      float e[kTile];
      best_softmax_row_kernels().exp_shifted(x + r * stride, out, e, width);
      for (int64_t j = 0; j < width; ++j) sum[j] += e[j];
    } else {
      for (int64_t j = 0; j < width; ++j) sum[j] += std::exp(load_as<A>(x[r * stride + j]) - out[j]);
    }
  }
  for (int64_t j = 0; j < width; ++j) {
    if (std::isfinite(out[j])) out[j] += std::log(sum[j]);
  }
}

template <ReduceOp Op, bool First, typename A, typename Src>
A reduce_row(const Src* x, int64_t n) {
  using M = ReduceMath<Op, A>;
  // f32 rows whose per-element map is identity or a square go to the SIMD row kernels.
  constexpr bool kF32 = std::is_same_v<Src, float> && std::is_same_v<A, float>;
  constexpr bool kPlainSum = M::kAdds && (!First || Op == ReduceOp::kSum || Op == ReduceOp::kMean || Op == ReduceOp::kLogSum);
  constexpr bool kSquareSum = First && (Op == ReduceOp::kL2 || Op == ReduceOp::kSumSquare);
  if constexpr (Op == ReduceOp::kLogSumExp) {
    return log_sum_exp_row<A>(x, n);
  } else if constexpr (kF32 && kPlainSum) {
    return best_norm_row_kernels().sum(x, n);
  } else if constexpr (kF32 && kSquareSum) {
    return best_norm_row_kernels().sum_sq_dev(x, 0.0f, n);
  } else if constexpr (kF32 && Op == ReduceOp::kMax) {
    return n > 0 ? best_softmax_row_kernels().max(x, n) : M::init();
  } else {
    const auto term = [](const Src& v) { return First ? M::map(load_as<A>(v)) : load_as<A>(v); };
    A acc[kLanes];
    std::fill(acc, acc + kLanes, M::init());
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (int k = 0; k < kLanes; ++k) acc[k] = M::combine(acc[k], term(x[i + k]));
    }
    for (; i < n; ++i) acc[0] = M::combine(acc[0], term(x[i]));
    for (int k = 1; k < kLanes; ++k) acc[0] = M::combine(acc[0], acc[k]);
    return acc[0];
  }
}

// Accumulates `len` rows of `width` contiguous columns (row stride `stride`) into acc[width].
template <ReduceOp Op, bool First, typename A, typename Src>
void reduce_tile(const Src* x, int64_t len, int64_t stride, int64_t width, A* acc) {
  using M = ReduceMath<Op, A>;
  if constexpr (Op == ReduceOp::kLogSumExp) {
    log_sum_exp_tile(x, len, stride, width, acc);
  } else {
    std::fill(acc, acc + width, M::init());
    for (int64_t r = 0; r < len; ++r) {
      const Src* row = x + r * stride;
      for (int64_t j = 0; j < width; ++j) {
        const A v = load_as<A>(row[j]);
        acc[j] = M::combine(acc[j], First ? M::map(v) : v);
      }
    }
  }
}

// One pass: src [outer, len, inner] -> dst [outer, inner]. The first pass applies the op's
// per-element map; the last applies its final map and stores T.
template <ReduceOp Op, bool First, bool Last, typename A, typename Src, typename Dst>
void reduce_pass(const Src* src, Dst* dst, AxisView v, int64_t count, ThreadPool* pool) {
  using M = ReduceMath<Op, A>;
  const auto put = [count](A a) -> Dst {
    if constexpr (Last) return store<Dst>(static_cast<compute_t<Dst>>(M::finish(a, count)));
    else return a;
  };
  if (v.inner == 1) {
    parallel_for(pool, v.outer, min_chunk(v.len), [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) dst[o] = put(reduce_row<Op, First, A>(src + o * v.len, v.len));
    });
    return;
  }
  const int64_t tiles = (v.inner + kTile - 1) / kTile;
  parallel_for(pool, v.outer * tiles, min_chunk(v.len * std::min(kTile, v.inner)), [&](int64_t begin, int64_t end) {
    A acc[kTile];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / tiles, col = (t % tiles) * kTile, width = std::min(kTile, v.inner - col);
      reduce_tile<Op, First, A>(src + o * v.len * v.inner + col, v.len, v.inner, width, acc);
      for (int64_t j = 0; j < width; ++j) dst[o * v.inner + col + j] = put(acc[j]);
    }
  });
}

template <ReduceOp Op>
using reduce_types = std::conditional_t<
    Op == ReduceOp::kL2 || Op == ReduceOp::kLogSum || Op == ReduceOp::kLogSumExp, FloatTypes,
    std::conditional_t<Op == ReduceOp::kMax || Op == ReduceOp::kMin, OrderedTypes, NumericTypes>>;

template <ReduceOp Op>
class ReduceKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& shape = ctx.input(0).shape;
    OG_ASSIGN_OR_RETURN(std::vector<bool> reduced, reduce_axes_mask(ctx.node, ctx.value(1), shape.rank()));
    plan_passes(shape, reduced);
    // Intermediate passes ping-pong between two buffers sized by the first two passes' outputs
    // (each pass's output is smaller than the previous one's). 8 bytes covers every accumulator.
    second_buffer_offset_ = 0;
    ctx.workspace_bytes = 0;
    if (passes_.size() > 1) {
      second_buffer_offset_ = align(passes_[0].outer * passes_[0].inner * 8);
      const AxisView& p1 = passes_[1];
      ctx.workspace_bytes = second_buffer_offset_ + (passes_.size() > 2 ? p1.outer * p1.inner * 8 : 0);
    }
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch(reduce_types<Op>{}, ctx.input(0).dtype, [&]<typename T>() {
      using A = acc_t<T>;
      const T* x = ctx.input(0).ptr<const T>();
      T* y = ctx.output(0).ptr<T>();
      if (empty_input_) {
        std::fill(y, y + ctx.output(0).numel(), store<T>(static_cast<compute_t<T>>(empty_value<A>())));
        return Status::ok();
      }
      const size_t n = passes_.size();
      if (n == 1) {
        reduce_pass<Op, true, true, A>(x, y, passes_[0], count_, ctx.pool);
        return Status::ok();
      }
      A* buffers[2] = {static_cast<A*>(ctx.workspace),
                       reinterpret_cast<A*>(static_cast<char*>(ctx.workspace) + second_buffer_offset_)};
      reduce_pass<Op, true, false, A>(x, buffers[0], passes_[0], count_, ctx.pool);
      for (size_t p = 1; p + 1 < n; ++p) {
        reduce_pass<Op, false, false, A>(buffers[(p - 1) % 2], buffers[p % 2], passes_[p], count_, ctx.pool);
      }
      reduce_pass<Op, false, true, A>(buffers[(n - 2) % 2], y, passes_[n - 1], count_, ctx.pool);
      return Status::ok();
    });
  }

 private:
  static int64_t align(int64_t bytes) { return (bytes + 63) / 64 * 64; }

  // The value of a reduction over no elements: the op's identity element, finished.
  template <typename A>
  A empty_value() const {
    if constexpr (Op == ReduceOp::kLogSumExp) return -std::numeric_limits<A>::infinity();
    else return ReduceMath<Op, A>::finish(ReduceMath<Op, A>::init(), count_);
  }

  // The element count each output reduces and the passes (ops/schema/reduce.h).
  void plan_passes(const Shape& shape, const std::vector<bool>& reduced) {
    passes_.clear();
    empty_input_ = shape.numel() == 0;
    count_ = 1;
    for (int d = 0; d < shape.rank(); ++d) {
      if (reduced[static_cast<size_t>(d)]) count_ *= shape[d];
    }
    if (empty_input_) return;
    passes_ = plan_reduce_passes(shape, reduced);
  }

  std::vector<AxisView> passes_;
  int64_t count_ = 1;
  int64_t second_buffer_offset_ = 0;
  bool empty_input_ = false;
};

// ---------------------------------------------------------------------------------------------
// ArgMax / ArgMin

template <bool Max, typename A>
bool better(A v, A best, bool last) {
  if constexpr (Max) return last ? v >= best : v > best;
  else return last ? v <= best : v < best;
}

template <bool Max>
class ArgReduceKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& shape = ctx.input(0).shape;
    const int axis = normalize_axis(ctx.attrs().get_int("axis", 0), shape.rank());
    if (axis < 0) return ctx.fail("axis out of range");
    view_ = view_around(shape, axis);
    last_ = ctx.attrs().get_int("select_last_index", 0) != 0;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch(OrderedTypes{}, ctx.input(0).dtype, [&]<typename T>() {
      using A = compute_t<T>;
      const T* x = ctx.input(0).ptr<const T>();
      int64_t* y = ctx.output(0).ptr<int64_t>();
      const AxisView v = view_;
      const bool last = last_;
      if (v.inner == 1) {
        // Contiguous rows (logits): a vectorised max (min) pass, then the first (last) index
        // holding that value, instead of a serial compare-and-branch chain.
        parallel_for(ctx.pool, v.outer, min_chunk(v.len), [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) y[o] = extreme_index<T>(x + o * v.len, v.len);
        });
        return Status::ok();
      }
      const int64_t tiles = (v.inner + kTile - 1) / kTile;
      parallel_for(ctx.pool, v.outer * tiles, min_chunk(v.len * std::min(kTile, v.inner)), [&](int64_t begin, int64_t end) {
        A best[kTile];
        int64_t index[kTile];
        for (int64_t t = begin; t < end; ++t) {
          const int64_t o = t / tiles, col = (t % tiles) * kTile, width = std::min(kTile, v.inner - col);
          const T* base = x + o * v.len * v.inner + col;
          for (int64_t j = 0; j < width; ++j) best[j] = load(base[j]), index[j] = 0;
          for (int64_t r = 1; r < v.len; ++r) {
            const T* row = base + r * v.inner;
            for (int64_t j = 0; j < width; ++j) {
              const A val = load(row[j]);
              if (better<Max>(val, best[j], last)) best[j] = val, index[j] = r;
            }
          }
          std::copy(index, index + width, y + o * v.inner + col);
        }
      });
      return Status::ok();
    });
  }

 private:
  template <typename T>
  int64_t extreme_index(const T* row, int64_t len) const {
    using A = acc_t<T>;
    const A target = reduce_row<Max ? ReduceOp::kMax : ReduceOp::kMin, true, A>(row, len);
    if (last_) {
      for (int64_t i = len; i-- > 0;) {
        if (load_as<A>(row[i]) == target) return i;
      }
    } else {
      for (int64_t i = 0; i < len; ++i) {
        if (load_as<A>(row[i]) == target) return i;
      }
    }
    return 0;  // only NaN rows: no element equals the max
  }

  AxisView view_;
  bool last_ = false;
};

// ---------------------------------------------------------------------------------------------
// TopK: per lane, a heap of the K best (value, index) pairs seen so far, whose top is the worst
// kept; a candidate enters only if it ranks before that top. O(len log K), one pass over the
// input, no copy of the lane. Ties rank the lower index first; NaN ranks above every number.

template <typename A>
struct Ranked {
  A value;
  int64_t index;
};

template <bool Largest, typename A>
bool ranks_before(const Ranked<A>& a, const Ranked<A>& b) {
  if constexpr (std::is_floating_point_v<A>) {
    const bool a_nan = std::isnan(a.value), b_nan = std::isnan(b.value);
    if (a_nan || b_nan) {
      if (a_nan != b_nan) return Largest ? a_nan : b_nan;
      return a.index < b.index;
    }
  }
  if (a.value != b.value) return Largest ? a.value > b.value : a.value < b.value;
  return a.index < b.index;
}

template <bool Largest, typename T>
void top_k_lane(const T* x, int64_t len, int64_t stride, int64_t k, Ranked<compute_t<T>>* heap, T* values,
                int64_t* indices /* may be null */) {
  using A = compute_t<T>;
  const auto cmp = [](const Ranked<A>& a, const Ranked<A>& b) { return ranks_before<Largest>(a, b); };
  for (int64_t i = 0; i < k; ++i) heap[i] = {load(x[i * stride]), i};
  std::make_heap(heap, heap + k, cmp);
  for (int64_t i = k; i < len; ++i) {
    const Ranked<A> candidate{load(x[i * stride]), i};
    if (!cmp(candidate, heap[0])) continue;
    std::pop_heap(heap, heap + k, cmp);
    heap[k - 1] = candidate;
    std::push_heap(heap, heap + k, cmp);
  }
  std::sort_heap(heap, heap + k, cmp);  // best first
  for (int64_t i = 0; i < k; ++i) {
    values[i * stride] = store<T>(heap[i].value);
    if (indices != nullptr) indices[i * stride] = heap[i].index;
  }
}

class TopKKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& shape = ctx.input(0).shape;
    const int axis = normalize_axis(ctx.attrs().get_int("axis", -1), shape.rank());
    if (axis < 0) return ctx.fail("axis out of range");
    view_ = view_around(shape, axis);
    OG_ASSIGN_OR_RETURN(k_, topk_k(ctx.node, ctx.value(1)));
    if (k_ < 0 || k_ > view_.len) return ctx.fail("K=", k_, " outside [0, ", view_.len, "]");
    largest_ = ctx.attrs().get_int("largest", 1) != 0;
    // One heap of K pairs per parallel chunk; a pair is at most 16 bytes.
    const int threads = ctx.pool != nullptr ? ctx.pool->num_threads() : 1;
    chunks_ = std::max<int64_t>(1, std::min<int64_t>(view_.outer * view_.inner, threads));
    ctx.workspace_bytes = static_cast<size_t>(chunks_ * std::max<int64_t>(k_, 1) * 16);
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch(OrderedTypes{}, ctx.input(0).dtype, [&]<typename T>() {
      using A = compute_t<T>;
      const T* x = ctx.input(0).ptr<const T>();
      T* values = ctx.output(0).ptr<T>();
      int64_t* indices = ctx.outputs.size() > 1 ? ctx.output(1).ptr<int64_t>() : nullptr;  // may be omitted
      const AxisView v = view_;
      const int64_t lanes = v.outer * v.inner, k = k_;
      if (k == 0) return Status::ok();
      parallel_for(ctx.pool, chunks_, 1, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          auto* heap = static_cast<Ranked<A>*>(ctx.workspace) + c * k;
          for (int64_t lane = lanes * c / chunks_; lane < lanes * (c + 1) / chunks_; ++lane) {
            const int64_t o = lane / v.inner, i = lane % v.inner;
            const T* src = x + o * v.len * v.inner + i;
            const int64_t out = o * k * v.inner + i;
            int64_t* lane_indices = indices != nullptr ? indices + out : nullptr;
            if (largest_) top_k_lane<true>(src, v.len, v.inner, k, heap, values + out, lane_indices);
            else top_k_lane<false>(src, v.len, v.inner, k, heap, values + out, lane_indices);
          }
        }
      });
      return Status::ok();
    });
  }

 private:
  AxisView view_;
  int64_t k_ = 0, chunks_ = 1;
  bool largest_ = true;
};

// ---------------------------------------------------------------------------------------------
// CumSum: running sums along the axis; a tile of kTile columns advances row by row.

class CumSumKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(int axis, cumsum_axis(ctx.node, ctx.value(1), ctx.input(0).shape.rank()));
    view_ = view_around(ctx.input(0).shape, axis);
    exclusive_ = ctx.attrs().get_int("exclusive", 0) != 0;
    reverse_ = ctx.attrs().get_int("reverse", 0) != 0;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch(NumericTypes{}, ctx.input(0).dtype, [&]<typename T>() {
      using A = acc_t<T>;
      const T* x = ctx.input(0).ptr<const T>();
      T* y = ctx.output(0).ptr<T>();
      const AxisView v = view_;
      if (v.inner == 1) {
        // Contiguous rows: one running sum per row.
        parallel_for(ctx.pool, v.outer, min_chunk(v.len), [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) {
            if (reverse_) scan_row<true, A>(x + o * v.len, y + o * v.len, v.len);
            else scan_row<false, A>(x + o * v.len, y + o * v.len, v.len);
          }
        });
        return Status::ok();
      }
      const int64_t tiles = (v.inner + kTile - 1) / kTile;
      parallel_for(ctx.pool, v.outer * tiles, min_chunk(v.len * std::min(kTile, v.inner)), [&](int64_t begin, int64_t end) {
        A acc[kTile];
        for (int64_t t = begin; t < end; ++t) {
          const int64_t o = t / tiles, col = (t % tiles) * kTile, width = std::min(kTile, v.inner - col);
          std::fill(acc, acc + width, A(0));
          for (int64_t step = 0; step < v.len; ++step) {
            const int64_t r = reverse_ ? v.len - 1 - step : step;
            const int64_t offset = (o * v.len + r) * v.inner + col;
            for (int64_t j = 0; j < width; ++j) {
              const A in = load_as<A>(x[offset + j]);
              if (!exclusive_) acc[j] += in;
              y[offset + j] = store<T>(static_cast<compute_t<T>>(acc[j]));
              if (exclusive_) acc[j] += in;
            }
          }
        }
      });
      return Status::ok();
    });
  }

 private:
  template <bool Reverse, typename A, typename T>
  void scan_row(const T* x, T* y, int64_t len) const {
    A acc = 0;
    for (int64_t step = 0; step < len; ++step) {
      const int64_t i = Reverse ? len - 1 - step : step;
      const A in = load_as<A>(x[i]);
      if (exclusive_) {
        y[i] = store<T>(static_cast<compute_t<T>>(acc));
        acc += in;
      } else {
        acc += in;
        y[i] = store<T>(static_cast<compute_t<T>>(acc));
      }
    }
  }

  AxisView view_;
  bool exclusive_ = false, reverse_ = false;
};

template <typename Kernel>
KernelDef cpu_kernel(const char* op, std::vector<DType> dtypes) {
  return KernelDef{.domain = "", .op_type = op, .device = DeviceType::kCpu, .dtypes = std::move(dtypes),
                   .create = [](const Node&) -> std::unique_ptr<OpKernel> { return std::make_unique<Kernel>(); }};
}

template <ReduceOp Op>
void add_reduce(OpRegistry& registry, const char* op) {
  registry.add_kernel(cpu_kernel<ReduceKernel<Op>>(op, dtypes_of(reduce_types<Op>{})));
}

}  // namespace

void register_reduce_cpu_kernels(OpRegistry& registry) {
  add_reduce<ReduceOp::kSum>(registry, "ReduceSum");
  add_reduce<ReduceOp::kMean>(registry, "ReduceMean");
  add_reduce<ReduceOp::kMax>(registry, "ReduceMax");
  add_reduce<ReduceOp::kMin>(registry, "ReduceMin");
  add_reduce<ReduceOp::kProd>(registry, "ReduceProd");
  add_reduce<ReduceOp::kL1>(registry, "ReduceL1");
  add_reduce<ReduceOp::kL2>(registry, "ReduceL2");
  add_reduce<ReduceOp::kLogSum>(registry, "ReduceLogSum");
  add_reduce<ReduceOp::kLogSumExp>(registry, "ReduceLogSumExp");
  add_reduce<ReduceOp::kSumSquare>(registry, "ReduceSumSquare");
  registry.add_kernel(cpu_kernel<ArgReduceKernel<true>>("ArgMax", dtypes_of(OrderedTypes{})));
  registry.add_kernel(cpu_kernel<ArgReduceKernel<false>>("ArgMin", dtypes_of(OrderedTypes{})));
  registry.add_kernel(cpu_kernel<TopKKernel>("TopK", dtypes_of(OrderedTypes{})));
  registry.add_kernel(cpu_kernel<CumSumKernel>("CumSum", dtypes_of(NumericTypes{})));
}

}  // namespace onnx_genai
