// cuda_bench's MoE cases (cuda_common.h): one QMoE layer of Qwen3-30B-A3B (hidden 2048, expert
// inter 768, 128 experts, top-8, SwiGLU interleaved in fc1; int4 and int8 codes in blocks of 32
// with f16 scales) and of gpt-oss-20b (hidden 2880, inter 2880, 32 experts, top-4, MXFP4 with
// e8m0 scales, fc1 / fc2 biases, clamped SwiGLU), f16 activations, at 1, 8, 64 and 512 tokens,
// through the op's whole launch sequence (moe_kernels.h: route, fc1, fc2, combine).
//
// Each replay of the timed CUDA graph runs the layer kCopies times, each on its own copy of the
// experts' weights and its own random router logits, so the copies together are several times the
// L2 and every launch streams its experts from DRAM. Bytes counted: the codes, scales and biases of
// the experts the logits choose (computed here from the same logits), read once per launch: the
// roofline a decode step reaches when every chosen expert's weights move once.
#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "cuda_common.h"
#include "ops/cuda/moe_kernels.h"
#include "onnx_genai/dtype.h"

namespace onnx_genai {
namespace {

constexpr int kCopies = 4;

struct MoEShape {
  const char* model;
  cuda::MoEWeights weights;
  int64_t hidden, inter, experts, k;
  bool gpt_oss;  // biases, alpha 1.702, beta 1, limit 7

  int bits() const { return weights == cuda::MoEWeights::kInt8 ? 8 : 4; }
  const char* format() const {
    return weights == cuda::MoEWeights::kMxfp4 ? "mxfp4" : weights == cuda::MoEWeights::kInt8 ? "int8 b32" : "int4 b32";
  }
  // Bytes of one expert's codes, scales (f16 per 32, or e8m0 per 32) and biases (f16).
  int64_t projection_bytes(int64_t n, int64_t k) const {
    const int64_t scale_bytes = weights == cuda::MoEWeights::kMxfp4 ? 1 : 2;
    return n * k * bits() / 8 + n * (k / 32) * scale_bytes + (gpt_oss ? 2 * n : 0);
  }
  int64_t expert_bytes() const { return projection_bytes(2 * inter, hidden) + projection_bytes(hidden, inter); }
};

constexpr MoEShape kShapes[] = {
    {"qwen3-30b-a3b", cuda::MoEWeights::kInt4, 2048, 768, 128, 8, false},
    {"qwen3-30b-a3b", cuda::MoEWeights::kInt8, 2048, 768, 128, 8, false},
    {"gpt-oss-20b", cuda::MoEWeights::kMxfp4, 2880, 2880, 32, 4, true},
};

// One projection of every expert, kCopies times.
struct ProjectionCopies {
  std::vector<cuda::DeviceBuffer> codes, scales, bias, global;
};

ProjectionCopies make_copies(const MoEShape& s, int64_t n, int64_t k, cudaStream_t stream) {
  const auto e = static_cast<size_t>(s.experts);
  const size_t codes = e * static_cast<size_t>(n * k * s.bits() / 8), blocks = e * static_cast<size_t>(n * (k / 32));
  const bool mxfp4 = s.weights == cuda::MoEWeights::kMxfp4;
  ProjectionCopies c;
  for (int i = 0; i < kCopies; ++i) {
    // The values do not change the time: constant bytes, chosen to be finite and small (f16 0x2020
    // is 8e-3; e8m0 122 is 2^-5; f32 0x3F3F3F3F is 0.75).
    c.codes.push_back(value_or_exit(cuda::DeviceBuffer::allocate(codes)));
    BENCH_CHECK(cuda::fill_bytes(c.codes.back().data(), 0x5A, codes, stream));
    const size_t scale_bytes = blocks * (mxfp4 ? 1 : 2);
    c.scales.push_back(value_or_exit(cuda::DeviceBuffer::allocate(scale_bytes)));
    BENCH_CHECK(cuda::fill_bytes(c.scales.back().data(), mxfp4 ? 122 : 0x20, scale_bytes, stream));
    if (s.gpt_oss) {
      c.bias.push_back(value_or_exit(cuda::DeviceBuffer::allocate(e * static_cast<size_t>(n) * 2)));
      BENCH_CHECK(cuda::fill_bytes(c.bias.back().data(), 0, e * static_cast<size_t>(n) * 2, stream));
    }
    if (mxfp4) {
      c.global.push_back(value_or_exit(cuda::DeviceBuffer::allocate(e * sizeof(float))));
      BENCH_CHECK(cuda::fill_bytes(c.global.back().data(), 0x3F, e * sizeof(float), stream));
    }
  }
  return c;
}

cuda::MoEProjection projection(const ProjectionCopies& c, int i, int64_t n, int64_t k) {
  cuda::MoEProjection p;
  p.n = n, p.k = k, p.block_size = 32, p.blocks = k / 32;
  p.weights = c.codes[static_cast<size_t>(i)].data();
  p.scales = c.scales[static_cast<size_t>(i)].data();
  if (!c.bias.empty()) p.bias = c.bias[static_cast<size_t>(i)].data();
  if (!c.global.empty()) p.global_scales = static_cast<const float*>(c.global[static_cast<size_t>(i)].data());
  return p;
}

// How many distinct experts the top-k of each token's logits choose.
int64_t chosen_experts(const std::vector<uint16_t>& logits, int64_t tokens, int64_t experts, int64_t k) {
  std::set<int64_t> chosen;
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    const auto logit = [&](int64_t e) { return Float16::to_float(logits[static_cast<size_t>(t * experts + e)]); };
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int64_t a, int64_t b) { return logit(a) > logit(b) || (logit(a) == logit(b) && a > b); });
    chosen.insert(order.begin(), order.begin() + k);
  }
  return static_cast<int64_t>(chosen.size());
}

// One layer at one token count, its kernels launched as dependents or one after another.
void bench_layer(const MoEShape& s, int64_t tokens, bool dependent, const ProjectionCopies& fc1, const ProjectionCopies& fc2,
                 cudaStream_t stream, std::mt19937& rng, std::vector<MoERow>& rows) {
  cuda::MoEArgs a;
  a.dependent_launch = dependent;
  a.dtype = DType::kF16;
  a.scale_dtype = DType::kF16;
  a.weights = s.weights;
  a.routing = cuda::MoERouting::kTopKSoftmax;
  a.activation = cuda::MoEActivation::kSwiGLU;
  a.swiglu_fusion = 1;
  a.alpha = s.gpt_oss ? 1.702f : 1.0f, a.beta = s.gpt_oss ? 1.0f : 0.0f;
  a.limit = s.gpt_oss ? 7.0f : INFINITY;
  a.tokens = tokens, a.hidden = s.hidden, a.inter = s.inter, a.experts = s.experts, a.k = s.k;
  a.fc1 = projection(fc1, 0, 2 * s.inter, s.hidden);
  a.fc2 = projection(fc2, 0, s.hidden, s.inter);
  MoERow row{std::string(s.model) + " " + s.format() + (dependent ? "" : ", serial launches"), tokens};
  if (Status ok = cuda::check_moe(a); !ok.is_ok()) {
    row.error = ok.message();
    rows.push_back(row);
    return;
  }
  const size_t x_count = static_cast<size_t>(tokens * s.hidden);
  cuda::DeviceBuffer x = value_or_exit(cuda::DeviceBuffer::allocate(x_count * 2));
  cuda::DeviceBuffer y = value_or_exit(cuda::DeviceBuffer::allocate(x_count * 2));
  cuda::DeviceBuffer workspace = value_or_exit(cuda::DeviceBuffer::allocate(cuda::moe_workspace(a).total));
  BENCH_CHECK(cuda::copy_to_device(x.data(), random_f16(x_count, rng, -1.0f, 1.0f).data(), x_count * 2, stream));
  std::vector<cuda::DeviceBuffer> logits;
  double experts_read = 0;
  for (int i = 0; i < kCopies; ++i) {
    const std::vector<uint16_t> host = random_f16(static_cast<size_t>(tokens * s.experts), rng, -3.0f, 3.0f);
    logits.push_back(value_or_exit(cuda::DeviceBuffer::allocate(host.size() * 2)));
    BENCH_CHECK(cuda::copy_to_device(logits.back().data(), host.data(), host.size() * 2, stream));
    experts_read += static_cast<double>(chosen_experts(host, tokens, s.experts, s.k)) / kCopies;
  }
  a.x = x.data(), a.y = y.data(), a.workspace = workspace.data();
  const Result<double> ms = replay_ms(stream, [&]() -> Status {
    for (int i = 0; i < kCopies; ++i) {
      cuda::MoEArgs copy = a;
      copy.fc1 = projection(fc1, i, 2 * s.inter, s.hidden);
      copy.fc2 = projection(fc2, i, s.hidden, s.inter);
      copy.router = logits[static_cast<size_t>(i)].data();
      OG_RETURN_IF_ERROR(cuda::launch_moe(copy, stream));
    }
    return Status::ok();
  });
  if (ms.is_ok()) {
    row.us = *ms * 1e3 / kCopies;
    row.experts_read = experts_read;
    row.active_bytes = experts_read * static_cast<double>(s.expert_bytes());
  } else {
    row.error = ms.status().message();
    std::fprintf(stderr, "cuda_bench: %s T%lld: %s\n", row.name.c_str(), static_cast<long long>(tokens), row.error.c_str());
  }
  rows.push_back(row);
}

void bench_shape(const MoEShape& s, const std::vector<int64_t>& token_counts, cudaStream_t stream, std::mt19937& rng,
                 std::vector<MoERow>& rows) {
  const ProjectionCopies fc1 = make_copies(s, 2 * s.inter, s.hidden, stream);
  const ProjectionCopies fc2 = make_copies(s, s.hidden, s.inter, stream);
  for (int64_t tokens : token_counts) {
    for (bool dependent : {true, false}) bench_layer(s, tokens, dependent, fc1, fc2, stream, rng, rows);
  }
}

}  // namespace

void bench_moe(const std::string& only, cudaStream_t stream, std::mt19937& rng, std::vector<MoERow>& rows) {
  for (const MoEShape& s : kShapes) {
    const std::string name = std::string("moe ") + s.model + " " + s.format();
    if (name.find(only) != std::string::npos) bench_shape(s, {1, 8, 64, 512}, stream, rng, rows);
  }
}

void print_moe(const std::vector<MoERow>& rows, double copy_bw) {
  if (rows.empty()) return;
  std::printf("\n### MoE layer (QMoE, f16 activations; route + fc1 + fc2 + combine, one CUDA graph)\n\n");
  std::printf("| layer | tokens | us | experts read | their bytes (MB) | GB/s | of copy bandwidth |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const MoERow& r : rows) {
    if (!r.error.empty()) {
      std::printf("| %s | %lld | error: %s | | | | |\n", r.name.c_str(), static_cast<long long>(r.tokens), r.error.c_str());
      continue;
    }
    const double gbs = r.active_bytes / (r.us * 1e-6) / 1e9;
    std::printf("| %s | %lld | %.1f | %.1f | %.1f | %.0f | %.0f%% |\n", r.name.c_str(), static_cast<long long>(r.tokens), r.us,
                r.experts_read, r.active_bytes / 1e6, gbs, 100.0 * gbs * 1e9 / copy_bw);
  }
}

}  // namespace onnx_genai
