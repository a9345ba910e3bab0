// com.microsoft MatMulNBits against a plain reference: dequantise B in double, then matmul.
//
// Tolerances are derived, not tuned: f32 paths may differ from the double reference by f32
// rounding of the sums, a few ulps of sum_k |a_k B_nk|. accuracy_level 4 quantises A per block
// to int8 (scale s = max|a| / 127, rounding error at most s / 2 per value), so an output may
// also move by sum_k |B_nk| s_block(k) / 2: the same bound ONNX Runtime's level 4 works to.
// Every instruction set's kernel table is run directly (the op itself picks only the best one).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cpu_features.h"
#include "ops/cpu/avx2/qgemm_kernels.h"
#include "ops/cpu/int4_panels.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

enum class Zp { kNone, kPacked, kFloat };

struct Case {
  int64_t m, k, n, bits, block;
  Zp zp;
  bool bias;
};

constexpr double kF32Rounding = 1e-5;  // relative to sum |a B|: K-long f32 sums, any order

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
  // B[n][k] after `round` (identity for f32, f16 rounding) of its scale and float zero point.
  template <typename Round>
  double weight(int64_t n, int64_t kk, Round round) const {
    const int64_t b = kk / c.block;
    const double zp = c.zp == Zp::kFloat ? round(static_cast<float>(zero_point(n, b))) : zero_point(n, b);
    return (code(n, kk) - zp) * round(scales[static_cast<size_t>(n * blocks + b)]);
  }
  template <typename Round>
  std::vector<float> reference(Round round) const {
    std::vector<float> y(static_cast<size_t>(c.m * c.n));
    for (int64_t n = 0; n < c.n; ++n) {
      for (int64_t m = 0; m < c.m; ++m) {
        double acc = c.bias ? round(bias[static_cast<size_t>(n)]) : 0.0;
        for (int64_t kk = 0; kk < c.k; ++kk) acc += round(a[static_cast<size_t>(m * c.k + kk)]) * weight(n, kk, round);
        y[static_cast<size_t>(m * c.n + n)] = static_cast<float>(acc);
      }
    }
    return y;
  }
  std::vector<float> reference() const { return reference([](float v) { return double{v}; }); }

  // Per output: how far an f32 result may be from the reference (int8: plus A's quantisation).
  std::vector<double> tolerance(bool int8) const {
    std::vector<double> tol(static_cast<size_t>(c.m * c.n));
    for (int64_t m = 0; m < c.m; ++m) {
      const float* row = a.data() + m * c.k;
      std::vector<double> half_step(static_cast<size_t>(blocks), 0.0);
      for (int64_t kk = 0; kk < c.k; ++kk) {
        double& h = half_step[static_cast<size_t>(kk / c.block)];
        h = std::max(h, std::fabs(double{row[kk]}) / 127.0 / 2.0);
      }
      for (int64_t n = 0; n < c.n; ++n) {
        double magnitude = 0.0, quantisation = 0.0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const double b = std::fabs(weight(n, kk, [](float v) { return double{v}; }));
          magnitude += std::fabs(double{row[kk]}) * b;
          quantisation += b * half_step[static_cast<size_t>(kk / c.block)];
        }
        // The quantised A may be off by a little more than half a step: a * (1 / s) rounds in f32.
        tol[static_cast<size_t>(m * c.n + n)] = kF32Rounding * magnitude + 1e-6 + (int8 ? 1.001 * quantisation : 0.0);
      }
    }
    return tol;
  }

  QWeights weights() const {
    QWeights w;
    w.codes = codes.data();
    w.scales = scales.data();
    w.zp_packed = c.zp == Zp::kPacked ? zp_packed.data() : nullptr;
    w.zp_float = c.zp == Zp::kFloat ? zp_float.data() : nullptr;
    w.rows = c.n, w.k = c.k, w.bits = c.bits, w.block_size = c.block, w.blocks = blocks, w.block_bytes = block_bytes;
    w.zp_row_bytes = zp_row_bytes;
    return w;
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
Result<std::vector<Tensor>> run_op(const Case& c, const std::vector<Tensor>& in, int64_t accuracy_level,
                                   ThreadPool* pool = nullptr, const std::string& extra_attr = "",
                                   int64_t extra_value = 0) {
  OpCall call("MatMulNBits", 1, "com.microsoft");
  call.attr_int("K", c.k).attr_int("N", c.n).attr_int("bits", c.bits).attr_int("block_size", c.block);
  call.attr_int("accuracy_level", accuracy_level);
  if (!extra_attr.empty()) call.attr_int(extra_attr, extra_value);
  return call.run(in, pool);
}

std::string describe(const Case& c) {
  return "m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n) +
         " bits=" + std::to_string(c.bits) + " block=" + std::to_string(c.block) +
         " zp=" + std::to_string(static_cast<int>(c.zp)) + " bias=" + std::to_string(c.bias);
}

// Odd K (ragged last block and chunk), N around the kernels' row tiles, M = 1 (GEMV) and more.
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

// Larger shapes: several kernel chunks and panels (2048 values deep), block 256, tiles of A rows.
std::vector<Case> large_cases() {
  return {{1, 4500, 37, 4, 32, Zp::kNone, false},   {9, 4500, 37, 4, 32, Zp::kPacked, true},
          {1, 1000, 21, 4, 256, Zp::kFloat, false}, {6, 2100, 18, 4, 256, Zp::kNone, false},
          {3, 4500, 19, 8, 64, Zp::kNone, false},   {1, 528, 50, 4, 16, Zp::kNone, false}};
}

void expect_within(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& tol,
                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(double{got[i]} - want[i]), tol[i]) << what << " at " << i << ": got " << got[i] << ", want " << want[i];
  }
}

TEST(MatMulNBits, F32MatchesReference) {
  ThreadPool pool(3);
  uint32_t seed = 1;
  std::vector<Case> cases = random_cases();
  for (const Case& c : large_cases()) cases.push_back(c);
  for (const Case& c : cases) {
    const Problem p(c, seed++);
    for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
      auto out = run_op(c, p.inputs<float>(), 0, tp);
      ASSERT_TRUE(out.is_ok()) << describe(c) << ": " << out.status().message();
      expect_within(values_of<float>(out.value()[0]), p.reference(), p.tolerance(false), describe(c));
    }
  }
}

// The serving engine packs many sequences' rows into one call, and a speculative verify step
// feeds a few tokens of one; each row's result must be the same bits as when it runs alone
// (M = 1), or batching would change sampled tokens. Holds for the int8 path (accuracy_level 4,
// 4-bit weights) at any M, and for the f32 path up to kGemvMaxRows rows (its GEMV; the panel
// GEMM beyond sums in another order).
void expect_rows_as_alone(int64_t level, int64_t bits, int64_t m) {
  ThreadPool pool(2);
  const Case c{m, 320, 448, bits, 32, Zp::kNone, false};
  const Problem p(c, static_cast<uint32_t>(m * 10 + bits));
  const std::vector<Tensor> all = p.inputs<float>();
  auto batched = run_op(c, all, level, &pool);
  ASSERT_TRUE(batched.is_ok()) << batched.status().message();
  const std::vector<float> rows = values_of<float>(batched.value()[0]);
  for (int64_t r = 0; r < m; ++r) {
    std::vector<Tensor> one = all;
    one[0] = f32(Shape{1, c.k}, std::vector<float>(p.a.begin() + r * c.k, p.a.begin() + (r + 1) * c.k));
    auto alone = run_op(Case{1, c.k, c.n, bits, 32, Zp::kNone, false}, one, level, &pool);
    ASSERT_TRUE(alone.is_ok()) << alone.status().message();
    const std::vector<float> want = values_of<float>(alone.value()[0]);
    for (int64_t n = 0; n < c.n; ++n) {
      ASSERT_EQ(rows[static_cast<size_t>(r * c.n + n)], want[static_cast<size_t>(n)])
          << "accuracy_level " << level << ", bits " << bits << ", row " << r << " of " << m << ", column " << n;
    }
  }
}

TEST(MatMulNBits, Int8RowsAreTheSameWhateverElseIsInTheCall) {
  for (int64_t m : {2, 3, 5, 9}) expect_rows_as_alone(4, 4, m);
}

TEST(MatMulNBits, F32RowsUpToGemvMaxAreTheSameWhateverElseIsInTheCall) {
  for (int64_t bits : {4, 8}) {
    for (int64_t m : {int64_t{2}, int64_t{3}, int64_t{5}, kGemvMaxRows}) expect_rows_as_alone(0, bits, m);
  }
}

// accuracy_level 4: int8 A for 4-bit weights (within the quantisation bound), f32 for 8-bit.
TEST(MatMulNBits, Int8ActivationsStayWithinQuantisationBound) {
  ThreadPool pool(3);
  uint32_t seed = 200;
  std::vector<Case> cases = random_cases();
  for (const Case& c : large_cases()) cases.push_back(c);
  for (const Case& c : cases) {
    const Problem p(c, seed++);
    for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
      auto out = run_op(c, p.inputs<float>(), 4, tp);
      ASSERT_TRUE(out.is_ok()) << describe(c) << ": " << out.status().message();
      expect_within(values_of<float>(out.value()[0]), p.reference(), p.tolerance(c.bits == 4), describe(c));
    }
  }
}

// The int8 path really is taken: a value far below its block's quantisation step is lost.
TEST(MatMulNBits, Int8ActivationsRoundSmallValuesAway) {
  const Case c{1, 32, 1, 4, 32, Zp::kNone, false};
  Problem p(c, 5);
  std::fill(p.a.begin(), p.a.end(), 0.0f);
  p.a[0] = 1.0f;     // sets the block's step to 1 / 127
  p.a[1] = 1e-3f;    // under half a step: quantises to 0
  std::fill(p.codes.begin(), p.codes.end(), uint8_t{0x99});  // every code 9: weight (9 - 8) * scale
  const float scale = p.scales[0];
  auto exact = run_op(c, p.inputs<float>(), 0);
  auto int8 = run_op(c, p.inputs<float>(), 4);
  ASSERT_TRUE(exact.is_ok() && int8.is_ok());
  EXPECT_NEAR(exact.value()[0].data<float>()[0], 1.001f * scale, 1e-7f);
  EXPECT_NEAR(int8.value()[0].data<float>()[0], 1.0f * scale, 1e-7f);
}

TEST(MatMulNBits, F16MatchesReference) {
  uint32_t seed = 100;
  for (const Case& c : random_cases()) {
    const Problem p(c, seed++);
    const auto want = p.reference([](float v) { return static_cast<double>(static_cast<float>(Float16(v))); });
    for (int64_t level : {4}) {
      auto out = run_op(c, p.inputs<Float16>(), level);
      ASSERT_TRUE(out.is_ok()) << describe(c) << ": " << out.status().message();
      std::vector<double> tol = p.tolerance(level == 4 && c.bits == 4);
      for (size_t i = 0; i < tol.size(); ++i) tol[i] += 2e-3 * std::max(1.0f, std::fabs(want[i]));
      expect_within(to_floats<Float16>(out.value()[0]), want, tol, describe(c) + " level " + std::to_string(level));
    }
  }
}

TEST(MatMulNBits, BatchedAKeepsLeadingDims) {
  const Case c{6, 64, 10, 4, 32, Zp::kPacked, true};
  const Problem p(c, 7);
  std::vector<Tensor> in = p.inputs<float>();
  in[0] = f32(Shape{2, 3, 64}, p.a);
  for (int64_t level : {4}) {
    auto out = run_op(c, in, level);
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_EQ(out.value()[0].shape(), (Shape{2, 3, 10}));
    expect_within(values_of<float>(out.value()[0]), p.reference(), p.tolerance(level == 4), "batched");
  }
}

// A hand-checked 4-bit case: codes 0..15 low nibble first, one negative scale, zero point 8.
TEST(MatMulNBits, HandChecked4Bit) {
  std::vector<uint8_t> codes(16 / 2);
  for (int j = 0; j < 8; ++j) codes[static_cast<size_t>(j)] = static_cast<uint8_t>((2 * j) | ((2 * j + 1) << 4));
  std::vector<float> a(16, 0.0f);
  a[0] = 1.0f;    // code 0  -> (0 - 8) * -0.5 = 4
  a[15] = -1.0f;  // code 15 -> (15 - 8) * -0.5 = -3.5, times -1 = 3.5
  for (int64_t level : {4}) {  // +-1 are exact in int8 too: +-127 steps of 1 / 127
    auto out = OpCall("MatMulNBits", 1, "com.microsoft")
                   .attr_int("K", 16).attr_int("N", 1).attr_int("bits", 4).attr_int("block_size", 16)
                   .attr_int("accuracy_level", level)
                   .run({f32({1, 16}, a), Tensor::from_vector<uint8_t>({1, 1, 8}, codes), f32({1}, {-0.5f})});
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_NEAR(out.value()[0].data<float>()[0], 7.5f, 1e-5f) << "level " << level;
  }
}

struct Table {
  std::string name;
  const QGemmKernels* kernels;
  bool int8;  // its gemm_int8 runs on this CPU
};

std::vector<Table> tables() {
  std::vector<Table> t{{"scalar", &scalar::qgemm_kernels(), true}};
  if (cpu_features().avx2) t.push_back({"avx2", &avx2::qgemm_kernels(), true});
  if (cpu_features().avx512) t.push_back({"avx512", &avx512::qgemm_kernels(), cpu_features().avx512_vnni});
  return t;
}

// A copy of `bytes` that ends exactly where an inaccessible page begins: a kernel reading past
// the end faults instead of reading a neighbour's data.
class GuardedCopy {
 public:
  GuardedCopy(const void* bytes, size_t size) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    mapped_ = (size + page - 1) / page * page + page;
    base_ = static_cast<char*>(mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    mprotect(base_ + mapped_ - page, page, PROT_NONE);
    data_ = base_ + mapped_ - page - size;
    std::memcpy(data_, bytes, size);
  }
  ~GuardedCopy() { munmap(base_, mapped_); }
  GuardedCopy(const GuardedCopy&) = delete;
  GuardedCopy& operator=(const GuardedCopy&) = delete;
  template <typename T> const T* get() const { return reinterpret_cast<const T*>(data_); }

 private:
  char* base_ = nullptr;
  char* data_ = nullptr;
  size_t mapped_ = 0;
};

enum class Path { kGemv, kGemm, kInt8 };

// Packs A and runs one kernel of `t` over N in two pieces, as threads would. B's codes and
// scales end at an inaccessible page; the output buffer has guard values after it that must
// survive.
std::vector<float> run_table(const QGemmKernels& t, const Problem& p, Path path) {
  QWeights w = p.weights();
  const GuardedCopy codes(p.codes.data(), p.codes.size()), scales(p.scales.data(), p.scales.size() * sizeof(float));
  w.codes = codes.get<uint8_t>();
  w.scales = scales.get<float>();
  const int64_t m = p.c.m, n = p.c.n;
  const int64_t rv = path == Path::kInt8 ? w.blocks * w.block_size : packed_row_values(w.blocks, w.block_size, t.chunk);
  std::vector<float> values(static_cast<size_t>(m * rv)), block_scales(static_cast<size_t>(m * w.blocks));
  std::vector<int8_t> int8_values(static_cast<size_t>(m * rv));
  std::vector<int32_t> block_sums(static_cast<size_t>(m * w.blocks));
  std::vector<float> terms(static_cast<size_t>(m * w.blocks)), panel(static_cast<size_t>(t.panel_floats));
  PackedA a{.values = values.data(), .int8_values = int8_values.data(), .block_scales = block_scales.data(),
            .block_sums = block_sums.data(), .block_terms = terms.data(), .m = m, .row_values = rv};
  t.pack_a(w, p.a.data(), path == Path::kInt8, a);
  constexpr float kGuard = 12345.0f;
  std::vector<float> y(static_cast<size_t>(m * n + 16), kGuard);
  if (path == Path::kInt8) {
    // The panels, each array ending at an inaccessible page, in two pieces of panels.
    const Int4PanelWeights made = Int4PanelWeights::pack(w);
    const GuardedCopy panel_codes(made.codes.data(), made.codes.size()),
        panel_scales(made.scales.data(), made.scales.size() * sizeof(float));
    std::optional<GuardedCopy> zero_scaled;
    Int4Panels b = made.view;
    b.codes = panel_codes.get<uint8_t>();
    b.scales = panel_scales.get<float>();
    if (b.zero_scaled != nullptr) {
      zero_scaled.emplace(made.zero_scaled.data(), made.zero_scaled.size() * sizeof(float));
      b.zero_scaled = zero_scaled->get<float>();
    }
    for (auto [p0, p1] : {std::pair<int64_t, int64_t>{0, b.panels / 2}, {b.panels / 2, b.panels}}) {
      t.gemm_int8(b, a, p0, p1, y.data() + p0 * kPanelCols, n);
    }
  }
  for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, n / 2}, {n / 2, n}}) {
    if (path == Path::kGemv) t.gemv(w, a, n0, n1, y.data() + n0, n);
    if (path == Path::kGemm) t.gemm(w, a, n0, n1, panel.data(), y.data() + n0, n);
  }
  for (size_t i = static_cast<size_t>(m * n); i < y.size(); ++i) EXPECT_EQ(y[i], kGuard) << "write past the output";
  y.resize(static_cast<size_t>(m * n));
  return y;
}

// A few rows (speculative verify steps, small batches) on the default model's K (a ragged
// chunk), every scale mode: M up to kGemvMaxRows runs the GEMV, 16 the panels.
std::vector<Case> few_row_cases() {
  std::vector<Case> cases;
  for (int64_t m : {2, 4, 8, 16}) {
    for (int64_t block : {16, 32, 128}) {
      cases.push_back({m, 320, 37, 4, block, block == 128 ? Zp::kFloat : Zp::kNone, false});
    }
    cases.push_back({m, 864, 9, 8, 64, Zp::kPacked, false});
  }
  return cases;
}

TEST(MatMulNBits, EveryIsaKernelMatchesReference) {
  std::vector<Case> cases = random_cases();
  for (const Case& c : large_cases()) cases.push_back(c);
  for (const Case& c : few_row_cases()) cases.push_back(c);
  uint32_t seed = 500;
  for (Case c : cases) {
    c.bias = false;
    const Problem p(c, seed++);
    const std::vector<float> want = p.reference();
    for (const Table& t : tables()) {
      const std::string what = t.name + " " + describe(c);
      if (c.m <= kGemvMaxRows) {
        expect_within(run_table(*t.kernels, p, Path::kGemv), want, p.tolerance(false), "gemv " + what);
      }
      expect_within(run_table(*t.kernels, p, Path::kGemm), want, p.tolerance(false), "gemm " + what);
      if (t.int8 && c.bits == 4) {
        expect_within(run_table(*t.kernels, p, Path::kInt8), want, p.tolerance(true), "gemm_int8 " + what);
      }
    }
  }
}

// Every table: a row of the GEMV (f32) and of the int8 path gives the same bits whatever other
// rows share its call.
TEST(MatMulNBits, EveryIsaKernelGivesEachRowItsAloneResult) {
  uint32_t seed = 700;
  for (const Case& c : few_row_cases()) {
    const Problem p(c, seed++);
    for (const Table& t : tables()) {
      for (Path path : {Path::kGemv, Path::kInt8}) {
        const bool int8 = t.int8 && c.bits == 4;
        if (path == Path::kGemv ? c.m > kGemvMaxRows : !int8) continue;
        const std::vector<float> rows = run_table(*t.kernels, p, path);
        for (int64_t r = 0; r < c.m; ++r) {
          Problem one = p;
          one.c.m = 1;
          one.a.assign(p.a.begin() + r * c.k, p.a.begin() + (r + 1) * c.k);
          const std::vector<float> alone = run_table(*t.kernels, one, path);
          for (int64_t n = 0; n < c.n; ++n) {
            ASSERT_EQ(rows[static_cast<size_t>(r * c.n + n)], alone[static_cast<size_t>(n)])
                << t.name << (path == Path::kGemv ? " gemv " : " gemm_int8 ") << describe(c) << ", row " << r
                << ", column " << n;
          }
        }
      }
    }
  }
}

// The int8 path computes exactly what its own quantised A asks: sum over blocks of A's block
// scale x B's scale x the integer dot of the int8 values and (code - zero point), up to f32
// rounding. (The tests above allow A's quantisation error too, which would hide a wrong block
// scale or a misplaced code.)
TEST(MatMulNBits, EveryIsaInt8KernelIsTheExactProductOfItsQuantisedA) {
  std::vector<Case> cases = few_row_cases();
  for (const Case& c : random_cases()) cases.push_back(c);
  uint32_t seed = 900;
  for (const Case& c : cases) {
    if (c.bits != 4) continue;
    const Problem p(c, seed++);
    const QWeights w = p.weights();
    const Int4PanelWeights b = Int4PanelWeights::pack(w);
    for (const Table& t : tables()) {
      if (!t.int8) continue;
      const int64_t rv = w.blocks * w.block_size;
      std::vector<int8_t> q(static_cast<size_t>(c.m * rv));
      std::vector<float> a_scales(static_cast<size_t>(c.m * w.blocks));
      std::vector<int32_t> a_sums(static_cast<size_t>(c.m * w.blocks));
      const PackedA a{.int8_values = q.data(), .block_scales = a_scales.data(), .block_sums = a_sums.data(), .m = c.m,
                      .row_values = rv};
      t.kernels->pack_a(w, p.a.data(), true, a);
      std::vector<float> y(static_cast<size_t>(c.m * c.n));
      t.kernels->gemm_int8(b.view, a, 0, b.view.panels, y.data(), c.n);
      for (int64_t r = 0; r < c.m; ++r) {
        int32_t padding = 0;
        for (int64_t k = c.k; k < rv; ++k) padding |= q[static_cast<size_t>(r * rv + k)];
        ASSERT_EQ(padding, 0) << t.name << " " << describe(c) << ": A is not zero past K";
        for (int64_t n = 0; n < c.n; ++n) {
          double want = 0.0, magnitude = 0.0;
          for (int64_t blk = 0; blk < w.blocks; ++blk) {
            const double zp = p.zero_point(n, blk);
            int32_t sum = 0;
            double dot = 0.0;
            for (int64_t k = blk * c.block; k < std::min(c.k, (blk + 1) * c.block); ++k) {
              const int32_t qk = q[static_cast<size_t>(r * rv + k)];
              sum += qk;
              dot += qk * (p.code(n, k) - zp);
              magnitude += std::fabs(qk * (p.code(n, k) - zp)) * a_scales[static_cast<size_t>(r * w.blocks + blk)] *
                           std::fabs(p.scales[static_cast<size_t>(n * w.blocks + blk)]);
            }
            ASSERT_EQ(sum, a_sums[static_cast<size_t>(r * w.blocks + blk)]) << t.name << " " << describe(c);
            want += dot * a_scales[static_cast<size_t>(r * w.blocks + blk)] * p.scales[static_cast<size_t>(n * w.blocks + blk)];
          }
          ASSERT_NEAR(y[static_cast<size_t>(r * c.n + n)], want, 1e-6 * magnitude + 1e-7)
              << t.name << " " << describe(c) << ", row " << r << ", column " << n;
        }
      }
    }
  }
}

TEST(MatMulNBits, BadInputIsAnError) {
  const Case c{1, 64, 4, 4, 32, Zp::kNone, false};
  const Problem p(c, 3);
  const auto error_of = [&](const std::vector<Tensor>& in, const std::string& attr = "", int64_t value = 0) {
    auto out = run_op(c, in, 4, nullptr, attr, value);
    EXPECT_FALSE(out.is_ok());
    return out.is_ok() ? std::string() : out.status().message();
  };
  std::vector<Tensor> with_gidx = p.inputs<float>();
  with_gidx.resize(4);
  with_gidx.push_back(Tensor::from_vector<int32_t>({64}, std::vector<int32_t>(64, 0)));
  EXPECT_NE(error_of(with_gidx).find("g_idx"), std::string::npos);
  EXPECT_NE(error_of(p.inputs<float>(), "bits", 3).find("bits"), std::string::npos);
  EXPECT_NE(error_of(p.inputs<float>(), "block_size", 48).find("block_size"), std::string::npos);
  EXPECT_NE(error_of(p.inputs<float>(), "accuracy_level", 5).find("accuracy_level"), std::string::npos);
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
