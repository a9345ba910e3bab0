// Inputs for onnx_genai SampleTokens tests (ops/schema/sampling.h), shared by the CPU kernel's test
// against the host Sampler (tests/ops/sampling_test.cc) and the CUDA kernel's test against the CPU
// kernel (tests/cuda/sampling_test.cc); needs only core, so it builds on the GPU machine too.
//
// A case is one batch of rows, each with its own logits, params and uniform. Rows mix what decides
// a draw's edges: ties (logits on a coarse grid, and -0 next to +0), -inf entries, rows of nothing
// but -inf, NaN and +inf, logits so large that a temperature below 1 overflows them, peaked and flat
// distributions; greedy rows; top_k of 1, a few, 50, V - 1, V and beyond; top_p from 0.05 to 1;
// min_p from 0 to 1; uniforms at 0 and just below 1; rows that ask for no token; invalid params.
// Positions before the last one (R > 1) hold NaN, which only a kernel reading them would see.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "onnx_genai/tensor.h"
#include "ops/schema/sampling_layout.h"

namespace onnx_genai::testing {

struct SampleTokensCase {
  std::string name;
  Tensor logits;    // [B, R, V]
  Tensor params;    // [B, kSampleParamCount] f32
  Tensor uniforms;  // [B] f64
  Tensor allowed;   // [M, W] int64 token bit sets (add_masks), or empty: no masks

  std::vector<Tensor> inputs() const {
    if (allowed.shape().rank() == 0) return {logits, params, uniforms};
    return {logits, params, uniforms, allowed};
  }
};

enum class RowKind { kNormal, kGrid, kSignedZeros, kHuge, kSparse, kPeaked, kFlat, kAllNegInf, kNaN, kPosInf };

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();
inline constexpr double kLastUniform = 1.0 - 0x1p-53;  // the largest double below 1

inline std::vector<float> make_logits(RowKind kind, int64_t vocab, std::mt19937& rng) {
  std::vector<float> row(static_cast<size_t>(vocab));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> grid(-12, 4);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (float& x : row) {
    switch (kind) {
      case RowKind::kGrid: x = 0.5f * static_cast<float>(grid(rng)); break;  // many equal logits
      case RowKind::kSignedZeros: x = unit(rng) < 0.5f ? (unit(rng) < 0.5f ? -0.0f : 0.0f) : -0.5f * static_cast<float>(rng() % 8); break;
      case RowKind::kHuge: x = (unit(rng) < 0.5f ? -1.0f : 1.0f) * 3e38f * unit(rng); break;
      case RowKind::kSparse: x = unit(rng) < 0.9f ? kNegInf : normal(rng); break;
      case RowKind::kPeaked: x = normal(rng) - 20.0f; break;
      case RowKind::kFlat: x = 0.01f * normal(rng); break;
      case RowKind::kAllNegInf: x = kNegInf; break;
      default: x = normal(rng); break;
    }
  }
  std::uniform_int_distribution<size_t> any(0, row.size() - 1);
  switch (kind) {
    case RowKind::kPeaked: row[any(rng)] = 5.0f; break;
    case RowKind::kNaN: row[any(rng)] = std::numeric_limits<float>::quiet_NaN(); break;
    case RowKind::kPosInf: row[any(rng)] = std::numeric_limits<float>::infinity(); break;
    case RowKind::kNormal:
      for (int i = 0; i < 3; ++i) row[any(rng)] = kNegInf;
      break;
    default: break;
  }
  return row;
}

// Params and uniform of one row: mostly valid draws over the ranges above, some greedy rows, some
// that ask for no token and some invalid.
struct RowDraw {
  std::array<float, kSampleParamCount> params{};
  double uniform = 0.0;
};

inline RowDraw make_draw(int64_t vocab, std::mt19937& rng) {
  const float temperatures[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.0f, 1.5f};
  const float top_ks[] = {0.0f, 0.0f, 1.0f, 5.0f, 50.0f, static_cast<float>(vocab - 1), static_cast<float>(vocab),
                          static_cast<float>(vocab + 10)};
  const float top_ps[] = {1.0f, 1.0f, 0.05f, 0.1f, 0.3f, 0.5f, 0.9f, 0.95f, 0.999f};
  const float min_ps[] = {0.0f, 0.0f, 0.0f, 0.01f, 0.1f, 0.5f, 1.0f};
  const auto pick = [&rng](const auto& options) { return options[rng() % std::size(options)]; };
  RowDraw d;
  d.params = {pick(temperatures), std::max(0.0f, pick(top_ks)), pick(top_ps), pick(min_ps)};
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const unsigned edge = rng() % 16;
  d.uniform = edge == 0 ? 0.0 : edge == 1 ? kLastUniform : edge == 2 ? -1.0 : unit(rng);
  if (rng() % 20 == 0) {  // invalid: each a check of SampleTokensParams' contract
    const unsigned which = rng() % 7;
    if (which == 0) d.params[kSampleTopK] = 2.5f;
    if (which == 1) d.params[kSampleTopP] = 0.0f;
    if (which == 2) d.params[kSampleTemperature] = -1.0f;
    if (which == 3) d.params[kSampleMinP] = 1.5f;
    if (which == 4) d.uniform = 1.0;
    if (which == 5) d.uniform = std::numeric_limits<double>::quiet_NaN();
    if (which == 6) d.params[kSampleTemperature] = std::numeric_limits<float>::infinity();
  }
  return d;
}

inline void set_float(Tensor& t, int64_t i, float v) {
  switch (t.dtype()) {
    case DType::kF16: t.data<Float16>()[i] = Float16(v); break;
    case DType::kBF16: t.data<BFloat16>()[i] = BFloat16(v); break;
    default: t.data<float>()[i] = v; break;
  }
}

inline float get_float(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF16: return static_cast<float>(t.data<Float16>()[i]);
    case DType::kBF16: return static_cast<float>(t.data<BFloat16>()[i]);
    default: return t.data<float>()[i];
  }
}

// A batch of `batch` rows of `vocab` logits of `dtype` at `positions` positions (only the last
// one is sampled; the others hold NaN), each row of a random kind, params and uniform.
inline SampleTokensCase make_case(std::string name, DType dtype, int64_t batch, int64_t positions, int64_t vocab,
                                  std::mt19937& rng) {
  const RowKind kinds[] = {RowKind::kNormal, RowKind::kNormal, RowKind::kGrid,   RowKind::kGrid,
                           RowKind::kSignedZeros, RowKind::kHuge, RowKind::kSparse, RowKind::kPeaked,
                           RowKind::kFlat,   RowKind::kAllNegInf, RowKind::kNaN,  RowKind::kPosInf};
  SampleTokensCase c;
  c.name = std::move(name);
  c.logits = Tensor::allocate(dtype, Shape{batch, positions, vocab}).value();
  c.params = Tensor::allocate(DType::kF32, Shape{batch, kSampleParamCount}).value();
  c.uniforms = Tensor::allocate(DType::kF64, Shape{batch}).value();
  for (int64_t b = 0; b < batch; ++b) {
    const RowKind kind = vocab >= 4096 && rng() % 4 != 0 ? RowKind::kNormal : kinds[rng() % std::size(kinds)];
    const std::vector<float> row = make_logits(kind, vocab, rng);
    for (int64_t r = 0; r < positions; ++r) {
      for (int64_t v = 0; v < vocab; ++v) {
        const float x = r + 1 == positions ? row[static_cast<size_t>(v)] : std::numeric_limits<float>::quiet_NaN();
        set_float(c.logits, (b * positions + r) * vocab + v, x);
      }
    }
    const RowDraw d = make_draw(vocab, rng);
    std::copy(d.params.begin(), d.params.end(), c.params.data<float>() + b * kSampleParamCount);
    c.uniforms.data<double>()[b] = d.uniform;
  }
  return c;
}

// Gives `c` three token masks, as structured output's would be: most tokens allowed, a handful,
// and half of the vocabulary's first half; in one case of three the masks' words stop halfway
// (tokens past them are not allowed). About three rows in four take one (mask slot m + 1).
inline void add_masks(SampleTokensCase& c, std::mt19937& rng) {
  const int64_t vocab = c.logits.shape()[2], batch = c.logits.shape()[0];
  const int64_t full = (vocab + 63) / 64;
  const int64_t words = full > 1 && rng() % 3 == 0 ? full / 2 : full;
  c.allowed = Tensor::allocate(DType::kI64, Shape{3, words}).value();
  auto* bits = reinterpret_cast<uint64_t*>(c.allowed.data<int64_t>());
  std::fill_n(bits, 3 * words, uint64_t{0});
  const auto allow = [&](int64_t mask, int64_t t) {
    if (t < words * 64) bits[mask * words + (t >> 6)] |= uint64_t{1} << (t & 63);
  };
  std::uniform_int_distribution<int64_t> any(0, vocab - 1);
  for (int64_t t = 0; t < vocab; ++t) {
    if (rng() % 10 != 0) allow(0, t);
    if (t < (vocab + 1) / 2 && rng() % 2 == 0) allow(2, t);
  }
  for (int k = 0; k < 5; ++k) allow(1, any(rng));
  for (int64_t b = 0; b < batch; ++b) c.params.data<float>()[b * kSampleParamCount + kSampleMaskSlot] = static_cast<float>(rng() % 4);
}

// Row b's sampled logits as floats (what the generator hands the Sampler).
inline std::vector<float> sampled_row(const Tensor& logits, int64_t b) {
  const int64_t positions = logits.shape()[1], vocab = logits.shape()[2];
  std::vector<float> row(static_cast<size_t>(vocab));
  for (int64_t v = 0; v < vocab; ++v) row[static_cast<size_t>(v)] = get_float(logits, ((b + 1) * positions - 1) * vocab + v);
  return row;
}

}  // namespace onnx_genai::testing
