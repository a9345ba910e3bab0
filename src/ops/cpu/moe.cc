// com.microsoft MoE and QMoE on the CPU (contract in ops/schema/moe.h, docs/moe.md).
//
// A run touches only the selected experts' weights, each once:
//   1. route   per token: the k experts and their weights (threads split tokens);
//   2. group   the T*k routed rows by expert (a counting sort), so expert e owns the entry range
//              [offset[e], offset[e + 1]), tokens ascending;
//   3. gather  x's routed rows in that order, f32 [T*k, hidden] (packed for the int kernels);
//   4. fc1     (and fc3) per expert over all its rows at once: tasks of (active expert, piece of
//              kMoEPieceRows output rows) split over the threads, each with its own scratch;
//   5. act     bias, activation / SwiGLU gating per routed row -> [T*k, inter];
//   6. fc2     as fc1, into the gathered rows' buffer (no longer needed);
//   7. combine per token, the k expert outputs (+ fc2 bias) times their weights, in rank order.
// Tasks never depend on the thread count, so neither does the result.
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/moe_experts.h"
#include "ops/op.h"
#include "ops/schema/moe.h"

namespace onnx_genai {

namespace {

using Params = MoEParams;
constexpr int64_t kAlignFloats = 16;  // workspace regions start on 64-byte boundaries
constexpr int64_t kRowGrain = 4;      // routed rows per parallel chunk in the row-wise passes

int64_t align_floats(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// ONNX Runtime's MoE activations (gelu is its tanh approximation).
float activate(Params::Activation act, float v) {
  switch (act) {
    case Params::Activation::kRelu: return std::max(v, 0.0f);
    case Params::Activation::kGelu: return 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
    case Params::Activation::kSilu: return v * sigmoid(v);
    default: return v;
  }
}

// Where each run-time buffer lives in the workspace, in floats (int32 arrays take float slots).
struct Layout {
  int64_t weights = 0, experts = 0, offsets = 0, order = 0, position = 0, active = 0;
  int64_t gathered = 0, packed = 0, terms = 0, y1 = 0, y3 = -1, hidden_act = 0, packed2 = 0, terms2 = 0, scratch = 0;
  int64_t scratch_floats = 0, total = 0;
};

// The routed rows grouped by expert.
struct Groups {
  const int32_t* offsets;  // [experts + 1]
  const int32_t* order;    // entry -> route index (token * k + rank)
  const int32_t* active;   // experts with rows, ascending
  int64_t num_active;
};

class MoEKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(p_, Params::make(ctx.node, ctx.inputs));
    for (int i = 0; i < Params::kProjections; ++i) {
      if (p_.fc[i].present) proj_[i] = ExpertProjection(p_, i, ctx.input(p_.fc[i].slots.weights).dtype);
    }
    threads_ = ctx.pool != nullptr ? ctx.pool->num_threads() : 1;
    plan_workspace();
    ctx.workspace_bytes = static_cast<size_t>(layout_.total) * sizeof(float);
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    return dispatch_dtype<float, Float16, BFloat16>(p_.dtype, [&]<typename T>() {
      if (p_.tokens > 0) run_typed<T>(ctx);
      return Status::ok();
    });
  }

 private:
  void plan_workspace() {
    const int64_t routed = p_.tokens * p_.k;
    int64_t offset = 0;
    const auto region = [&offset](int64_t floats) {
      const int64_t at = offset;
      offset += align_floats(floats);
      return at;
    };
    Layout& l = layout_;
    l.weights = region(routed), l.experts = region(routed), l.offsets = region(p_.experts + 1);
    l.order = region(routed), l.position = region(routed), l.active = region(p_.experts);
    l.gathered = region(routed * std::max(p_.hidden, p_.fc[1].n));  // reused for fc2's output
    l.packed = region(routed * proj_[0].packed_row_floats()), l.terms = region(routed * proj_[0].block_terms());
    l.y1 = region(routed * p_.fc[0].n);
    if (p_.fc[2].present) l.y3 = region(routed * p_.fc[2].n);
    l.hidden_act = region(routed * p_.inter);
    l.packed2 = region(routed * proj_[1].packed_row_floats()), l.terms2 = region(routed * proj_[1].block_terms());
    for (const ExpertProjection& proj : proj_) l.scratch_floats = std::max(l.scratch_floats, align_floats(proj.scratch_floats()));
    l.scratch = region(threads_ * l.scratch_floats);
    l.total = offset;
  }

  template <typename T>
  void run_typed(const KernelContext& ctx) const {
    float* ws = static_cast<float*>(ctx.workspace);
    const Layout& l = layout_;
    route<T>(ctx, ws + l.weights, reinterpret_cast<int32_t*>(ws + l.experts));
    const Groups groups = group(ws);
    gather<T>(ctx, groups, ws + l.gathered);
    const int64_t routed = p_.tokens * p_.k;
    if (proj_[0].quantized_int()) {
      parallel_for(ctx.pool, routed, kRowGrain, [&](int64_t r0, int64_t r1) {
        proj_[0].pack(ws + l.gathered + r0 * p_.hidden, r1 - r0, ws + l.packed + r0 * proj_[0].packed_row_floats(),
                      ws + l.terms + r0 * proj_[0].block_terms());
      });
    }
    project(ctx, 0, groups, ws + l.gathered, ws + l.packed, ws + l.terms, ws + l.y1);
    if (p_.fc[2].present) project(ctx, 2, groups, ws + l.gathered, ws + l.packed, ws + l.terms, ws + l.y3);
    activate_rows<T>(ctx, groups, ws);
    if (proj_[1].quantized_int()) {
      parallel_for(ctx.pool, routed, kRowGrain, [&](int64_t r0, int64_t r1) {
        proj_[1].pack(ws + l.hidden_act + r0 * p_.inter, r1 - r0, ws + l.packed2 + r0 * proj_[1].packed_row_floats(),
                      ws + l.terms2 + r0 * proj_[1].block_terms());
      });
    }
    project(ctx, 1, groups, ws + l.hidden_act, ws + l.packed2, ws + l.terms2, ws + l.gathered);
    combine<T>(ctx, ws);
  }

  // Per token: the k experts (ties to the higher index, as ONNX Runtime, except in the sparse
  // mixer) and their weights.
  template <typename T>
  void route(const KernelContext& ctx, float* weights, int32_t* experts) const {
    const T* logits = ctx.input(Params::kRouter).ptr<const T>();
    const T* given = p_.router_weights >= 0 ? ctx.input(p_.router_weights).ptr<const T>() : nullptr;
    const int64_t e_count = p_.experts, k = p_.k;
    parallel_for(ctx.pool, p_.tokens, 16, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const T* l = logits + t * e_count;
        int32_t* sel = experts + t * k;
        float* w = weights + t * k;
        if (p_.routing == Params::Routing::kSparseMixer) {
          sparse_mix(l, sel, w);
          continue;
        }
        for (int64_t j = 0; j < k; ++j) {
          int32_t best = -1;
          for (int32_t e = static_cast<int32_t>(e_count) - 1; e >= 0; --e) {
            if (std::find(sel, sel + j, e) != sel + j) continue;
            if (best < 0 || static_cast<float>(load(l[e])) > static_cast<float>(load(l[best]))) best = e;
          }
          sel[j] = best;
          w[j] = static_cast<float>(load(l[best]));
        }
        if (given != nullptr) {
          float sum = 0.0f;
          for (int64_t j = 0; j < k; ++j) sum += (w[j] = static_cast<float>(load(given[t * e_count + sel[j]])));
          for (int64_t j = 0; p_.normalize && j < k; ++j) w[j] /= sum;
        } else {
          weigh(l, w);
        }
      }
    });
  }

  // PhiMoE's sparse mixer (k = 2, formula in ops/schema/moe.h). Each pick's weight is its
  // softmax over the experts whose logits lie within a relative 2 * eps of its own: the pick
  // itself contributes exp(0) = 1, so the weight is 1 / sum. The second pass leaves the first
  // pick out. Ties go to the lower index (strict >), as Hugging Face's torch.max.
  template <typename T>
  void sparse_mix(const T* logits, int32_t* sel, float* w) const {
    const auto logit = [&](int64_t e) { return static_cast<float>(load(logits[e])); };
    for (int j = 0; j < 2; ++j) {
      const int64_t skip = j == 0 ? -1 : sel[0];
      int64_t best = -1;
      for (int64_t e = 0; e < p_.experts; ++e) {
        if (e != skip && (best < 0 || logit(e) > logit(best))) best = e;
      }
      const float top = logit(best);
      float sum = 0.0f;
      for (int64_t e = 0; e < p_.experts; ++e) {
        const float v = logit(e);
        if (e == skip || top - v > 2.0f * Params::kSparseMixerEps * std::max(std::abs(v), top)) continue;
        sum += std::exp(v - top);
      }
      sel[j] = static_cast<int32_t>(best);
      w[j] = 1.0f / sum;
    }
  }

  // `w` holds the k selected logits, largest first; turns them into routing weights.
  template <typename T>
  void weigh(const T* logits, float* w) const {
    if (p_.routing == Params::Routing::kTopKSoftmax) {
      const float top = w[0];
      float sum = 0.0f;
      for (int64_t j = 0; j < p_.k; ++j) sum += (w[j] = std::exp(w[j] - top));
      for (int64_t j = 0; j < p_.k; ++j) w[j] /= sum;
      return;
    }
    // Softmax over every expert, then the selected probabilities (renormalised on request).
    const float top = w[0];
    float sum = 0.0f;
    for (int64_t e = 0; e < p_.experts; ++e) sum += std::exp(static_cast<float>(load(logits[e])) - top);
    float selected = 0.0f;
    for (int64_t j = 0; j < p_.k; ++j) selected += (w[j] = std::exp(w[j] - top) / sum);
    if (p_.normalize) {
      for (int64_t j = 0; j < p_.k; ++j) w[j] /= selected;
    }
  }

  // Counting sort of the routed rows by expert; entries of an expert keep token order.
  Groups group(float* ws) const {
    const Layout& l = layout_;
    const auto* experts = reinterpret_cast<const int32_t*>(ws + l.experts);
    auto* offsets = reinterpret_cast<int32_t*>(ws + l.offsets);
    auto* order = reinterpret_cast<int32_t*>(ws + l.order);
    auto* position = reinterpret_cast<int32_t*>(ws + l.position);
    auto* active = reinterpret_cast<int32_t*>(ws + l.active);
    const int64_t routed = p_.tokens * p_.k;
    std::fill(offsets, offsets + p_.experts + 1, 0);
    for (int64_t r = 0; r < routed; ++r) ++offsets[experts[r] + 1];
    int64_t num_active = 0;
    for (int64_t e = 0; e < p_.experts; ++e) {
      if (offsets[e + 1] > 0) active[num_active++] = static_cast<int32_t>(e);
      offsets[e + 1] += offsets[e];
    }
    for (int64_t r = 0; r < routed; ++r) {
      const int32_t at = offsets[experts[r]]++;
      order[at] = static_cast<int32_t>(r), position[r] = at;
    }
    for (int64_t e = p_.experts; e > 0; --e) offsets[e] = offsets[e - 1];  // back to range starts
    offsets[0] = 0;
    return Groups{offsets, order, active, num_active};
  }

  template <typename T>
  void gather(const KernelContext& ctx, const Groups& g, float* out) const {
    const T* x = ctx.input(Params::kInput).ptr<const T>();
    const int64_t h = p_.hidden;
    parallel_for(ctx.pool, p_.tokens * p_.k, kRowGrain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* src = x + g.order[r] / p_.k * h;
        for (int64_t i = 0; i < h; ++i) out[r * h + i] = static_cast<float>(load(src[i]));
      }
    });
  }

  // Projection i for every active expert over its rows: y [entries, n].
  void project(const KernelContext& ctx, int i, const Groups& g, const float* a, const float* packed, const float* terms,
               float* y) const {
    const ExpertProjection& proj = proj_[i];
    const Params::Slots& s = p_.fc[i].slots;
    ExpertProjection::Inputs in{.weights = ctx.input(s.weights).data};
    if (s.scales >= 0) in.scales = ctx.input(s.scales).data;
    if (p_.fc[i].has_zero_points) in.zero_points = ctx.input(s.zero_points).ptr<const uint8_t>();
    if (s.global_scale >= 0 && ctx.has_input(s.global_scale)) in.global_scales = ctx.input(s.global_scale).ptr<const float>();
    const int64_t n = proj.n(), pieces = (n + kMoEPieceRows - 1) / kMoEPieceRows, tasks = g.num_active * pieces;
    const int64_t slots = std::min<int64_t>(threads_, tasks);
    const int64_t prf = proj.packed_row_floats(), bt = proj.block_terms();
    parallel_for(ctx.pool, slots, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t slot = s0; slot < s1; ++slot) {
        float* scratch = static_cast<float*>(ctx.workspace) + layout_.scratch + slot * layout_.scratch_floats;
        for (int64_t t = tasks * slot / slots; t < tasks * (slot + 1) / slots; ++t) {
          const int64_t e = g.active[t / pieces], n0 = t % pieces * kMoEPieceRows, n1 = std::min(n, n0 + kMoEPieceRows);
          const int64_t first = g.offsets[e], m = g.offsets[e + 1] - first;
          proj.multiply(in, e, n0, n1, a + first * proj.k(), packed + first * prf, terms + first * bt, m, scratch,
                        y + first * n + n0, n);
        }
      }
    });
  }

  // hidden_act [entries, inter] from fc1's (and fc3's) outputs: biases, then the activation.
  template <typename T>
  void activate_rows(const KernelContext& ctx, const Groups& g, float* ws) const {
    const Layout& l = layout_;
    const auto* experts = reinterpret_cast<const int32_t*>(ws + l.experts);
    const T* b1 = p_.fc[0].has_bias ? ctx.input(p_.fc[0].slots.bias).ptr<const T>() : nullptr;
    const T* b3 = p_.fc[2].has_bias ? ctx.input(p_.fc[2].slots.bias).ptr<const T>() : nullptr;
    const int64_t inter = p_.inter, n1 = p_.fc[0].n;
    parallel_for(ctx.pool, p_.tokens * p_.k, kRowGrain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t e = experts[g.order[r]];
        float* y1 = ws + l.y1 + r * n1;
        if (b1 != nullptr) {
          for (int64_t j = 0; j < n1; ++j) y1[j] += static_cast<float>(load(b1[e * n1 + j]));
        }
        float* y3 = l.y3 >= 0 ? ws + l.y3 + r * inter : nullptr;
        if (y3 != nullptr && b3 != nullptr) {
          for (int64_t j = 0; j < inter; ++j) y3[j] += static_cast<float>(load(b3[e * inter + j]));
        }
        gate(y1, y3, ws + l.hidden_act + r * inter);
      }
    });
  }

  // One routed row: out[j] = act(fc1[j]) (times fc3[j] when given), or SwiGLU of its halves.
  void gate(const float* y1, const float* y3, float* out) const {
    const int64_t inter = p_.inter;
    if (p_.activation != Params::Activation::kSwiGLU) {
      for (int64_t j = 0; j < inter; ++j) out[j] = activate(p_.activation, y1[j]) * (y3 != nullptr ? y3[j] : 1.0f);
      return;
    }
    for (int64_t j = 0; j < inter; ++j) {
      float g = 0.0f, lin = 0.0f;
      switch (p_.swiglu_fusion) {
        case 1: g = y1[2 * j], lin = y1[2 * j + 1]; break;
        case 2: g = y1[j], lin = y1[inter + j]; break;
        default: g = y1[j], lin = y3[j]; break;
      }
      g = std::min(g, p_.limit);
      lin = std::clamp(lin, -p_.limit, p_.limit);
      out[j] = g * sigmoid(p_.alpha * g) * (lin + p_.beta);
    }
  }

  // y[t] = sum over ranks j of weight * (fc2 output + fc2 bias).
  template <typename T>
  void combine(const KernelContext& ctx, const float* ws) const {
    const Layout& l = layout_;
    const auto* experts = reinterpret_cast<const int32_t*>(ws + l.experts);
    const auto* position = reinterpret_cast<const int32_t*>(ws + l.position);
    const T* b2 = p_.fc[1].has_bias ? ctx.input(p_.fc[1].slots.bias).ptr<const T>() : nullptr;
    T* out = ctx.output(0).ptr<T>();
    const int64_t h = p_.hidden, k = p_.k;
    parallel_for(ctx.pool, p_.tokens, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        for (int64_t i = 0; i < h; ++i) {
          float acc = 0.0f;
          for (int64_t j = 0; j < k; ++j) {
            const int64_t r = t * k + j;
            const float bias = b2 != nullptr ? static_cast<float>(load(b2[experts[r] * h + i])) : 0.0f;
            acc += ws[l.weights + r] * (ws[l.gathered + position[r] * h + i] + bias);
          }
          out[t * h + i] = store<T>(acc);
        }
      }
    });
  }

  Params p_;
  ExpertProjection proj_[Params::kProjections];
  int threads_ = 1;
  Layout layout_;
};

}  // namespace

void register_moe_cpu_kernels(OpRegistry& registry) {
  for (const char* op : {"MoE", "QMoE"}) {
    registry.add_kernel(KernelDef{.domain = "com.microsoft", .op_type = op, .device = DeviceType::kCpu,
                                  .dtypes = {DType::kF32, DType::kF16, DType::kBF16}, .type_input = Params::kInput,
                                  .since_version = 1,
                                  .create = [](const Node&) { return std::make_unique<MoEKernel>(); }});
  }
}

}  // namespace onnx_genai
