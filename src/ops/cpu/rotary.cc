// RotaryEmbedding on the CPU, both forms (layouts in ops/schema/rotary.h). Each (batch, token,
// head) vector is rotated by rotate_head (ops/cpu/rotary_rows.h) with the cache row of its token;
// the vectors are split across threads. Positions are checked against the cache before any
// work, so a bad position is an error naming the node, never an out-of-bounds read.
#include <algorithm>

#include "core/thread_pool.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/rotary_rows.h"
#include "ops/op.h"
#include "ops/schema/rotary.h"

namespace onnx_genai {

namespace {

constexpr int64_t kMinChunkElems = int64_t{1} << 14;

class RotaryKernel final : public OpKernel {
 public:
  Status prepare(PrepareContext& ctx) override {
    OG_ASSIGN_OR_RETURN(params_, RotaryParams::make(ctx.node, ctx.inputs));
    name_ = ctx.node.describe();
    dtype_ = ctx.input(params_.x_input).dtype;
    return Status::ok();
  }

  Status run(const KernelContext& ctx) const override {
    const RotaryParams& p = params_;
    const int64_t tokens = p.batch * p.seq;
    if (tokens * p.heads * p.head_size == 0) return Status::ok();
    const int64_t* positions =
        p.positions == RotaryParams::Positions::kGathered ? nullptr : ctx.input(p.position_input).ptr<const int64_t>();
    OG_RETURN_IF_ERROR(check_positions(positions));
    return dispatch_dtype<float, Float16, BFloat16>(dtype_, [&]<typename T>() {
      const T* x = ctx.input(p.x_input).ptr<const T>();
      const T* cos = ctx.input(p.cos_input).ptr<const T>();
      const T* sin = ctx.input(p.sin_input).ptr<const T>();
      T* y = ctx.output(0).ptr<T>();
      const int64_t half = p.rotary_dim / 2;
      parallel_for(ctx.pool, tokens * p.heads, std::max<int64_t>(1, kMinChunkElems / p.head_size), [&](int64_t begin, int64_t end) {
        for (int64_t u = begin; u < end; ++u) {
          const int64_t token = u / p.heads, head = u % p.heads;  // token = b * S + s
          const int64_t offset = p.heads_first ? ((token / p.seq * p.heads + head) * p.seq + token % p.seq) * p.head_size
                                               : u * p.head_size;
          const int64_t row = cache_row(positions, token);
          rotate_head(x + offset, y + offset, cos + row * half, sin + row * half, p.rotary_dim, p.head_size, p.interleaved);
        }
      });
      return Status::ok();
    });
  }

 private:
  int64_t cache_row(const int64_t* positions, int64_t token) const {
    switch (params_.positions) {
      case RotaryParams::Positions::kGathered: return token;
      case RotaryParams::Positions::kBase: return positions[0] + token % params_.seq;
      case RotaryParams::Positions::kPerToken: return positions[token];
    }
    return token;
  }

  Status check_positions(const int64_t* positions) const {
    const RotaryParams& p = params_;
    if (p.positions == RotaryParams::Positions::kBase) {
      if (positions[0] < 0 || positions[0] > p.cache_rows - p.seq) {
        return OG_ERROR(name_, ": position_ids base ", positions[0], " with ", p.seq,
                        " tokens leaves the cos/sin cache of ", p.cache_rows, " rows");
      }
    } else if (p.positions == RotaryParams::Positions::kPerToken) {
      for (int64_t i = 0; i < p.batch * p.seq; ++i) {
        if (positions[i] < 0 || positions[i] >= p.cache_rows) {
          return OG_ERROR(name_, ": position_ids value ", positions[i], " at index ", i, " is outside the cos/sin cache of ",
                          p.cache_rows, " rows");
        }
      }
    }
    return Status::ok();
  }

  RotaryParams params_;
  std::string name_;
  DType dtype_ = DType::kF32;
};

}  // namespace

void register_rotary_cpu_kernels(OpRegistry& registry) {
  for (const auto& [domain, since] : {std::pair<const char*, int>{"", 23}, {"com.microsoft", 1}}) {
    registry.add_kernel(KernelDef{.domain = domain, .op_type = "RotaryEmbedding", .device = DeviceType::kCpu,
                                  .dtypes = {DType::kF32, DType::kF16, DType::kBF16}, .type_input = 0,
                                  .since_version = since,
                                  .create = [](const Node&) { return std::make_unique<RotaryKernel>(); }});
  }
}

}  // namespace onnx_genai
