// CPU kernels of the gather family. Values are moved as bytes, so one instantiation per index
// type serves every element type; only Scatter reductions look at the values.
//
// Index values arrive at run time, so every kernel checks them there and fails with a Status
// naming the node and the bad index instead of reading out of bounds.
#include <atomic>
#include <cstring>

#include "core/thread_pool.h"
#include "ops/cpu/copy_util.h"
#include "ops/cpu/dispatch.h"
#include "ops/op.h"

namespace onnx_genai {
namespace {

// A possibly negative index into a dim of size n, or -1 when out of range.
inline int64_t wrap_index(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return i >= 0 && i < n ? i : -1;
}

// Shape inference admits only int32 and int64 indices. A plain branch, because dispatch_dtype
// formats its fallback error on every call and Gather runs every decode step.
template <typename Fn>
Status dispatch_index_type(DType t, Fn&& fn) {
  if (t == DType::kI32) return fn.template operator()<int32_t>();
  return fn.template operator()<int64_t>();
}

Status bad_index(const std::string& node, int64_t value, int64_t dim) {
  return OG_ERROR(node, ": index ", value, " out of range for dim of size ", dim);
}

// Gather: data [outer, axis_n, inner] and indices [n] give out [outer, n, inner]; each output row
// of `inner` elements is one memcpy. axis = 0 (embedding lookup) is outer = 1: one row per token.
class GatherKernel final : public OpKernel {
 public:
  explicit GatherKernel(const Node& node) : name_(node.describe()) {}

  Status prepare(PrepareContext& ctx) override {
    const Shape& data = ctx.input(0).shape;
    const int axis = normalize_axis(ctx.attrs().get_int("axis", 0), data.rank());
    OG_ASSIGN_OR_RETURN(const int64_t elem, element_bytes(ctx.input(0).dtype));
    outer_ = data.numel(0, axis);
    axis_n_ = data[axis];
    row_bytes_ = data.numel(axis + 1, data.rank()) * elem;
    index_type_ = ctx.input(1).dtype;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch_index_type(index_type_, [&]<typename I>() {
      const I* idx = ctx.input(1).ptr<I>();
      const int64_t n = ctx.input(1).numel();
      for (int64_t i = 0; i < n; ++i) {
        if (wrap_index(idx[i], axis_n_) < 0) return bad_index(name_, idx[i], axis_n_);
      }
      const auto* src = static_cast<const char*>(ctx.input(0).data);
      auto* dst = static_cast<char*>(ctx.output(0).data);
      parallel_for(ctx.pool, outer_ * n, copy_min_chunk(row_bytes_), [&](int64_t begin, int64_t end) {
        for (int64_t u = begin; u < end; ++u) {
          const int64_t o = u / n;
          const int64_t row = wrap_index(idx[u - o * n], axis_n_);
          copy_bytes(dst + u * row_bytes_, src + (o * axis_n_ + row) * row_bytes_, row_bytes_);
        }
      });
      return Status::ok();
    });
  }

 private:
  std::string name_;
  int64_t outer_ = 0, axis_n_ = 0, row_bytes_ = 0;
  DType index_type_ = DType::kI64;
};

// GatherElements / ScatterElements geometry: element i of `indices` (same rank as data) maps to
// the data element at the same coordinates with coordinate `axis` replaced by the index value.
struct ElementsGeometry {
  int rank = 0, axis = 0;
  int64_t axis_n = 0;  // data dim along the axis
  int64_t rows = 0;    // indices viewed as [rows, last()]
  DType index_type = DType::kI64;
  std::array<int64_t, StridedCopy::kMaxDims> dims{};          // indices dims
  std::array<int64_t, StridedCopy::kMaxDims> data_strides{};  // data element strides

  // From the node's data (input 0), indices (input 1) and `axis` attribute.
  Status init(const PrepareContext& ctx, const std::string& node) {
    const Shape& data = ctx.input(0).shape;
    const Shape& indices = ctx.input(1).shape;
    if (data.rank() > StridedCopy::kMaxDims) return OG_ERROR(node, ": rank ", data.rank(), " not supported");
    rank = data.rank();
    axis = normalize_axis(ctx.attrs().get_int("axis", 0), rank);
    const std::vector<int64_t> strides = data.strides();
    for (int d = 0; d < rank; ++d) {
      dims[static_cast<size_t>(d)] = indices[d];
      data_strides[static_cast<size_t>(d)] = strides[static_cast<size_t>(d)];
    }
    axis_n = data[axis];
    rows = last() == 0 ? 0 : indices.numel() / last();
    index_type = ctx.input(1).dtype;
    return Status::ok();
  }
  int64_t last() const { return rank == 0 ? 1 : dims[static_cast<size_t>(rank - 1)]; }

  // Calls fn(i, data_offset) for indices elements [row_begin * last(), row_end * last()). Returns
  // the position of the first out-of-range index, or -1.
  template <typename I, typename Fn>
  int64_t for_each(const I* idx, int64_t row_begin, int64_t row_end, Fn&& fn) const {
    const int64_t n = last();
    const int64_t axis_stride = data_strides[static_cast<size_t>(axis)];
    const bool axis_is_last = axis == rank - 1;
    for (int64_t row = row_begin; row < row_end; ++row) {
      // Data offset of the row start with the axis coordinate left out (ranks are small).
      int64_t base = 0, rem = row;
      for (int d = rank - 2; d >= 0; --d) {
        const int64_t c = rem % dims[static_cast<size_t>(d)];
        rem /= dims[static_cast<size_t>(d)];
        if (d != axis) base += c * data_strides[static_cast<size_t>(d)];
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t i = row * n + j;
        const int64_t pos = wrap_index(idx[i], axis_n);
        if (pos < 0) return i;
        fn(i, base + (axis_is_last ? 0 : j) + pos * axis_stride);
      }
    }
    return -1;
  }
};

class GatherElementsKernel final : public OpKernel {
 public:
  explicit GatherElementsKernel(const Node& node) : name_(node.describe()) {}

  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(elem_, element_bytes(ctx.input(0).dtype));
    return geo_.init(ctx, name_);
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch_index_type(geo_.index_type, [&]<typename I>() {
      const I* idx = ctx.input(1).ptr<I>();
      const auto* src = static_cast<const char*>(ctx.input(0).data);
      auto* dst = static_cast<char*>(ctx.output(0).data);
      std::atomic<int64_t> bad{-1};
      parallel_for(ctx.pool, geo_.rows, copy_min_chunk(geo_.last() * elem_), [&](int64_t begin, int64_t end) {
        const int64_t at = geo_.for_each(idx, begin, end, [&](int64_t i, int64_t off) {
          copy_bytes(dst + i * elem_, src + off * elem_, elem_);
        });
        if (at >= 0) bad.store(at);
      });
      if (bad.load() >= 0) return bad_index(name_, idx[bad.load()], geo_.axis_n);
      return Status::ok();
    });
  }

 private:
  std::string name_;
  ElementsGeometry geo_;
  int64_t elem_ = 0;
};

// GatherND / ScatterND geometry: data [batch, d_0..d_{k-1}, slice] and indices [batch, tuples, k];
// each k-tuple selects one contiguous slice of data.
struct TupleIndexer {
  int64_t k = 0, batch = 0, tuples = 0, batch_stride = 0, slice = 0;
  std::vector<int64_t> dims, strides;

  void init(const Shape& data, const Shape& indices, int b) {
    k = indices[indices.rank() - 1];
    batch = data.numel(0, b);
    tuples = indices.numel(b, indices.rank() - 1);
    batch_stride = data.numel(b, data.rank());
    slice = data.numel(b + static_cast<int>(k), data.rank());
    const std::vector<int64_t> all = data.strides();
    dims.assign(data.dims().begin() + b, data.dims().begin() + b + k);
    strides.assign(all.begin() + b, all.begin() + b + k);
  }
  int64_t units() const { return batch * tuples; }
  Status check(const int64_t* idx, const std::string& node) const {
    for (int64_t i = 0; i < units() * k; ++i) {
      const int64_t dim = dims[static_cast<size_t>(i % k)];
      if (wrap_index(idx[i], dim) < 0) return bad_index(node, idx[i], dim);
    }
    return Status::ok();
  }
  // Element offset in data of the slice selected by tuple `u` (indices already checked).
  int64_t offset(const int64_t* idx, int64_t u) const {
    int64_t off = (u / tuples) * batch_stride;
    for (int64_t t = 0; t < k; ++t) {
      const size_t ut = static_cast<size_t>(t);
      off += wrap_index(idx[u * k + t], dims[ut]) * strides[ut];
    }
    return off;
  }
};

class GatherNDKernel final : public OpKernel {
 public:
  explicit GatherNDKernel(const Node& node) : name_(node.describe()) {}

  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(elem_, element_bytes(ctx.input(0).dtype));
    tuples_.init(ctx.input(0).shape, ctx.input(1).shape, static_cast<int>(ctx.attrs().get_int("batch_dims", 0)));
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const int64_t* idx = ctx.input(1).ptr<int64_t>();
    OG_RETURN_IF_ERROR(tuples_.check(idx, name_));
    const auto* src = static_cast<const char*>(ctx.input(0).data);
    auto* dst = static_cast<char*>(ctx.output(0).data);
    const int64_t slice_bytes = tuples_.slice * elem_;
    parallel_for(ctx.pool, tuples_.units(), copy_min_chunk(slice_bytes), [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        copy_bytes(dst + u * slice_bytes, src + tuples_.offset(idx, u) * elem_, slice_bytes);
      }
    });
    return Status::ok();
  }

 private:
  std::string name_;
  int64_t elem_ = 0;
  TupleIndexer tuples_;
};

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> parse_reduction(const PrepareContext& ctx) {
  const std::string r = ctx.attrs().get_string("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return ctx.fail("unknown reduction '", r, "'");
}

// dst[i] = reduction(dst[i], src[i]) for n elements, in f32 for 16-bit floats.
template <typename T>
void reduce_into(T* dst, const T* src, int64_t n, Reduction r) {
  auto apply = [&](auto op) {
    for (int64_t i = 0; i < n; ++i) dst[i] = store<T>(static_cast<compute_t<T>>(op(load(dst[i]), load(src[i]))));
  };
  switch (r) {
    case Reduction::kAdd: return apply([](auto a, auto b) { return a + b; });
    case Reduction::kMul: return apply([](auto a, auto b) { return a * b; });
    case Reduction::kMax: return apply([](auto a, auto b) { return a < b ? b : a; });
    case Reduction::kMin: return apply([](auto a, auto b) { return b < a ? b : a; });
    case Reduction::kNone: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T)); return;
  }
}

// Element types a scatter reduction can combine (a plain scatter moves bytes of any type).
template <typename Fn>
Status dispatch_reducible(DType t, Fn&& fn) {
  return dispatch_dtype<float, Float16, BFloat16, double, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t,
                        int64_t, uint64_t>(t, std::forward<Fn>(fn));
}

// Shared by the scatters: output starts as a copy of data, then updates land on it in index order
// (so with duplicate indices and no reduction the last update wins, as in the reference).
class ScatterBase : public OpKernel {
 public:
  explicit ScatterBase(const Node& node) : name_(node.describe()) {}

  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(elem_, element_bytes(ctx.input(0).dtype));
    OG_ASSIGN_OR_RETURN(reduction_, parse_reduction(ctx));
    dtype_ = ctx.input(0).dtype;
    if (reduction_ != Reduction::kNone && !dtype_is_float(dtype_) && !dtype_is_integer(dtype_)) {
      return ctx.fail("reduction on ", dtype_name(dtype_), " is not supported");
    }
    const int64_t n = ctx.input(0).shape.numel();
    const int64_t one = 1;
    OG_ASSIGN_OR_RETURN(copy_, StridedCopy::make({&n, 1}, {&one, 1}, {&one, 1}, elem_));
    return Status::ok();
  }

 protected:
  void copy_data(const KernelContext& ctx) const {
    if (ctx.output(0).data != ctx.input(0).data) copy_.run(ctx.input(0).data, ctx.output(0).data, ctx.pool);
  }
  // Calls fn(combine) where combine(dst, src, n) stores (or reduces) n elements at byte pointers;
  // the value type is resolved once here, not per element.
  template <typename Fn>
  Status with_combiner(Fn&& fn) const {
    if (reduction_ == Reduction::kNone) {
      return fn([this](char* dst, const char* src, int64_t n) { copy_bytes(dst, src, n * elem_); });
    }
    return dispatch_reducible(dtype_, [&]<typename T>() {
      return fn([this](char* dst, const char* src, int64_t n) {
        reduce_into(reinterpret_cast<T*>(dst), reinterpret_cast<const T*>(src), n, reduction_);
      });
    });
  }

  std::string name_;
  int64_t elem_ = 0;
  Reduction reduction_ = Reduction::kNone;
  DType dtype_ = DType::kUndefined;
  StridedCopy copy_;
};

class ScatterElementsKernel final : public ScatterBase {
 public:
  using ScatterBase::ScatterBase;

  Status prepare(PrepareContext& ctx) override {
    OG_RETURN_IF_ERROR(ScatterBase::prepare(ctx));
    return geo_.init(ctx, name_);
  }

  Status run(const KernelContext& ctx) const override {
    copy_data(ctx);
    const auto* updates = static_cast<const char*>(ctx.input(2).data);
    auto* dst = static_cast<char*>(ctx.output(0).data);
    return with_combiner([&](auto combine) {
      return dispatch_index_type(geo_.index_type, [&]<typename I>() {
        const I* idx = ctx.input(1).ptr<I>();
        const int64_t at = geo_.for_each(idx, 0, geo_.rows, [&](int64_t i, int64_t off) {
          combine(dst + off * elem_, updates + i * elem_, 1);
        });
        if (at >= 0) return bad_index(name_, idx[at], geo_.axis_n);
        return Status::ok();
      });
    });
  }

 private:
  ElementsGeometry geo_;
};

class ScatterNDKernel final : public ScatterBase {
 public:
  using ScatterBase::ScatterBase;

  Status prepare(PrepareContext& ctx) override {
    OG_RETURN_IF_ERROR(ScatterBase::prepare(ctx));
    tuples_.init(ctx.input(0).shape, ctx.input(1).shape, 0);
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const int64_t* idx = ctx.input(1).ptr<int64_t>();
    OG_RETURN_IF_ERROR(tuples_.check(idx, name_));
    copy_data(ctx);
    const auto* updates = static_cast<const char*>(ctx.input(2).data);
    auto* dst = static_cast<char*>(ctx.output(0).data);
    const int64_t slice_bytes = tuples_.slice * elem_;
    return with_combiner([&](auto combine) {
      for (int64_t u = 0; u < tuples_.units(); ++u) {
        combine(dst + tuples_.offset(idx, u) * elem_, updates + u * slice_bytes, tuples_.slice);
      }
      return Status::ok();
    });
  }

 private:
  TupleIndexer tuples_;
};

template <typename K>
std::unique_ptr<OpKernel> make(const Node& node) {
  return std::make_unique<K>(node);
}

}  // namespace

// com.microsoft GatherBlockQuantized lives in ops/cpu/gather_block_quantized.cc.
void register_gather_block_quantized_cpu_kernel(OpRegistry& registry);

void register_gather_cpu_kernels(OpRegistry& registry) {
  registry.add_kernel(any_dtype_kernel("Gather", make<GatherKernel>));
  registry.add_kernel(any_dtype_kernel("GatherElements", make<GatherElementsKernel>, 11));
  registry.add_kernel(any_dtype_kernel("GatherND", make<GatherNDKernel>, 11));
  registry.add_kernel(any_dtype_kernel("ScatterElements", make<ScatterElementsKernel>, 11));
  registry.add_kernel(any_dtype_kernel("Scatter", make<ScatterElementsKernel>, 9, 10));
  registry.add_kernel(any_dtype_kernel("ScatterND", make<ScatterNDKernel>, 11));
  register_gather_block_quantized_cpu_kernel(registry);
}

}  // namespace onnx_genai
