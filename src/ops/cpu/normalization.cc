// CPU kernels for LayerNormalization, RMSNormalization, SimplifiedLayerNormalization and the
// com.microsoft Skip norms (SkipLayerNormalization, SkipSimplifiedLayerNormalization).
//
// X is viewed as [rows, len] with len = X.shape[axis:] (normalised together). Each row is read
// three times while it sits in L1/L2: sum (LayerNorm only), sum of squared deviations, then the
// affine write y = (x - mean) * inv_std * scale (+ bias). Variance is two-pass (deviations from
// the mean) rather than E[x^2] - mean^2, which cancels badly for rows with a large mean. f32
// rows use the AVX-512 / AVX2 row kernels (ops/cpu/avx2/norm_rows_impl.h) or a scalar build;
// other dtypes take row statistics in f64. scale / bias may repeat along leading axes
// of the normalised shape (their period divides len), or vary across rows (any shape that
// broadcasts to X, as ONNX Runtime allows): then each run first expands them into the workspace,
// one row of len values per distinct row, and X row r reads its expanded row. Rows are split
// across threads.
//
// The Skip norms read input and skip once: the row kernels' add forms s = input + skip (+ bias)
// in an f32 row (for f32, the input_skip_bias_sum output when requested, else the output row;
// for 16-bit types, a per-thread scratch row in the workspace), whose statistics and affine
// write then stay in L1/L2.
#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/cpu/avx2/norm_rows.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/elementwise.h"
#include "ops/op.h"
#include "ops/schema/normalization.h"

namespace onnx_genai {

namespace {

constexpr int64_t kMinChunkElems = int64_t{1} << 15;

// Scalar row kernels for CPUs without AVX2; sums in f64 since one f32 accumulator drifts over
// wide rows.
float scalar_sum(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return static_cast<float>(s);
}
float scalar_sum_sq_dev(const float* x, float mean, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += (static_cast<double>(x[i]) - mean) * (static_cast<double>(x[i]) - mean);
  return static_cast<float>(s);
}
void scalar_affine(const float* x, float mean, float inv_std, const float* scale, const float* bias, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv_std * scale[i] + (bias != nullptr ? bias[i] : 0.0f);
}
void scalar_add(const float* x, const float* skip, const float* bias, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] + skip[i] + (bias != nullptr ? bias[i] : 0.0f);
}
const NormRowKernels kScalarNormRowKernels{scalar_sum, scalar_sum_sq_dev, scalar_affine, scalar_add};

struct RowStats {
  double mean;
  double inv_std;
};

// Centred (LayerNorm) or uncentred (RMS) statistics of one row of any float dtype.
template <bool Centred, typename T>
RowStats row_stats(const T* x, int64_t n, double epsilon, const NormRowKernels& k) {
  if constexpr (std::is_same_v<T, float>) {
    const float mean = Centred ? k.sum(x, n) / static_cast<float>(n) : 0.0f;
    const float var = k.sum_sq_dev(x, mean, n) / static_cast<float>(n);
    return {mean, 1.0 / std::sqrt(static_cast<double>(var) + epsilon)};
  } else {
    // The slow path (16-bit floats, f64) sums in f64.
    double mean = 0;
    if (Centred) {
      for (int64_t i = 0; i < n; ++i) mean += static_cast<double>(load(x[i]));
      mean /= static_cast<double>(n);
    }
    double var = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(load(x[i])) - mean;
      var += d * d;
    }
    var /= static_cast<double>(n);
    return {mean, 1.0 / std::sqrt(var + epsilon)};
  }
}

// A scale or bias that varies across X's rows, seen as a table of `rows` rows of len values:
// the parameter broadcast to dims (its own dims before axis, X's from axis on). X row r reads
// table row row_of[r].
struct ExpandedParam {
  std::vector<int64_t> dims;     // the table's dims
  std::vector<int64_t> strides;  // the parameter's element stride per table dim (0: broadcast)
  std::vector<int64_t> row_of;   // X row -> table row
  int64_t rows = 0;

  static ExpandedParam make(const Shape& param, const Shape& x, int axis) {
    const int rank = x.rank(), lead = x.rank() - param.rank();
    std::vector<int64_t> p(static_cast<size_t>(rank), 1);
    for (int i = 0; i < param.rank(); ++i) p[static_cast<size_t>(lead + i)] = param[i];
    ExpandedParam e;
    e.dims.resize(static_cast<size_t>(rank));
    e.strides.resize(static_cast<size_t>(rank));
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; --i) {
      const size_t u = static_cast<size_t>(i);
      e.dims[u] = i < axis ? p[u] : x[i];
      e.strides[u] = p[u] == 1 ? 0 : stride;
      stride *= p[u];
    }
    e.rows = 1;
    for (int i = 0; i < axis; ++i) e.rows *= e.dims[static_cast<size_t>(i)];
    // Row r's index over X's leading dims, with the broadcast ones dropped, read in the table's dims.
    const int64_t x_rows = x.numel(0, axis);
    e.row_of.resize(static_cast<size_t>(x_rows));
    for (int64_t r = 0; r < x_rows; ++r) {
      int64_t rest = r, row = 0, table_stride = 1;
      for (int i = axis - 1; i >= 0; --i) {
        const int64_t index = rest % x[i];
        rest /= x[i];
        if (p[static_cast<size_t>(i)] != 1) row += index * table_stride;
        table_stride *= e.dims[static_cast<size_t>(i)];
      }
      e.row_of[static_cast<size_t>(r)] = row;
    }
    return e;
  }

  int64_t elements(int64_t len) const { return rows * len; }

  // Writes the table (rows x len elements) from the parameter's data; no allocation (it runs
  // every step).
  template <typename T>
  void expand(const T* param, T* table, int64_t len) const {
    for (int64_t k = 0; k < elements(len); ++k) {
      int64_t rest = k, source = 0;
      for (size_t u = dims.size(); u-- > 0;) {
        source += rest % dims[u] * strides[u];
        rest /= dims[u];
      }
      table[k] = param[source];
    }
  }
};

template <bool Centred>
class NormKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    const Shape& x = ctx.input(0).shape;
    const int axis = normalize_axis(ctx.attrs().get_int("axis", -1), x.rank());
    if (axis < 0) return ctx.fail("axis out of range");
    rows_ = x.numel(0, axis);
    len_ = x.numel(axis, x.rank());
    // A parameter varying across rows is read from its expanded table, a row (period len) at a time.
    const auto layout = [&](int input, std::optional<ExpandedParam>& expanded) {
      const Shape& p = ctx.input(input).shape;
      if (norm_parameter_repeats_per_row(p, x, axis)) return p.numel();
      expanded = ExpandedParam::make(p, x, axis);
      return len_;
    };
    scale_table_.reset();
    bias_table_.reset();
    scale_period_ = layout(1, scale_table_);
    bias_period_ = ctx.has_input(2) ? layout(2, bias_table_) : len_;
    // Both periods divide len (checked by the schema); a segment is the shorter one.
    segment_ = std::min(scale_period_, bias_period_);
    if (len_ > 0 && (segment_ == 0 || len_ % scale_period_ != 0 || len_ % bias_period_ != 0)) {
      return ctx.fail("scale/bias size does not divide the normalised size ", len_);
    }
    const int64_t table_elements = (scale_table_ ? scale_table_->elements(len_) : 0) +
                                   (bias_table_ ? bias_table_->elements(len_) : 0);
    ctx.workspace_bytes = static_cast<size_t>(dtype_storage_bytes(ctx.input(0).dtype, table_elements));
    epsilon_ = ctx.attrs().get_float("epsilon", 1e-5f);
    // LayerNorm: outputs Y, Mean, InvStdDev. RMS norms: Y and (Simplified only) inv_std_var.
    mean_output_ = Centred ? 1 : -1;
    inv_std_output_ = Centred ? 2 : 1;
    rows_kernels_ = &best_norm_row_kernels();
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    if (rows_ * len_ == 0) return Status::ok();
    return dispatch_dtype<float, Float16, BFloat16, double>(ctx.input(0).dtype, [&]<typename T>() {
      const T* x = ctx.input(0).ptr<const T>();
      const T* scale = ctx.input(1).ptr<const T>();
      const T* bias = ctx.has_input(2) ? ctx.input(2).ptr<const T>() : nullptr;
      T* table = static_cast<T*>(ctx.workspace);
      if (scale_table_) {
        scale_table_->expand(scale, table, len_);
        scale = table;
        table += scale_table_->elements(len_);
      }
      if (bias_table_) {
        bias_table_->expand(bias, table, len_);
        bias = table;
      }
      T* y = ctx.output(0).ptr<T>();
      float* mean_out = stats_output(ctx, mean_output_);
      float* inv_out = stats_output(ctx, inv_std_output_);
      const int64_t len = len_;
      parallel_for(ctx.pool, rows_, std::max<int64_t>(1, kMinChunkElems / len), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const RowStats s = row_stats<Centred>(x + r * len, len, epsilon_, *rows_kernels_);
          if (mean_out != nullptr) mean_out[r] = static_cast<float>(s.mean);
          if (inv_out != nullptr) inv_out[r] = static_cast<float>(s.inv_std);
          const T* row_scale = scale_table_ ? scale + scale_table_->row_of[static_cast<size_t>(r)] * len : scale;
          const T* row_bias = bias_table_ ? bias + bias_table_->row_of[static_cast<size_t>(r)] * len : bias;
          write_row(x + r * len, row_scale, row_bias, s, y + r * len);
        }
      });
      return Status::ok();
    });
  }

 private:
  static float* stats_output(const KernelContext& ctx, int index) {
    return index >= 0 && index < static_cast<int>(ctx.outputs.size()) ? ctx.output(index).ptr<float>() : nullptr;
  }

  // y = (x - mean) * inv_std * scale (+ bias), one scale/bias segment at a time.
  template <typename T>
  void write_row(const T* x, const T* scale, const T* bias, RowStats s, T* y) const {
    for (int64_t j = 0; j < len_; j += segment_) {
      const T* sc = scale + j % scale_period_;
      const T* bi = bias != nullptr ? bias + j % bias_period_ : nullptr;
      if constexpr (std::is_same_v<T, float>) {
        rows_kernels_->affine(x + j, static_cast<float>(s.mean), static_cast<float>(s.inv_std), sc, bi, y + j, segment_);
      } else {
        using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
        const A mean = static_cast<A>(s.mean), inv = static_cast<A>(s.inv_std);
        for (int64_t i = 0; i < segment_; ++i) {
          A v = (static_cast<A>(load(x[j + i])) - mean) * inv * static_cast<A>(load(sc[i]));
          if (bi != nullptr) v += static_cast<A>(load(bi[i]));
          y[j + i] = store<T>(static_cast<compute_t<T>>(v));
        }
      }
    }
  }

  int64_t rows_ = 0, len_ = 0, scale_period_ = 1, bias_period_ = 1, segment_ = 1;
  std::optional<ExpandedParam> scale_table_, bias_table_;  // set for a parameter varying across rows
  double epsilon_ = 1e-5;
  int mean_output_ = -1, inv_std_output_ = -1;
  const NormRowKernels* rows_kernels_ = nullptr;
};

// Threads worth using on rows x len elements: each should get at least kMinChunkElems.
int64_t row_threads(const PrepareContext& ctx, int64_t rows, int64_t len) {
  const int64_t threads = ctx.pool != nullptr ? ctx.pool->num_threads() : 1;
  return std::clamp<int64_t>(std::min(threads, rows * len / kMinChunkElems), 1, std::max<int64_t>(rows, 1));
}

// SkipLayerNormalization (Centred) and SkipSimplifiedLayerNormalization over input [rows, len].
// Thread t of `slots_` takes a contiguous range of rows and (16-bit types) scratch row t.
template <bool Centred>
class SkipNormKernel final : public OpKernel {
 public:
  // Input slots: the simplified op has no beta, so its bias comes right after gamma.
  static constexpr int kBeta = Centred ? 3 : -1, kBias = Centred ? 4 : 3;
  static constexpr int kMeanOut = 1, kInvStdOut = 2, kSumOut = 3;

  Status prepare(PrepareContext& ctx) override {
    const Shape& x = ctx.input(0).shape;
    len_ = x[x.rank() - 1];
    rows_ = x.numel(0, x.rank() - 1);
    skip_rows_ = ctx.input(1).shape.numel(0, ctx.input(1).shape.rank() - 1);
    if (skip_rows_ == 0 ? rows_ != 0 : rows_ % skip_rows_ != 0) {
      return ctx.fail("skip rows ", skip_rows_, " do not repeat evenly over input rows ", rows_);
    }
    has_beta_ = kBeta >= 0 && ctx.has_input(kBeta);
    has_bias_ = ctx.has_input(kBias);
    epsilon_ = ctx.attrs().get_float("epsilon", 1e-12f);
    dtype_ = ctx.input(0).dtype;
    slots_ = row_threads(ctx, rows_, len_);
    // 16-bit types: gamma, beta, bias widened to f32, then one scratch row per thread.
    ctx.workspace_bytes = dtype_ == DType::kF32 ? 0 : static_cast<size_t>((3 + slots_) * len_) * sizeof(float);
    rows_kernels_ = &best_norm_row_kernels();
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    if (rows_ * len_ == 0) return Status::ok();
    return dispatch_dtype<float, Float16, BFloat16>(dtype_, [&]<typename T>() {
      run_typed<T>(ctx);
      return Status::ok();
    });
  }

 private:
  // gamma, beta, bias as f32 rows (beta / bias null when absent).
  struct Params {
    const float* gamma;
    const float* beta;
    const float* bias;
  };

  template <typename T>
  void run_typed(const KernelContext& ctx) const {
    float* workspace = static_cast<float*>(ctx.workspace);
    const auto param = [&](int input, bool present, int64_t slot) -> const float* {
      if (!present) return nullptr;
      if constexpr (std::is_same_v<T, float>) {
        return ctx.input(input).ptr<const float>();
      } else {
        widen_to_f32(ctx.input(input).ptr<const T>(), workspace + slot * len_, len_);
        return workspace + slot * len_;
      }
    };
    const Params params{param(2, true, 0), param(kBeta, has_beta_, 1), param(kBias, has_bias_, 2)};
    parallel_for(ctx.pool, slots_, 1, [&](int64_t begin, int64_t end) {
      float* scratch = workspace != nullptr ? workspace + (3 + begin) * len_ : nullptr;
      for (int64_t r = begin * rows_ / slots_; r < end * rows_ / slots_; ++r) run_row<T>(ctx, params, r, scratch);
    });
  }

  template <typename T>
  void run_row(const KernelContext& ctx, const Params& p, int64_t r, float* scratch) const {
    const NormRowKernels& k = *rows_kernels_;
    const T* x = ctx.input(0).ptr<const T>() + r * len_;
    const T* skip = ctx.input(1).ptr<const T>() + (r % skip_rows_) * len_;
    T* y = ctx.output(0).ptr<T>() + r * len_;
    T* sum_out = output_ptr<T>(ctx, kSumOut, r * len_);
    float* s = nullptr;  // the f32 row holding input + skip (+ bias)
    if constexpr (std::is_same_v<T, float>) {
      s = sum_out != nullptr ? sum_out : y;
      k.add(x, skip, p.bias, s, len_);
    } else {
      s = scratch;
      constexpr int64_t kBlock = 256;
      float xb[kBlock], sb[kBlock];
      for (int64_t j = 0; j < len_; j += kBlock) {
        const int64_t m = std::min(kBlock, len_ - j);
        widen_to_f32(x + j, xb, m);
        widen_to_f32(skip + j, sb, m);
        k.add(xb, sb, p.bias != nullptr ? p.bias + j : nullptr, s + j, m);
      }
      if (sum_out != nullptr) narrow_from_f32(s, sum_out, len_);
    }
    const RowStats stats = row_stats<Centred>(s, len_, epsilon_, k);
    if (float* mean = output_ptr<float>(ctx, kMeanOut, r)) *mean = static_cast<float>(stats.mean);
    if (float* inv = output_ptr<float>(ctx, kInvStdOut, r)) *inv = static_cast<float>(stats.inv_std);
    const float mean = static_cast<float>(stats.mean), inv_std = static_cast<float>(stats.inv_std);
    if constexpr (std::is_same_v<T, float>) {
      k.affine(s, mean, inv_std, p.gamma, p.beta, y, len_);
    } else {
      k.affine(s, mean, inv_std, p.gamma, p.beta, s, len_);
      narrow_from_f32(s, y, len_);
    }
  }

  template <typename U>
  static U* output_ptr(const KernelContext& ctx, int index, int64_t offset) {
    if (index >= static_cast<int>(ctx.outputs.size()) || ctx.output(index).data == nullptr) return nullptr;
    return ctx.output(index).ptr<U>() + offset;
  }

  int64_t rows_ = 0, len_ = 0, skip_rows_ = 1, slots_ = 1;
  bool has_beta_ = false, has_bias_ = false;
  double epsilon_ = 1e-12;
  DType dtype_ = DType::kF32;
  const NormRowKernels* rows_kernels_ = nullptr;
};

template <typename K>
void add_kernel(OpRegistry& registry, const char* domain, const char* op, std::vector<DType> dtypes) {
  KernelDef def;
  def.domain = domain;
  def.op_type = op;
  def.dtypes = std::move(dtypes);
  def.create = [](const Node&) -> std::unique_ptr<OpKernel> { return std::make_unique<K>(); };
  registry.add_kernel(std::move(def));
}

}  // namespace

const NormRowKernels& best_norm_row_kernels() {
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx512) return avx512::norm_row_kernels();
  if (cpu.avx2) return avx2::norm_row_kernels();
  return kScalarNormRowKernels;
}

void register_normalization_cpu_kernels(OpRegistry& registry) {
  add_kernel<NormKernel<true>>(registry, "", "LayerNormalization", float_dtypes());
  add_kernel<NormKernel<false>>(registry, "", "RMSNormalization", float_dtypes());
  for (const char* domain : {"", "com.microsoft"}) {
    add_kernel<NormKernel<false>>(registry, domain, "SimplifiedLayerNormalization", float_dtypes());
  }
  const std::vector<DType> skip_dtypes{DType::kF32, DType::kF16, DType::kBF16};
  add_kernel<SkipNormKernel<true>>(registry, "com.microsoft", "SkipLayerNormalization", skip_dtypes);
  add_kernel<SkipNormKernel<false>>(registry, "com.microsoft", "SkipSimplifiedLayerNormalization", skip_dtypes);
}

}  // namespace onnx_genai
