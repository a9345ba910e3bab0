// com.microsoft MatMulNBits against a plain reference: dequantise B in double, then matmul.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>
#include <type_traits>

#include "core/cpu_features.h"
#include "ops/cpu/avx2/qgemm_kernels.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

enum class Zp { kNone, kPacked, kFloat };

struct Case {
  int64_t m, k, n, bits, block;
  Zp zp;
  bool bias;
};

// Random quantised weights and activations, plus the double-precision reference product.
struct Problem {
  Case c;
  int64_t blocks = 0, block_bytes = 0, zp_row_bytes = 0;
  std::vector<float> a, scales, zp_float, bias;
  std::vector<uint8_t> codes, zp_packed;

  explicit Problem(const Case& cs, uint32_t seed) : c(cs) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    blocks = (c.k + c.block - 1) / c.block;
    block_bytes = c.block * c.bits / 8;
    zp_row_bytes = (blocks * c.bits + 7) / 8;
    for (int64_t i = 0; i < c.m * c.k; ++i) a.push_back(unit(rng));
    for (int64_t i = 0; i < c.n * blocks * block_bytes; ++i) codes.push_back(static_cast<uint8_t>(rng()));
    for (int64_t i = 0; i < c.n * blocks; ++i) scales.push_back(0.05f * unit(rng));  // negative too
    for (int64_t i = 0; i < c.n * zp_row_bytes; ++i) zp_packed.push_back(static_cast<uint8_t>(rng()));
    for (int64_t i = 0; i < c.n * blocks; ++i) zp_float.push_back(static_cast<float>(rng() % (1u << c.bits)) + 0.5f * unit(rng));
    for (int64_t i = 0; i < c.n; ++i) bias.push_back(unit(rng));
  }

  double code(int64_t n, int64_t kk) const {
    const uint8_t* block = codes.data() + (n * blocks + kk / c.block) * block_bytes;
    const int64_t j = kk % c.block;
    if (c.bits == 8) return block[j];
    return (block[j / 2] >> (4 * (j & 1))) & 0x0F;
  }
  double zero_point(int64_t n, int64_t b) const {
    if (c.zp == Zp::kFloat) return zp_float[static_cast<size_t>(n * blocks + b)];
    if (c.zp == Zp::kNone) return std::pow(2.0, static_cast<double>(c.bits - 1));
    const uint8_t byte = zp_packed[static_cast<size_t>(n * zp_row_bytes + b * c.bits / 8)];
    return c.bits == 8 ? byte : (byte >> (4 * (b & 1))) & 0x0F;
  }
  // `round` maps each float input to what the kernel sees (identity for f32, f16 rounding).
  template <typename Round>
  std::vector<float> reference(Round round) const {
    std::vector<float> y(static_cast<size_t>(c.m * c.n));
    for (int64_t n = 0; n < c.n; ++n) {
      std::vector<double> col(static_cast<size_t>(c.k));
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const int64_t b = kk / c.block;
        const double zp = c.zp == Zp::kFloat ? round(static_cast<float>(zero_point(n, b))) : zero_point(n, b);
        col[static_cast<size_t>(kk)] = (code(n, kk) - zp) * round(scales[static_cast<size_t>(n * blocks + b)]);
      }
      for (int64_t m = 0; m < c.m; ++m) {
        double acc = c.bias ? round(bias[static_cast<size_t>(n)]) : 0.0;
        for (int64_t kk = 0; kk < c.k; ++kk) acc += round(a[static_cast<size_t>(m * c.k + kk)]) * col[static_cast<size_t>(kk)];
        y[static_cast<size_t>(m * c.n + n)] = static_cast<float>(acc);
      }
    }
    return y;
  }

  template <typename T>
  std::vector<Tensor> inputs() const {
    const auto as_t = [](Shape s, const std::vector<float>& v) {
      if constexpr (std::is_same_v<T, float>) return f32(std::move(s), v);
      else return cast_tensor<T>(std::move(s), v);
    };
    std::vector<Tensor> in;
    in.push_back(as_t(Shape{c.m, c.k}, a));
    in.push_back(Tensor::from_vector<uint8_t>(Shape{c.n, blocks, block_bytes}, codes));
    in.push_back(as_t(Shape{c.n * blocks}, scales));
    if (c.zp == Zp::kPacked) in.push_back(Tensor::from_vector<uint8_t>(Shape{c.n, zp_row_bytes}, zp_packed));
    else if (c.zp == Zp::kFloat) in.push_back(as_t(Shape{c.n * blocks}, zp_float));
    else in.push_back(Tensor());
    if (c.bias) {
      in.push_back(Tensor());  // g_idx
      in.push_back(as_t(Shape{c.n}, bias));
    }
    return in;
  }
};

// Runs the op for `c`; `extra_attr` (when named) overrides or adds one integer attribute.
Result<std::vector<Tensor>> run_op(const Case& c, const std::vector<Tensor>& in, ThreadPool* pool = nullptr,
                                   const std::string& extra_attr = "", int64_t extra_value = 0) {
  OpCall call("MatMulNBits", 1, "com.microsoft");
  call.attr_int("K", c.k).attr_int("N", c.n).attr_int("bits", c.bits).attr_int("block_size", c.block);
  call.attr_int("accuracy_level", 4);
  if (!extra_attr.empty()) call.attr_int(extra_attr, extra_value);
  return call.run(in, pool);
}

std::string describe(const Case& c) {
  return "m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n) +
         " bits=" + std::to_string(c.bits) + " block=" + std::to_string(c.block) +
         " zp=" + std::to_string(static_cast<int>(c.zp)) + " bias=" + std::to_string(c.bias);
}

std::vector<Case> random_cases() {
  std::vector<Case> cases;
  const int64_t ks[] = {16, 64, 100, 256, 300};
  const int64_t ns[] = {1, 7, 33, 300};
  int i = 0;
  for (int64_t bits : {4, 8}) {
    for (int64_t block : {16, 32, 128}) {
      for (Zp zp : {Zp::kNone, Zp::kPacked, Zp::kFloat}) {
        for (int64_t m : {1, 5}) {
          cases.push_back(Case{m, ks[i % 5], ns[i % 4], bits, block, zp, i % 2 == 0});
          ++i;
        }
      }
    }
  }
  return cases;
}

// Worst |got - want| relative to the row's scale of |A| * |B| terms (sums of many products).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << what << " at " << i;
  }
}

TEST(MatMulNBits, F32MatchesReference) {
  ThreadPool pool(3);
  uint32_t seed = 1;
  for (const Case& c : random_cases()) {
    const Problem p(c, seed++);
    for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
      auto out = run_op(c, p.inputs<float>(), tp);
      ASSERT_TRUE(out.is_ok()) << describe(c) << ": " << out.status().message();
      expect_close(values_of<float>(out.value()[0]), p.reference([](float v) { return double{v}; }), 2e-5f, describe(c));
    }
  }
}

TEST(MatMulNBits, F16MatchesReference) {
  uint32_t seed = 100;
  for (const Case& c : random_cases()) {
    const Problem p(c, seed++);
    auto out = run_op(c, p.inputs<Float16>());
    ASSERT_TRUE(out.is_ok()) << describe(c) << ": " << out.status().message();
    const auto want = p.reference([](float v) { return static_cast<double>(static_cast<float>(Float16(v))); });
    expect_close(to_floats<Float16>(out.value()[0]), want, 2e-3f, describe(c));
  }
}

TEST(MatMulNBits, BatchedAKeepsLeadingDims) {
  const Case c{6, 64, 10, 4, 32, Zp::kPacked, true};
  const Problem p(c, 7);
  std::vector<Tensor> in = p.inputs<float>();
  in[0] = f32(Shape{2, 3, 64}, p.a);
  auto out = run_op(c, in);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(out.value()[0].shape(), (Shape{2, 3, 10}));
  expect_close(values_of<float>(out.value()[0]), p.reference([](float v) { return double{v}; }), 2e-5f, "batched");
}

// A hand-checked 4-bit case: codes 0..15 low nibble first, one negative scale, zero point 8.
TEST(MatMulNBits, HandChecked4Bit) {
  std::vector<uint8_t> codes(16 / 2);
  for (int j = 0; j < 8; ++j) codes[static_cast<size_t>(j)] = static_cast<uint8_t>((2 * j) | ((2 * j + 1) << 4));
  std::vector<float> a(16, 0.0f);
  a[0] = 1.0f;   // code 0  -> (0 - 8) * -0.5 = 4
  a[15] = 2.0f;  // code 15 -> (15 - 8) * -0.5 = -3.5, times 2 = -7
  auto out = OpCall("MatMulNBits", 1, "com.microsoft")
                 .attr_int("K", 16).attr_int("N", 1).attr_int("bits", 4).attr_int("block_size", 16)
                 .run({f32({1, 16}, a), Tensor::from_vector<uint8_t>({1, 1, 8}, codes), f32({1}, {-0.5f})});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_FLOAT_EQ(out.value()[0].data<float>()[0], -3.0f);
}

// Each instruction set's kernel table, called directly (the op picks only the best one).
TEST(MatMulNBits, EveryIsaKernelMatchesReference) {
  std::vector<const QGemmKernels*> tables{&scalar::qgemm_kernels()};
  if (cpu_features().avx2) tables.push_back(&avx2::qgemm_kernels());
  if (cpu_features().avx512) tables.push_back(&avx512::qgemm_kernels());
  uint32_t seed = 500;
  for (const Case& base : random_cases()) {
    Case c = base;
    c.m = 1;
    c.bias = false;
    const Problem p(c, seed++);
    QWeights w;
    w.codes = p.codes.data();
    w.scales = p.scales.data();
    w.zp_packed = c.zp == Zp::kPacked ? p.zp_packed.data() : nullptr;
    w.zp_float = c.zp == Zp::kFloat ? p.zp_float.data() : nullptr;
    w.k = c.k, w.bits = c.bits, w.block_size = c.block, w.blocks = p.blocks, w.block_bytes = p.block_bytes;
    w.zp_row_bytes = p.zp_row_bytes;
    std::vector<float> sums(static_cast<size_t>(p.blocks), 0.0f);
    for (int64_t kk = 0; kk < c.k; ++kk) sums[static_cast<size_t>(kk / c.block)] += p.a[static_cast<size_t>(kk)];
    const std::vector<float> want = p.reference([](float v) { return double{v}; });
    for (const QGemmKernels* t : tables) {
      std::vector<float> y(static_cast<size_t>(c.n));
      t->gemv(w, p.a.data(), sums.data(), 0, c.n, y.data());
      expect_close(y, want, 2e-5f, "gemv " + describe(c));
      std::vector<float> deq(static_cast<size_t>(c.n * c.k));
      t->dequantize(w, 0, c.n, deq.data());
      for (int64_t n = 0; n < c.n; ++n) {
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const double b = (p.code(n, kk) - p.zero_point(n, kk / c.block)) * p.scales[static_cast<size_t>(n * p.blocks + kk / c.block)];
          ASSERT_NEAR(deq[static_cast<size_t>(n * c.k + kk)], b, 1e-6) << describe(c);
        }
      }
    }
  }
}


TEST(MatMulNBits, BadInputIsAnError) {
  const Case c{1, 64, 4, 4, 32, Zp::kNone, false};
  const Problem p(c, 3);
  const auto error_of = [&](const std::vector<Tensor>& in, const std::string& attr = "", int64_t value = 0) {
    auto out = run_op(c, in, nullptr, attr, value);
    EXPECT_FALSE(out.is_ok());
    return out.is_ok() ? std::string() : out.status().message();
  };
  std::vector<Tensor> with_gidx = p.inputs<float>();
  with_gidx.resize(4);
  with_gidx.push_back(Tensor::from_vector<int32_t>({64}, std::vector<int32_t>(64, 0)));
  EXPECT_NE(error_of(with_gidx).find("g_idx"), std::string::npos);
  EXPECT_NE(error_of(p.inputs<float>(), "bits", 3).find("bits"), std::string::npos);
  EXPECT_NE(error_of(p.inputs<float>(), "block_size", 48).find("block_size"), std::string::npos);
  EXPECT_NE(error_of(p.inputs<float>(), "weight_prepacked", 1).find("weight_prepacked"), std::string::npos);
  std::vector<Tensor> short_b = p.inputs<float>();
  short_b[1] = Tensor::from_vector<uint8_t>({4, 1, 16}, std::vector<uint8_t>(64, 0));
  EXPECT_NE(error_of(short_b).find("B "), std::string::npos);
  std::vector<Tensor> bad_scales = p.inputs<float>();
  bad_scales[2] = f32({4}, {1, 1, 1, 1});
  EXPECT_NE(error_of(bad_scales).find("scales"), std::string::npos);
  std::vector<Tensor> bad_a = p.inputs<float>();
  bad_a[0] = f32({1, 60}, std::vector<float>(60, 0.0f));
  EXPECT_NE(error_of(bad_a).find("K=64"), std::string::npos);
  EXPECT_NE(error_of(bad_a).find("test_MatMulNBits"), std::string::npos);
}

}  // namespace
}  // namespace onnx_genai::testing
