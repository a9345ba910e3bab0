// GroupQueryAttention test cases: random inputs, the op call, and an independent double-precision
// reference written from ONNX Runtime 1.30's CPU semantics (pinned against ORT itself by
// tests/runtime/attention_ort_test.cc):
//   - total_b = seqlens_k[b] + 1; the first prompt (S == total_sequence_length) ignores the past
//     and uses positions 0..S-1; later steps keep past rows [0, total_b - S) and use positions
//     total_b - S + s.
//   - present = kept past rows, then the S new rows (padding rows of a ragged prompt included),
//     then zeros; with key/value of length 0 (shared KV) present keeps total_b past rows.
//   - query row s sees keys [lo, hi): hi = min(offset_b + s + 1, total_b) (total_b when not
//     causal), lo = hi - window when the window is shorter.
//   - score = scale * q.k, then softcap * tanh(score / softcap), then + attention_bias; softmax
//     with e^0 (smooth_softmax) or e^sink[h] added to the denominator.
//   - rotated q and k are rounded to the storage type before use.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace onnx_genai::testing {

struct GqaCase {
  int64_t batch = 1, seq = 1, heads = 4, kv_heads = 2, head = 16;
  int64_t past = -1;  // past buffer length; -1 omits past_key / past_value
  std::vector<int32_t> seqlens;
  int64_t total = 0;
  int64_t rotary_rows = 0, rotary_dim = 0;  // rotary_dim > 0 turns do_rotary on
  bool interleaved = false;
  bool packed = false;
  bool shared_kv = false;  // key / value of sequence length 0
  bool causal = true;
  int64_t window = -1;
  float softcap = 0.0f, scale = 0.0f;
  bool smooth = false, sink = false;
  int64_t bias_batch = 0, bias_heads = 0;  // attention_bias dims 0 and 1; 0 omits it
  bool position_ids = false;
  bool omit_present = false;

  int64_t kv_len() const { return shared_kv ? 0 : seq; }
  int64_t present_len() const { return std::max(total, past); }
  bool first_prompt() const { return seq == total; }
  int64_t q_row() const { return (packed ? heads + 2 * kv_heads : heads) * head; }
};

// Inputs as floats already rounded to the storage type, so the reference reads what the kernel reads.
struct GqaData {
  std::vector<float> q, k, v, past_k, past_v, cos, sin, bias, sink;
  std::vector<int64_t> position_ids;
};

template <typename T>
float round_to(float x) {
  return static_cast<float>(T(x));
}

template <typename T>
GqaData make_gqa_data(const GqaCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const auto fill = [&](size_t n, float spread) {
    std::vector<float> v(n);
    for (float& x : v) x = round_to<T>(spread * unit(rng));
    return v;
  };
  const auto n = [](int64_t x) { return static_cast<size_t>(x); };
  GqaData d;
  d.q = fill(n(c.batch * c.seq * c.q_row()), 1.5f);
  if (!c.packed) {
    d.k = fill(n(c.batch * c.kv_len() * c.kv_heads * c.head), 1.5f);
    d.v = fill(n(c.batch * c.kv_len() * c.kv_heads * c.head), 1.0f);
  }
  if (c.past >= 0) {
    d.past_k = fill(n(c.batch * c.kv_heads * c.past * c.head), 1.5f);
    d.past_v = fill(n(c.batch * c.kv_heads * c.past * c.head), 1.0f);
  }
  if (c.rotary_dim > 0) {
    std::uniform_real_distribution<float> angle(0.0f, 6.3f);
    for (int64_t i = 0; i < c.rotary_rows * c.rotary_dim / 2; ++i) {
      const float a = angle(rng);
      d.cos.push_back(round_to<T>(std::cos(a)));
      d.sin.push_back(round_to<T>(std::sin(a)));
    }
  }
  if (c.bias_batch > 0) d.bias = fill(n(c.bias_batch * c.bias_heads * c.seq * c.total), 2.0f);
  if (c.sink) d.sink = fill(n(c.heads), 2.0f);
  if (c.position_ids) {
    for (int64_t b = 0; b < c.batch; ++b) {
      for (int64_t s = 0; s < c.seq; ++s) d.position_ids.push_back((b * 5 + s * 3 + 1) % std::max<int64_t>(c.rotary_rows, 1));
    }
  }
  return d;
}

struct GqaResult {
  std::vector<double> out, present_k, present_v;
};

// `round` maps a rotated value to what the storage type holds.
inline GqaResult gqa_reference(const GqaCase& c, const GqaData& x, const std::function<double(double)>& round) {
  const int64_t d = c.head, len = c.present_len(), group = c.heads / c.kv_heads;
  GqaResult r;
  r.out.assign(static_cast<size_t>(c.batch * c.seq * c.heads * d), 0.0);
  r.present_k.assign(static_cast<size_t>(c.batch * c.kv_heads * len * d), 0.0);
  r.present_v = r.present_k;
  const auto at = [](const std::vector<float>& v, int64_t i) { return static_cast<double>(v[static_cast<size_t>(i)]); };
  // Element i of new head `slot` (query heads first, then K heads, then V heads) of token (b, s).
  const auto fresh = [&](int64_t slot, int64_t b, int64_t s, int64_t i) {
    if (c.packed) return at(x.q, (b * c.seq + s) * c.q_row() + slot * d + i);
    if (slot < c.heads) return at(x.q, (b * c.seq + s) * c.heads * d + slot * d + i);
    const std::vector<float>& src = slot < c.heads + c.kv_heads ? x.k : x.v;
    const int64_t g = (slot - c.heads) % c.kv_heads;
    return at(src, (b * c.kv_len() + s) * c.kv_heads * d + g * d + i);
  };
  const auto rotated = [&](int64_t slot, int64_t b, int64_t s, int64_t pos) {
    std::vector<double> h(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i) h[static_cast<size_t>(i)] = fresh(slot, b, s, i);
    if (c.rotary_dim == 0) return h;
    const int64_t half = c.rotary_dim / 2;
    std::vector<double> out = h;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t ia = c.interleaved ? 2 * i : i, ib = c.interleaved ? 2 * i + 1 : i + half;
      const double cs = at(x.cos, pos * half + i), sn = at(x.sin, pos * half + i);
      out[static_cast<size_t>(ia)] = round(h[static_cast<size_t>(ia)] * cs - h[static_cast<size_t>(ib)] * sn);
      out[static_cast<size_t>(ib)] = round(h[static_cast<size_t>(ib)] * cs + h[static_cast<size_t>(ia)] * sn);
    }
    return out;
  };
  const double scale = c.scale != 0.0f ? c.scale : 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t total = c.seqlens[static_cast<size_t>(b)] + 1;
    const int64_t offset = c.first_prompt() ? 0 : total - c.seq;
    const int64_t keep = c.shared_kv ? total : offset;
    const auto position = [&](int64_t s) {
      if (c.position_ids) return c.first_prompt() ? x.position_ids[0] + s : x.position_ids[static_cast<size_t>(b * c.seq + s)];
      return offset + s;
    };
    for (int64_t g = 0; g < c.kv_heads; ++g) {
      const int64_t base = (b * c.kv_heads + g) * len * d;
      for (int64_t i = 0; i < keep * d; ++i) {
        r.present_k[static_cast<size_t>(base + i)] = at(x.past_k, (b * c.kv_heads + g) * c.past * d + i);
        r.present_v[static_cast<size_t>(base + i)] = at(x.past_v, (b * c.kv_heads + g) * c.past * d + i);
      }
      for (int64_t s = 0; s < c.kv_len(); ++s) {
        const std::vector<double> k = rotated(c.heads + g, b, s, position(s));
        for (int64_t i = 0; i < d; ++i) {
          r.present_k[static_cast<size_t>(base + (offset + s) * d + i)] = k[static_cast<size_t>(i)];
          r.present_v[static_cast<size_t>(base + (offset + s) * d + i)] = fresh(c.heads + c.kv_heads + g, b, s, i);
        }
      }
    }
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t base = (b * c.kv_heads + h / group) * len * d;
      for (int64_t s = 0; s < c.seq; ++s) {
        const std::vector<double> q = rotated(h, b, s, position(s));
        const int64_t hi = c.causal ? std::min(offset + s + 1, total) : total;
        const int64_t lo = c.window >= 0 && hi > c.window ? hi - c.window : 0;
        std::vector<double> score;
        for (int64_t j = lo; j < hi; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += q[static_cast<size_t>(i)] * r.present_k[static_cast<size_t>(base + j * d + i)];
          double sc = scale * dot;
          if (c.softcap > 0) sc = c.softcap * std::tanh(sc / c.softcap);
          if (c.bias_batch > 0) {
            const int64_t bb = c.bias_batch == 1 ? 0 : b, bh = c.bias_heads == 1 ? 0 : h;
            sc += at(x.bias, ((bb * c.bias_heads + bh) * c.seq + s) * c.total + j);
          }
          score.push_back(sc);
        }
        const double sink = c.sink ? at(x.sink, h) : 0.0;
        double top = score.empty() ? sink : *std::max_element(score.begin(), score.end());
        if (c.smooth || c.sink) top = std::max(top, sink);
        double denom = c.smooth || c.sink ? std::exp(sink - top) : 0.0;
        for (double& e : score) denom += (e = std::exp(e - top));
        for (int64_t j = lo; j < hi; ++j) {
          const double p = score[static_cast<size_t>(j - lo)] / denom;
          for (int64_t i = 0; i < d; ++i) {
            r.out[static_cast<size_t>(((b * c.seq + s) * c.heads + h) * d + i)] += p * r.present_v[static_cast<size_t>(base + j * d + i)];
          }
        }
      }
    }
  }
  return r;
}

// The op's attributes and inputs for `c` (storage type T).
template <typename T>
std::vector<Tensor> gqa_inputs(const GqaCase& c, const GqaData& x, OpCall& call) {
  call.attr_int("num_heads", c.heads).attr_int("kv_num_heads", c.kv_heads);
  if (c.rotary_dim > 0) call.attr_int("do_rotary", 1).attr_int("rotary_interleaved", c.interleaved ? 1 : 0);
  if (c.window >= 0) call.attr_int("local_window_size", c.window);
  if (c.softcap > 0) call.attr_float("softcap", c.softcap);
  if (c.scale != 0) call.attr_float("scale", c.scale);
  if (c.smooth) call.attr_int("smooth_softmax", 1);
  if (!c.causal) call.attr_int("causal", 0);
  std::vector<Tensor> in(12);
  in[0] = cast_tensor<T>(Shape{c.batch, c.seq, c.q_row()}, x.q);
  if (!c.packed) {
    in[1] = cast_tensor<T>(Shape{c.batch, c.kv_len(), c.kv_heads * c.head}, x.k);
    in[2] = cast_tensor<T>(Shape{c.batch, c.kv_len(), c.kv_heads * c.head}, x.v);
  }
  if (c.past >= 0) {
    in[3] = cast_tensor<T>(Shape{c.batch, c.kv_heads, c.past, c.head}, x.past_k);
    in[4] = cast_tensor<T>(Shape{c.batch, c.kv_heads, c.past, c.head}, x.past_v);
  }
  in[5] = Tensor::from_vector<int32_t>(Shape{c.batch}, c.seqlens);
  in[6] = Tensor::from_vector<int32_t>(Shape{}, std::vector<int32_t>{static_cast<int32_t>(c.total)});
  if (c.rotary_dim > 0) {
    in[7] = cast_tensor<T>(Shape{c.rotary_rows, c.rotary_dim / 2}, x.cos);
    in[8] = cast_tensor<T>(Shape{c.rotary_rows, c.rotary_dim / 2}, x.sin);
  }
  if (c.position_ids) in[9] = Tensor::from_vector<int64_t>(Shape{c.batch, c.seq}, x.position_ids);
  if (c.bias_batch > 0) in[10] = cast_tensor<T>(Shape{c.bias_batch, c.bias_heads, c.seq, c.total}, x.bias);
  if (c.sink) in[11] = cast_tensor<T>(Shape{c.heads}, x.sink);
  while (!in.back().defined()) in.pop_back();
  return in;
}

inline OpCall gqa_call(bool omit_present = false) {
  OpCall call("GroupQueryAttention", 1, "com.microsoft", 3);
  if (omit_present) call.node().outputs.resize(1);
  return call;
}

}  // namespace onnx_genai::testing
