// com.microsoft MultiHeadAttention and the ONNX Attention (opset 23/24) against double-precision
// references written from ONNX Runtime 1.30's CPU behaviour (checked against ORT while writing
// these; see ops/schema/attention.h):
//   MHA: score = scale * q.k + attention_bias + mask_filter_value on padding keys; unidirectional
//        (S > 1) drops keys j > P + s for every row but the last; biases add to q, k and v.
//   Attention: score = softcap(scale * q.k) + attn_mask (bool false = -inf); is_causal keeps
//        j <= P + s (nonpad_kv_seqlen n[b] - S without a past); keys j >= n[b] are dropped; a row
//        with every key dropped gives 0; qk_matmul_output shows keys removed by a bool mask or the
//        causal rule as the lowest finite value.
// Tolerance |got - want| <= tol * (1 + |want|): 2e-5 f32, 4e-3 f16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "ops/attention_test_util.h"

namespace onnx_genai::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Values rounded to T, so the references read what the kernels read.
template <typename T>
std::vector<float> random_values(size_t n, uint32_t seed, float spread = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-spread, spread);
  std::vector<float> v(n);
  for (float& x : v) x = round_to<T>(unit(rng));
  return v;
}

// Softmax-weighted sum of value rows; every score -inf gives 0 (ORT's Attention does).
std::vector<double> attend(const std::vector<double>& scores, const std::vector<std::vector<double>>& values) {
  std::vector<double> out(values.empty() ? 0 : values[0].size(), 0.0);
  const double top = scores.empty() ? -kInf : *std::max_element(scores.begin(), scores.end());
  if (top == -kInf) return out;
  double sum = 0;
  for (double s : scores) sum += std::exp(s - top);
  for (size_t j = 0; j < scores.size(); ++j) {
    const double p = std::exp(scores[j] - top) / sum;
    for (size_t i = 0; i < out.size(); ++i) out[i] += p * values[j][i];
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, float tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      ASSERT_EQ(got[i], want[i]) << what << " at " << i;  // masked scores of qk_matmul_output mode 2
    } else {
      ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " at " << i;
    }
  }
}

// ---- MultiHeadAttention ----------------------------------------------------------------------

struct MhaCase {
  int64_t batch = 2, seq = 3, kv = 3, heads = 2, head = 8, v_head = 8, past = 0;
  bool per_head_kv = false, bias = false, unidirectional = false, attention_bias = false;
  int mask = 0;  // 0 none, 1 key lengths [B], 2 [B, T], 3 [B, S, T], 4 key lengths [3B+2]
  float mask_filter_value = -10000.0f, scale = 0.0f;
  int64_t total() const { return past + kv; }
};

struct MhaData {
  std::vector<float> q, k, v, bias, past_k, past_v, attention_bias;
  std::vector<int32_t> mask;
};

template <typename T>
MhaData mha_data(const MhaCase& c, uint32_t seed) {
  const auto n = [](int64_t x) { return static_cast<size_t>(x); };
  MhaData d;
  d.q = random_values<T>(n(c.batch * c.seq * c.heads * c.head), seed);
  d.k = random_values<T>(n(c.batch * c.kv * c.heads * c.head), seed + 1);
  d.v = random_values<T>(n(c.batch * c.kv * c.heads * c.v_head), seed + 2);
  if (c.bias) d.bias = random_values<T>(n(c.heads * (2 * c.head + c.v_head)), seed + 3);
  d.past_k = random_values<T>(n(c.batch * c.heads * c.past * c.head), seed + 4);
  d.past_v = random_values<T>(n(c.batch * c.heads * c.past * c.v_head), seed + 5);
  if (c.attention_bias) d.attention_bias = random_values<T>(n(c.heads * c.seq * c.total()), seed + 6, 2.0f);
  std::mt19937 rng(seed + 7);
  if (c.mask == 1 || c.mask == 4) {
    for (int64_t b = 0; b < (c.mask == 1 ? c.batch : 3 * c.batch + 2); ++b) d.mask.push_back(static_cast<int32_t>(rng() % (c.total() + 2)) - 1);
  } else if (c.mask >= 2) {
    const int64_t rows = c.mask == 3 ? c.seq : 1;
    for (int64_t i = 0; i < c.batch * rows * c.total(); ++i) d.mask.push_back(rng() % 4 == 0 ? 0 : 1);
  }
  return d;
}

// Key / value row j of head (b, h) in present order: past rows, then new rows (+ bias, rounded
// by `round` to the storage type).
std::vector<double> mha_row(const MhaCase& c, const MhaData& x, bool value, int64_t b, int64_t h, int64_t j,
                            double (*round)(double)) {
  const int64_t d = value ? c.v_head : c.head;
  const std::vector<float>& past = value ? x.past_v : x.past_k;
  const std::vector<float>& fresh = value ? x.v : x.k;
  std::vector<double> row(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) {
    double e;
    if (j < c.past) {
      e = past[static_cast<size_t>(((b * c.heads + h) * c.past + j) * d + i)];
    } else {
      const int64_t s = j - c.past;
      e = c.per_head_kv ? fresh[static_cast<size_t>(((b * c.heads + h) * c.kv + s) * d + i)]
                        : fresh[static_cast<size_t>((b * c.kv + s) * c.heads * d + h * d + i)];
      if (c.bias) e = round(e + x.bias[static_cast<size_t>((value ? 2 * c.heads * c.head : c.heads * c.head) + h * d + i)]);
    }
    row[static_cast<size_t>(i)] = e;
  }
  return row;
}

std::vector<double> mha_reference(const MhaCase& c, const MhaData& x, double (*round)(double)) {
  const int64_t t = c.total();
  std::vector<double> out;
  const double scale = c.scale != 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.head));
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t s = 0; s < c.seq; ++s) {
      for (int64_t h = 0; h < c.heads; ++h) {
        std::vector<double> scores;
        std::vector<std::vector<double>> values;
        for (int64_t j = 0; j < t; ++j) {
          if (c.unidirectional && c.seq > 1 && s < c.seq - 1 && j > c.past + s) continue;
          const std::vector<double> k = mha_row(c, x, false, b, h, j, round);
          double dot = 0;
          for (int64_t i = 0; i < c.head; ++i) {
            double q = x.q[static_cast<size_t>((b * c.seq + s) * c.heads * c.head + h * c.head + i)];
            if (c.bias) q = round(q + x.bias[static_cast<size_t>(h * c.head + i)]);
            dot += q * k[static_cast<size_t>(i)];
          }
          double score = scale * dot;
          if (c.attention_bias) score += x.attention_bias[static_cast<size_t>((h * c.seq + s) * t + j)];
          bool padding = false;
          if (c.mask == 1 || c.mask == 4) padding = j >= x.mask[static_cast<size_t>(b)];
          if (c.mask == 2) padding = x.mask[static_cast<size_t>(b * t + j)] == 0;
          if (c.mask == 3) padding = x.mask[static_cast<size_t>((b * c.seq + s) * t + j)] == 0;
          if (padding) score += c.mask_filter_value;
          scores.push_back(score);
          values.push_back(mha_row(c, x, true, b, h, j, round));
        }
        for (double e : attend(scores, values)) out.push_back(e);
      }
    }
  }
  return out;
}

template <typename T>
double round_double(double v) {
  return round_to<T>(static_cast<float>(v));
}

template <typename T>
void check_mha(const MhaCase& c, uint32_t seed, ThreadPool* pool = nullptr) {
  SCOPED_TRACE("MHA seed " + std::to_string(seed));
  const MhaData x = mha_data<T>(c, seed);
  OpCall call("MultiHeadAttention", 1, "com.microsoft", 3);
  call.attr_int("num_heads", c.heads);
  if (c.unidirectional) call.attr_int("unidirectional", 1);
  if (c.mask_filter_value != -10000.0f) call.attr_float("mask_filter_value", c.mask_filter_value);
  if (c.scale != 0) call.attr_float("scale", c.scale);
  std::vector<Tensor> in(8);
  in[0] = cast_tensor<T>(Shape{c.batch, c.seq, c.heads * c.head}, x.q);
  in[1] = cast_tensor<T>(c.per_head_kv ? Shape{c.batch, c.heads, c.kv, c.head} : Shape{c.batch, c.kv, c.heads * c.head}, x.k);
  in[2] = cast_tensor<T>(c.per_head_kv ? Shape{c.batch, c.heads, c.kv, c.v_head} : Shape{c.batch, c.kv, c.heads * c.v_head}, x.v);
  if (c.bias) in[3] = cast_tensor<T>(Shape{c.heads * (2 * c.head + c.v_head)}, x.bias);
  const Shape mask_shapes[] = {Shape{}, Shape{c.batch}, Shape{c.batch, c.total()}, Shape{c.batch, c.seq, c.total()},
                               Shape{3 * c.batch + 2}};
  if (c.mask > 0) in[4] = Tensor::from_vector<int32_t>(mask_shapes[c.mask], x.mask);
  if (c.attention_bias) in[5] = cast_tensor<T>(Shape{1, c.heads, c.seq, c.total()}, x.attention_bias);
  if (c.past > 0) {
    in[6] = cast_tensor<T>(Shape{c.batch, c.heads, c.past, c.head}, x.past_k);
    in[7] = cast_tensor<T>(Shape{c.batch, c.heads, c.past, c.v_head}, x.past_v);
  }
  while (!in.back().defined()) in.pop_back();
  auto out = call.run(in, pool);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  const float tol = std::is_same_v<T, float> ? 2e-5f : 4e-3f;
  expect_close(to_floats<T>((*out)[0]), mha_reference(c, x, round_double<T>), tol, "output");
  std::vector<double> present_k, present_v;
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t j = 0; j < c.total(); ++j) {
        for (double e : mha_row(c, x, false, b, h, j, round_double<T>)) present_k.push_back(e);
        for (double e : mha_row(c, x, true, b, h, j, round_double<T>)) present_v.push_back(e);
      }
    }
  }
  expect_close(to_floats<T>((*out)[1]), present_k, tol, "present_key");
  expect_close(to_floats<T>((*out)[2]), present_v, tol, "present_value");
}

TEST(MultiHeadAttention, SelfCrossBiasAndVHeadSize) {
  check_mha<float>(MhaCase{}, 1);
  check_mha<float>(MhaCase{.kv = 5, .v_head = 6, .bias = true}, 2);
  check_mha<float>(MhaCase{.seq = 1, .kv = 1, .heads = 4, .head = 64, .v_head = 64, .past = 9}, 3);
  check_mha<float>(MhaCase{.kv = 4, .per_head_kv = true}, 4);
  check_mha<float>(MhaCase{.scale = 0.3f}, 5);
  check_mha<Float16>(MhaCase{.kv = 5, .past = 2, .bias = true}, 6);
}

TEST(MultiHeadAttention, PaddingMasksAreAdditive) {
  for (int mask = 1; mask <= 4; ++mask) {
    check_mha<float>(MhaCase{.kv = 4, .past = mask == 3 ? 0 : 2, .mask = mask, .mask_filter_value = -3.0f}, 10 + mask);
  }
  check_mha<float>(MhaCase{.kv = 4, .attention_bias = true, .mask = 2}, 15);
}

TEST(MultiHeadAttention, UnidirectionalSparesTheLastRow) {
  check_mha<float>(MhaCase{.seq = 4, .kv = 4, .unidirectional = true}, 20);
  check_mha<float>(MhaCase{.seq = 4, .kv = 4, .past = 3, .unidirectional = true, .mask = 2, .mask_filter_value = -2.0f}, 21);
  check_mha<float>(MhaCase{.seq = 3, .kv = 6, .past = 2, .unidirectional = true}, 22);  // more keys than queries
  check_mha<float>(MhaCase{.seq = 1, .kv = 1, .past = 5, .unidirectional = true}, 23);
  ThreadPool pool(3);
  check_mha<float>(MhaCase{.batch = 1, .seq = 40, .kv = 40, .heads = 3, .head = 32, .v_head = 32, .unidirectional = true}, 24, &pool);
}

TEST(MultiHeadAttention, BadInputsNameTheNode) {
  const auto expect_error = [](OpCall& call, std::vector<Tensor> in, const std::string& needle) {
    auto out = call.run(in);
    ASSERT_FALSE(out.is_ok()) << needle;
    EXPECT_NE(out.status().message().find("test_MultiHeadAttention"), std::string::npos) << out.status().message();
    EXPECT_NE(out.status().message().find(needle), std::string::npos) << out.status().message();
  };
  const auto zeros = [](Shape s) { return cast_tensor<float>(s, std::vector<float>(static_cast<size_t>(s.numel()), 0.0f)); };
  OpCall call("MultiHeadAttention", 1, "com.microsoft", 3);
  call.attr_int("num_heads", 3);
  expect_error(call, {zeros({1, 2, 16}), zeros({1, 2, 16}), zeros({1, 2, 16})}, "query hidden size 16 is not a positive multiple of num_heads 3");
  call.attr_int("num_heads", 2);
  expect_error(call, {zeros({1, 2, 16})}, "key and value are required (packed QKV in query is not supported)");
  expect_error(call, {zeros({1, 2, 16}), zeros({1, 3, 16}), zeros({1, 2, 16})}, "key [1,3,16] / value [1,2,16] must be");
  expect_error(call, {zeros({1, 2, 16}), zeros({1, 2, 16}), zeros({1, 2, 16}), zeros({40})}, "bias must be float32 [48]");
  expect_error(call, {zeros({1, 2, 16}), zeros({1, 2, 16}), zeros({1, 2, 16}), Tensor(),
                      Tensor::from_vector<int32_t>(Shape{1, 3}, {1, 1, 1})},
               "key_padding_mask shape [1,3] must be");
  expect_error(call, {zeros({1, 2, 16}), zeros({1, 2, 16}), zeros({1, 2, 16}), Tensor(), Tensor(), Tensor(), zeros({1, 2, 4, 8}), zeros({1, 2, 5, 8})},
               "past_key [1,2,4,8] / past_value [1,2,5,8] must be");
}

// ---- ONNX Attention --------------------------------------------------------------------------

struct AttnCase {
  int64_t batch = 2, q_heads = 4, kv_heads = 2, seq = 3, kv = 3, head = 8, v_head = 8, past = 0;
  bool four_d = false, causal = false;
  float scale = 0.0f, softcap = 0.0f;
  int mask = 0;  // 0 none, 1 bool [S, T], 2 float [B, 1, S, T], 3 float [Nq, 1, T] (rows broadcast)
  bool nonpad = false;
  int qk_mode = -1;
  int64_t total() const { return past + kv; }
};

struct AttnData {
  std::vector<float> q, k, v, past_k, past_v, mask;
  std::vector<int64_t> nonpad;
};

template <typename T>
AttnData attn_data(const AttnCase& c, uint32_t seed) {
  const auto n = [](int64_t x) { return static_cast<size_t>(x); };
  AttnData d;
  d.q = random_values<T>(n(c.batch * c.q_heads * c.seq * c.head), seed);
  d.k = random_values<T>(n(c.batch * c.kv_heads * c.kv * c.head), seed + 1);
  d.v = random_values<T>(n(c.batch * c.kv_heads * c.kv * c.v_head), seed + 2);
  d.past_k = random_values<T>(n(c.batch * c.kv_heads * c.past * c.head), seed + 3);
  d.past_v = random_values<T>(n(c.batch * c.kv_heads * c.past * c.v_head), seed + 4);
  std::mt19937 rng(seed + 5);
  const int64_t mask_elems[] = {0, c.seq * c.total(), c.batch * c.seq * c.total(), c.q_heads * c.total()};
  for (int64_t i = 0; i < mask_elems[c.mask]; ++i) {
    d.mask.push_back(c.mask == 1 ? static_cast<float>(rng() % 3 != 0) : -2.0f * static_cast<float>(rng() % 100) / 100.0f);
  }
  for (int64_t b = 0; b < c.batch; ++b) d.nonpad.push_back(static_cast<int64_t>(rng() % (c.total() + 1)));
  return d;
}

double attn_elem(const AttnCase& c, const std::vector<float>& v, int64_t heads, int64_t len, int64_t d, int64_t b, int64_t h,
                 int64_t s, int64_t i) {
  return c.four_d ? v[static_cast<size_t>(((b * heads + h) * len + s) * d + i)]
                  : v[static_cast<size_t>(((b * len + s) * heads + h) * d + i)];
}

// Key or value element of kv head g, present row j.
double attn_kv(const AttnCase& c, const AttnData& x, bool value, int64_t b, int64_t g, int64_t j, int64_t i) {
  const int64_t d = value ? c.v_head : c.head;
  if (j < c.past) return (value ? x.past_v : x.past_k)[static_cast<size_t>(((b * c.kv_heads + g) * c.past + j) * d + i)];
  return attn_elem(c, value ? x.v : x.k, c.kv_heads, c.kv, d, b, g, j - c.past, i);
}

// Scores of (b, h, s) at the qk mode's stage (mode 3: softmax), and Y.
void attn_reference(const AttnCase& c, const AttnData& x, std::vector<double>& y, std::vector<double>& qk) {
  const int64_t t = c.total(), group = c.q_heads / c.kv_heads;
  const double scale = c.scale != 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.head));
  y.assign(static_cast<size_t>(c.batch * c.q_heads * c.seq * c.v_head), 0.0);
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.q_heads; ++h) {
      for (int64_t s = 0; s < c.seq; ++s) {
        std::vector<double> raw, capped, masked, shown;
        std::vector<std::vector<double>> values;
        for (int64_t j = 0; j < t; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < c.head; ++i) dot += attn_elem(c, x.q, c.q_heads, c.seq, c.head, b, h, s, i) * attn_kv(c, x, false, b, h / group, j, i);
          raw.push_back(scale * dot);
          capped.push_back(c.softcap > 0 ? c.softcap * std::tanh(raw.back() / c.softcap) : raw.back());
          // ORT's qk output shows the lowest finite value where a bool mask or the causal rule
          // removes a key; a float mask's -inf would stay -inf.
          const double removed = std::numeric_limits<float>::lowest();
          double m = capped.back();
          bool dropped = false;
          if (c.mask == 1) dropped = x.mask[static_cast<size_t>(s * t + j)] == 0;
          if (c.mask == 2) m += x.mask[static_cast<size_t>((b * c.seq + s) * t + j)];
          if (c.mask == 3) m += x.mask[static_cast<size_t>(h * t + j)];
          const int64_t valid = c.nonpad ? x.nonpad[static_cast<size_t>(b)] : t;
          const int64_t offset = c.past > 0 || !c.nonpad ? c.past : valid - c.seq;
          if (j >= valid || (c.causal && j > offset + s)) dropped = true;
          masked.push_back(dropped ? -kInf : m);
          shown.push_back(dropped ? removed : m);
          std::vector<double> v;
          for (int64_t i = 0; i < c.v_head; ++i) v.push_back(attn_kv(c, x, true, b, h / group, j, i));
          values.push_back(v);
        }
        const std::vector<double> out = attend(masked, values);
        for (int64_t i = 0; i < c.v_head; ++i) {
          const int64_t at = c.four_d ? ((b * c.q_heads + h) * c.seq + s) * c.v_head + i : ((b * c.seq + s) * c.q_heads + h) * c.v_head + i;
          y[static_cast<size_t>(at)] = out[static_cast<size_t>(i)];
        }
        std::vector<double> row = c.qk_mode == 0 ? raw : c.qk_mode == 1 ? capped : shown;
        if (c.qk_mode == 3) {
          std::vector<std::vector<double>> unit(static_cast<size_t>(t), std::vector<double>(static_cast<size_t>(t), 0.0));
          for (int64_t j = 0; j < t; ++j) unit[static_cast<size_t>(j)][static_cast<size_t>(j)] = 1.0;
          row = attend(masked, unit);
        }
        qk.insert(qk.end(), row.begin(), row.end());
      }
    }
  }
}

template <typename T>
void check_attention(const AttnCase& c, uint32_t seed, ThreadPool* pool = nullptr) {
  SCOPED_TRACE("Attention seed " + std::to_string(seed));
  const AttnData x = attn_data<T>(c, seed);
  OpCall call("Attention", c.nonpad ? 24 : 23, "", c.qk_mode >= 0 ? 4 : 3);
  if (!c.four_d) call.attr_int("q_num_heads", c.q_heads).attr_int("kv_num_heads", c.kv_heads);
  if (c.causal) call.attr_int("is_causal", 1);
  if (c.scale != 0) call.attr_float("scale", c.scale);
  if (c.softcap != 0) call.attr_float("softcap", c.softcap);
  if (c.qk_mode >= 0) call.attr_int("qk_matmul_output_mode", c.qk_mode);
  const auto shape = [&](int64_t heads, int64_t len, int64_t d) {
    return c.four_d ? Shape{c.batch, heads, len, d} : Shape{c.batch, len, heads * d};
  };
  std::vector<Tensor> in(7);
  in[0] = cast_tensor<T>(shape(c.q_heads, c.seq, c.head), x.q);
  in[1] = cast_tensor<T>(shape(c.kv_heads, c.kv, c.head), x.k);
  in[2] = cast_tensor<T>(shape(c.kv_heads, c.kv, c.v_head), x.v);
  if (c.mask == 1) {
    std::vector<uint8_t> bits;
    for (float m : x.mask) bits.push_back(m != 0);
    auto t = Tensor::allocate(DType::kBool, Shape{c.seq, c.total()});
    std::copy(bits.begin(), bits.end(), static_cast<uint8_t*>(t->raw()));
    in[3] = std::move(*t);
  }
  if (c.mask == 2) in[3] = cast_tensor<T>(Shape{c.batch, 1, c.seq, c.total()}, x.mask);
  if (c.mask == 3) in[3] = cast_tensor<T>(Shape{c.q_heads, 1, c.total()}, x.mask);
  if (c.past > 0) {
    in[4] = cast_tensor<T>(Shape{c.batch, c.kv_heads, c.past, c.head}, x.past_k);
    in[5] = cast_tensor<T>(Shape{c.batch, c.kv_heads, c.past, c.v_head}, x.past_v);
  }
  if (c.nonpad) in[6] = Tensor::from_vector<int64_t>(Shape{c.batch}, x.nonpad);
  while (!in.back().defined()) in.pop_back();
  auto out = call.run(in, pool);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  std::vector<double> y, qk;
  attn_reference(c, x, y, qk);
  const float tol = std::is_same_v<T, float> ? 2e-5f : 4e-3f;
  expect_close(to_floats<T>((*out)[0]), y, tol, "Y");
  if (c.qk_mode >= 0) expect_close(to_floats<T>((*out)[3]), qk, tol, "qk_matmul_output");
}

TEST(OnnxAttention, ThreeAndFourDimensionalGroupedHeads) {
  check_attention<float>(AttnCase{}, 30);
  check_attention<float>(AttnCase{.four_d = true}, 31);
  check_attention<float>(AttnCase{.q_heads = 6, .kv_heads = 1, .kv = 5, .v_head = 6}, 32);
  check_attention<Float16>(AttnCase{.past = 4, .four_d = true}, 33);
  check_attention<float>(AttnCase{.seq = 1, .kv = 1, .head = 64, .v_head = 64, .past = 700}, 34);
}

TEST(OnnxAttention, CausalMasksAndSoftcap) {
  check_attention<float>(AttnCase{.past = 2, .causal = true}, 40);
  check_attention<float>(AttnCase{.seq = 2, .kv = 5, .causal = true}, 41);  // cross: diagonal at row 0
  check_attention<float>(AttnCase{.past = 1, .mask = 1}, 42);
  check_attention<float>(AttnCase{.causal = true, .softcap = 0.5f, .mask = 2}, 43);
  check_attention<float>(AttnCase{.past = 2, .scale = 0.4f, .mask = 3}, 44);
  check_attention<float>(AttnCase{.seq = 4, .kv = 4, .causal = true, .nonpad = true}, 45);  // rows with no key give 0
  check_attention<float>(AttnCase{.past = 3, .causal = true, .nonpad = true}, 46);
}

TEST(OnnxAttention, QkMatmulOutputModes) {
  for (int mode = 0; mode <= 3; ++mode) {
    check_attention<float>(AttnCase{.past = 2, .causal = true, .softcap = 0.7f, .mask = 2, .qk_mode = mode}, 50 + mode);
  }
  ThreadPool pool(2);
  check_attention<float>(AttnCase{.four_d = true, .mask = 1, .qk_mode = 3}, 55, &pool);
}

TEST(OnnxAttention, BadInputsNameTheNode) {
  const auto zeros = [](Shape s) { return cast_tensor<float>(s, std::vector<float>(static_cast<size_t>(s.numel()), 0.0f)); };
  const auto expect_error = [](OpCall& call, std::vector<Tensor> in, const std::string& needle) {
    auto out = call.run(in);
    ASSERT_FALSE(out.is_ok()) << needle;
    EXPECT_NE(out.status().message().find("test_Attention"), std::string::npos) << out.status().message();
    EXPECT_NE(out.status().message().find(needle), std::string::npos) << out.status().message();
  };
  OpCall call("Attention", 23, "", 3);
  expect_error(call, {zeros({1, 2, 16}), zeros({1, 2, 16}), zeros({1, 2, 16})}, "3-D inputs need positive q_num_heads and kv_num_heads");
  call.attr_int("q_num_heads", 3).attr_int("kv_num_heads", 2);
  expect_error(call, {zeros({1, 2, 24}), zeros({1, 2, 16}), zeros({1, 2, 16})}, "q_num_heads 3 must be a positive multiple of kv_num_heads 2");
  OpCall four("Attention", 23, "", 3);
  expect_error(four, {zeros({1, 2, 3, 8}), zeros({1, 2, 4, 8}), zeros({1, 2, 4, 8}), zeros({3, 5})},
               "attn_mask shape [3,5] does not broadcast to [batch=1, q_num_heads=2, q_sequence=3, total_sequence=4]");
  expect_error(four, {zeros({1, 2, 3, 8}), zeros({1, 2, 4, 8}), zeros({1, 2, 4, 6}), Tensor(), zeros({1, 2, 1, 8})},
               "past_key and past_value must be both present or both absent");
  OpCall qk("Attention", 23, "", 4);
  qk.attr_int("qk_matmul_output_mode", 5);
  expect_error(qk, {zeros({1, 2, 3, 8}), zeros({1, 2, 4, 8}), zeros({1, 2, 4, 8})}, "qk_matmul_output_mode must be 0, 1, 2 or 3, got 5");
}

}  // namespace
}  // namespace onnx_genai::testing
