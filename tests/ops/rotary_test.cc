// RotaryEmbedding, ONNX opset 23 and com.microsoft: against a double-precision rotation written
// out here (rotate-half or interleaved pairs, partial rotary, 3-D and 4-D X, every form of
// position_ids), in f16 / bf16, across threads, against ONNX Runtime, and with bad inputs
// (positions outside the cache are run-time errors).
#include <gtest/gtest.h>

#include <random>

#include "ops/contrib_test_util.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

struct Geometry {
  int64_t batch, seq, heads, head_size, rotary_dim;
  bool heads_first;  // X is [B, N, S, H] rather than [B, S, N * H]
  bool interleaved;
  Shape x_shape() const {
    return heads_first ? Shape{batch, heads, seq, head_size} : Shape{batch, seq, heads * head_size};
  }
  int64_t numel() const { return batch * seq * heads * head_size; }
};

// Rotates every head of x with cache row rows[b * S + s]; caches are [rows, rotary_dim / 2].
std::vector<double> reference(const Geometry& g, const std::vector<float>& x, const std::vector<float>& cos,
                              const std::vector<float>& sin, const std::vector<int64_t>& rows) {
  std::vector<double> y(x.begin(), x.end());
  const int64_t half = g.rotary_dim / 2;
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t s = 0; s < g.seq; ++s) {
      const int64_t row = rows[static_cast<size_t>(b * g.seq + s)];
      for (int64_t n = 0; n < g.heads; ++n) {
        const int64_t base = g.heads_first ? ((b * g.heads + n) * g.seq + s) * g.head_size
                                           : ((b * g.seq + s) * g.heads + n) * g.head_size;
        for (int64_t i = 0; i < half; ++i) {
          const size_t ia = static_cast<size_t>(base + (g.interleaved ? 2 * i : i));
          const size_t ib = static_cast<size_t>(base + (g.interleaved ? 2 * i + 1 : i + half));
          const double c = cos[static_cast<size_t>(row * half + i)], sn = sin[static_cast<size_t>(row * half + i)];
          y[ia] = x[ia] * c - x[ib] * sn;
          y[ib] = x[ib] * c + x[ia] * sn;
        }
      }
    }
  }
  return y;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
}

// Random X, caches of `cache_rows` rows and per-token positions below `cache_rows`.
struct Data {
  std::vector<float> x, cos, sin;
  std::vector<int64_t> positions;
};
Data random_data(const Geometry& g, int64_t cache_rows, uint32_t seed) {
  Data d{random_floats(g.numel(), seed), random_floats(cache_rows * g.rotary_dim / 2, seed + 1),
         random_floats(cache_rows * g.rotary_dim / 2, seed + 2), {}};
  std::mt19937 gen(seed + 3);
  for (int64_t i = 0; i < g.batch * g.seq; ++i) d.positions.push_back(static_cast<int64_t>(gen() % cache_rows));
  return d;
}

OpCall onnx_call(const Geometry& g, bool num_heads_attr = true) {
  OpCall call("RotaryEmbedding", 23);
  call.attr_int("interleaved", g.interleaved ? 1 : 0);
  if (g.rotary_dim != g.head_size) call.attr_int("rotary_embedding_dim", g.rotary_dim);
  if (num_heads_attr) call.attr_int("num_heads", g.heads);
  return call;
}

OpCall contrib_call(const Geometry& g, bool num_heads_attr = true) {
  OpCall call("RotaryEmbedding", 1, "com.microsoft");
  call.attr_int("interleaved", g.interleaved ? 1 : 0);
  if (g.rotary_dim != g.head_size) call.attr_int("rotary_embedding_dim", g.rotary_dim);
  if (num_heads_attr) call.attr_int("num_heads", g.heads);
  return call;
}

Tensor positions_tensor(const Geometry& g, const std::vector<int64_t>& p) { return Tensor::from_vector<int64_t>({g.batch, g.seq}, p); }

TEST(RotaryEmbedding, OnnxEveryLayoutWithPositionIds) {
  for (bool heads_first : {false, true}) {
    for (bool interleaved : {false, true}) {
      for (int64_t rotary_dim : {int64_t{16}, int64_t{6}}) {
        const Geometry g{2, 3, 4, 16, rotary_dim, heads_first, interleaved};
        SCOPED_TRACE(::testing::Message() << "heads_first " << heads_first << " interleaved " << interleaved << " rotary " << rotary_dim);
        const Data d = random_data(g, 11, 1);
        const Shape cache{11, rotary_dim / 2};
        auto out = onnx_call(g).run({f32(g.x_shape(), d.x), f32(cache, d.cos), f32(cache, d.sin), positions_tensor(g, d.positions)});
        ASSERT_TRUE(out) << out.status().message();
        expect_close(values_of<float>((*out)[0]), reference(g, d.x, d.cos, d.sin, d.positions), 1e-6);
      }
    }
  }
}

TEST(RotaryEmbedding, OnnxWithoutPositionIdsUsesPerTokenCaches) {
  const Geometry g{2, 5, 3, 8, 8, true, false};
  const Data d = random_data(g, g.batch * g.seq, 2);
  std::vector<int64_t> rows(static_cast<size_t>(g.batch * g.seq));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  const Shape cache{g.batch, g.seq, 4};
  auto out = onnx_call(g, false).run({f32(g.x_shape(), d.x), f32(cache, d.cos), f32(cache, d.sin)});
  ASSERT_TRUE(out) << out.status().message();
  expect_close(values_of<float>((*out)[0]), reference(g, d.x, d.cos, d.sin, rows), 1e-6);
}

TEST(RotaryEmbedding, ContribPositionFormsAndHeadInference) {
  const Geometry g{2, 4, 3, 8, 8, false, true};
  const Data d = random_data(g, 20, 3);
  const Shape cache{20, 4};
  // One position value: token s of every batch row sits at base + s.
  for (const Tensor& base : {Tensor::scalar_i64(7), Tensor::from_vector<int64_t>({1}, {7})}) {
    auto out = contrib_call(g).run({f32(g.x_shape(), d.x), base, f32(cache, d.cos), f32(cache, d.sin)});
    ASSERT_TRUE(out) << out.status().message();
    expect_close(values_of<float>((*out)[0]), reference(g, d.x, d.cos, d.sin, {7, 8, 9, 10, 7, 8, 9, 10}), 1e-6);
  }
  // Per-token positions; without num_heads the head size is twice the cache width.
  auto out = contrib_call(g, false).run({f32(g.x_shape(), d.x), positions_tensor(g, d.positions), f32(cache, d.cos), f32(cache, d.sin)});
  ASSERT_TRUE(out) << out.status().message();
  expect_close(values_of<float>((*out)[0]), reference(g, d.x, d.cos, d.sin, d.positions), 1e-6);
  // 4-D X gives the heads itself.
  const Geometry g4{2, 4, 3, 8, 4, true, false};
  const Data d4 = random_data(g4, 20, 4);
  auto out4 = contrib_call(g4).run({f32(g4.x_shape(), d4.x), positions_tensor(g4, d4.positions), f32({20, 2}, d4.cos), f32({20, 2}, d4.sin)});
  ASSERT_TRUE(out4) << out4.status().message();
  expect_close(values_of<float>((*out4)[0]), reference(g4, d4.x, d4.cos, d4.sin, d4.positions), 1e-6);
}

template <typename T>
void check_half_type(double tol) {
  const Geometry g{2, 3, 2, 64, 32, false, false};
  Data d = random_data(g, 9, 5);
  const Tensor x = cast_tensor<T>(g.x_shape(), d.x), cos = cast_tensor<T>({9, 16}, d.cos), sin = cast_tensor<T>({9, 16}, d.sin);
  auto out = onnx_call(g).run({x, cos, sin, positions_tensor(g, d.positions)});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].dtype(), DTypeOf<T>::value);
  expect_close(to_floats<T>((*out)[0]), reference(g, to_floats<T>(x), to_floats<T>(cos), to_floats<T>(sin), d.positions), tol);
}

TEST(RotaryEmbedding, Float16AndBFloat16) {
  check_half_type<Float16>(2e-3);
  check_half_type<BFloat16>(1e-2);
}

TEST(RotaryEmbedding, ManyHeadsAcrossThreads) {
  const Geometry g{3, 64, 8, 128, 128, true, false};
  const Data d = random_data(g, 100, 6);
  ThreadPool pool(4);
  auto out = onnx_call(g).run({f32(g.x_shape(), d.x), f32({100, 64}, d.cos), f32({100, 64}, d.sin), positions_tensor(g, d.positions)}, &pool);
  ASSERT_TRUE(out) << out.status().message();
  expect_close(values_of<float>((*out)[0]), reference(g, d.x, d.cos, d.sin, d.positions), 1e-6);
}

// ---- ONNX Runtime ---------------------------------------------------------------------------

TEST(RotaryEmbeddingOrt, OnnxThreeDimInterleavedPartial) {
  const Geometry g{2, 5, 4, 16, 8, false, true};
  const Data d = random_data(g, 12, 7);
  expect_matches_ort({.op_type = "RotaryEmbedding", .attributes = {{"interleaved", 1}, {"num_heads", 4}, {"rotary_embedding_dim", 8}},
                      .inputs = {"x", "cos", "sin", "pos"}, .outputs = {"y"},
                      .feeds = {{"x", f32(g.x_shape(), d.x)}, {"cos", f32({12, 4}, d.cos)}, {"sin", f32({12, 4}, d.sin)},
                                {"pos", positions_tensor(g, d.positions)}}},
                     1e-6);
}

TEST(RotaryEmbeddingOrt, OnnxFourDimFloat16WithoutPositionIds) {
  const Geometry g{2, 3, 4, 32, 32, true, false};
  const Data d = random_data(g, 6, 8);
  expect_matches_ort({.op_type = "RotaryEmbedding", .inputs = {"x", "cos", "sin"}, .outputs = {"y"},
                      .feeds = {{"x", cast_tensor<Float16>(g.x_shape(), d.x)}, {"cos", cast_tensor<Float16>({2, 3, 16}, d.cos)},
                                {"sin", cast_tensor<Float16>({2, 3, 16}, d.sin)}}},
                     2e-3);
}

TEST(RotaryEmbeddingOrt, ContribScalarPositionAndFourDimFloat16) {
  const Geometry g{2, 6, 2, 16, 16, false, false};
  const Data d = random_data(g, 10, 9);
  expect_matches_ort({.op_type = "RotaryEmbedding", .domain = "com.microsoft", .attributes = {{"num_heads", 2}},
                      .inputs = {"x", "pos", "cos", "sin"}, .outputs = {"y"},
                      .feeds = {{"x", f32(g.x_shape(), d.x)}, {"pos", Tensor::from_vector<int64_t>({1}, {3})},
                                {"cos", f32({10, 8}, d.cos)}, {"sin", f32({10, 8}, d.sin)}}},
                     1e-6);
  const Geometry g4{2, 3, 4, 16, 8, true, true};
  const Data d4 = random_data(g4, 10, 10);
  expect_matches_ort({.op_type = "RotaryEmbedding", .domain = "com.microsoft",
                      .attributes = {{"num_heads", 4}, {"rotary_embedding_dim", 8}, {"interleaved", 1}},
                      .inputs = {"x", "pos", "cos", "sin"}, .outputs = {"y"},
                      .feeds = {{"x", cast_tensor<Float16>(g4.x_shape(), d4.x)}, {"pos", positions_tensor(g4, d4.positions)},
                                {"cos", cast_tensor<Float16>({10, 4}, d4.cos)}, {"sin", cast_tensor<Float16>({10, 4}, d4.sin)}}},
                     2e-3);
}

// ---- Bad inputs -----------------------------------------------------------------------------

TEST(RotaryEmbedding, PositionsOutsideTheCacheAreRunTimeErrors) {
  const Geometry g{2, 3, 2, 8, 8, false, false};
  const Data d = random_data(g, 5, 11);
  const Tensor x = f32(g.x_shape(), d.x), cos = f32({5, 4}, d.cos), sin = f32({5, 4}, d.sin);
  const char* onnx_node = "test_RotaryEmbedding";
  EXPECT_TRUE(fails_with(onnx_call(g).run({x, cos, sin, positions_tensor(g, {0, 1, 5, 0, 1, 2})}), onnx_node,
                         "position_ids value 5 at index 2 is outside the cos/sin cache of 5 rows"));
  EXPECT_TRUE(fails_with(onnx_call(g).run({x, cos, sin, positions_tensor(g, {0, 1, 2, -1, 1, 2})}), onnx_node,
                         "position_ids value -1 at index 3"));
  // Base 3 puts the third token at 5, past the last row.
  EXPECT_TRUE(fails_with(contrib_call(g).run({x, Tensor::scalar_i64(3), cos, sin}), onnx_node,
                         "position_ids base 3 with 3 tokens leaves the cos/sin cache of 5 rows"));
  EXPECT_TRUE(fails_with(contrib_call(g).run({x, Tensor::scalar_i64(-1), cos, sin}), onnx_node, "position_ids base -1"));
}

TEST(RotaryEmbedding, BadShapesAndAttributesAreErrors) {
  const Geometry g{2, 3, 2, 8, 8, false, false};
  const Data d = random_data(g, 5, 12);
  const Tensor x = f32(g.x_shape(), d.x), cos = f32({5, 4}, d.cos), sin = f32({5, 4}, d.sin), pos = positions_tensor(g, d.positions);
  const char* node = "test_RotaryEmbedding";
  EXPECT_TRUE(fails_with(onnx_call(g, false).run({x, cos, sin, pos}), node, "num_heads is required for 3-D input"));
  EXPECT_TRUE(fails_with(onnx_call(g).run({x, f32({5, 3}, random_floats(15, 1)), f32({5, 3}, random_floats(15, 2)), pos}), node,
                         "cos_cache [5,3] must be [max_positions, 4]"));
  EXPECT_TRUE(fails_with(onnx_call(g).run({x, cos, f32({6, 4}, random_floats(24, 3)), pos}), node, "differ"));
  EXPECT_TRUE(fails_with(onnx_call(g).run({x, cos, sin, Tensor::from_vector<int32_t>({2, 3}, {0, 1, 2, 0, 1, 2})}), node,
                         "position_ids must be int64"));
  EXPECT_TRUE(fails_with(onnx_call(g).run({x, cos, sin, Tensor::from_vector<int64_t>({1, 3}, {0, 1, 2})}), node,
                         "position_ids [1,3] must be [2, 3]"));
  EXPECT_TRUE(fails_with(onnx_call(g).attr_int("rotary_embedding_dim", 5).run({x, cos, sin, pos}), node, "must be even"));
  EXPECT_TRUE(fails_with(onnx_call(g).attr_int("rotary_embedding_dim", 10).run({x, cos, sin, pos}), node, "at most head_size 8"));
  EXPECT_TRUE(fails_with(contrib_call(g, false).attr_int("rotary_embedding_dim", 4).run({x, pos, cos, sin}), node,
                         "num_heads is required when rotary_embedding_dim is set"));
  EXPECT_TRUE(fails_with(onnx_call(g).run({f32({2, 3, 4, 2, 2}, random_floats(96, 4)), cos, sin, pos}), node, "3-D or 4-D"));
  // Without position_ids the caches must already be per token.
  EXPECT_TRUE(fails_with(onnx_call(g).run({x, cos, sin}), node, "without position_ids cos_cache [5,4] must be [2, 3, 4]"));
}

}  // namespace
}  // namespace onnx_genai::testing
