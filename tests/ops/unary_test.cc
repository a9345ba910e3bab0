// One-tensor elementwise family: math functions, activations, predicates, Clip, Cast/CastLike.
// Expected values are worked out by hand from the ONNX spec; the SIMD exp/tanh/sigmoid/erf
// kernels (every ISA this CPU runs) are checked against the C library over a dense range.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/cpu_features.h"
#include "ops/cpu/elementwise.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

template <typename T>
Tensor make(Shape shape, std::vector<T> v) {
  return Tensor::from_vector<T>(std::move(shape), v);
}

Tensor vec(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<float>(Shape{n}, v);
}

// Takes the call by forwarding reference: OpCall(...) temporaries and attr_*() chains alike.
template <typename Call>
Tensor run1(Call&& call, const std::vector<Tensor>& inputs, ThreadPool* pool = nullptr) {
  auto out = call.run(inputs, pool);
  EXPECT_TRUE(out) << out.status().message();
  return out ? (*out)[0] : Tensor();
}

template <typename Call>
std::vector<float> run_f32(Call&& call, std::vector<float> x) { return values_of<float>(run1(call, {vec(std::move(x))})); }

TEST(Unary, SimpleMathHandValues) {
  EXPECT_EQ(run_f32(OpCall("Sqrt"), {4, 0.25f, 0}), (std::vector<float>{2, 0.5f, 0}));
  EXPECT_EQ(run_f32(OpCall("Reciprocal"), {4, -0.5f}), (std::vector<float>{0.25f, -2}));
  EXPECT_EQ(run_f32(OpCall("Neg"), {4, -0.5f}), (std::vector<float>{-4, 0.5f}));
  EXPECT_EQ(run_f32(OpCall("Abs"), {-4, 0.5f}), (std::vector<float>{4, 0.5f}));
  EXPECT_EQ(run_f32(OpCall("Relu"), {-4, 0.5f, 0}), (std::vector<float>{0, 0.5f, 0}));
  EXPECT_EQ(run_f32(OpCall("Floor"), {-1.5f, 1.5f, 2}), (std::vector<float>{-2, 1, 2}));
  EXPECT_EQ(run_f32(OpCall("Ceil"), {-1.5f, 1.5f, 2}), (std::vector<float>{-1, 2, 2}));
  // Halves go to the even neighbour.
  EXPECT_EQ(run_f32(OpCall("Round", 11), {0.5f, 1.5f, 2.5f, -2.5f, 2.4f, -1.6f}), (std::vector<float>{0, 2, 2, -2, 2, -2}));
  EXPECT_EQ(run_f32(OpCall("Sign"), {-3, 0, 0.1f}), (std::vector<float>{-1, 0, 1}));
  expect_near_all(run_f32(OpCall("Log"), {1, 7.3890561f}), {0, 2}, 1e-6f);
  expect_near_all(run_f32(OpCall("Sin", 7), {0, 1.5707963f}), {0, 1}, 1e-6f);
  expect_near_all(run_f32(OpCall("Cos", 7), {0, 3.1415927f}), {1, -1}, 1e-6f);
}

TEST(Unary, IntegerTypes) {
  // Neg/Abs wrap at the minimum like two's complement hardware.
  EXPECT_EQ(values_of<int8_t>(run1(OpCall("Neg"), {make<int8_t>({3}, {5, -128, 0})})), (std::vector<int8_t>{-5, -128, 0}));
  EXPECT_EQ(values_of<int32_t>(run1(OpCall("Abs"), {make<int32_t>({2}, {-7, 7})})), (std::vector<int32_t>{7, 7}));
  EXPECT_EQ(values_of<uint16_t>(run1(OpCall("Abs"), {make<uint16_t>({1}, {65535})})), (std::vector<uint16_t>{65535}));
  EXPECT_EQ(values_of<int64_t>(run1(OpCall("Sign"), {make<int64_t>({3}, {-9, 0, 4})})), (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(values_of<int32_t>(run1(OpCall("Relu", 14), {make<int32_t>({2}, {-9, 4})})), (std::vector<int32_t>{0, 4}));
}

TEST(Unary, ActivationsWithAttributes) {
  EXPECT_EQ(run_f32(OpCall("LeakyRelu", 16).attr_float("alpha", 0.5f), {-4, 2}), (std::vector<float>{-2, 2}));
  EXPECT_EQ(run_f32(OpCall("LeakyRelu", 16), {-100, 2}), (std::vector<float>{-1, 2}));  // default alpha 0.01
  EXPECT_EQ(run_f32(OpCall("ThresholdedRelu", 10).attr_float("alpha", 2), {1, 2, 3}), (std::vector<float>{0, 0, 3}));
  EXPECT_EQ(run_f32(OpCall("HardSigmoid", 6).attr_float("alpha", 0.5f).attr_float("beta", 0.25f), {-1, 0.5f, 3}),
            (std::vector<float>{0, 0.5f, 1}));
  EXPECT_EQ(run_f32(OpCall("HardSwish", 14), {-4, 0, 3, 5}), (std::vector<float>{0, 0, 3, 5}));
  EXPECT_EQ(run_f32(OpCall("HardSwish", 14), {1.5f}), (std::vector<float>{1.5f * 0.75f}));  // x * (x/6 + 1/2)
  EXPECT_EQ(run_f32(OpCall("Softsign"), {3, -1}), (std::vector<float>{0.75f, -0.5f}));
  // Elu(alpha=2): 2 * (e^x - 1) below 0.
  expect_near_all(run_f32(OpCall("Elu", 6).attr_float("alpha", 2), {-1, 0, 3}), {2 * (0.36787944f - 1), 0, 3}, 1e-6f);
  // Selu defaults: gamma * alpha * (e^x - 1) below 0, gamma * x above.
  expect_near_all(run_f32(OpCall("Selu", 6), {-1, 2}), {1.0507010f * 1.6732632f * (0.36787944f - 1), 1.0507010f * 2}, 1e-6f);
  // Celu(alpha=2): 2 * (e^(x/2) - 1) below 0.
  expect_near_all(run_f32(OpCall("Celu", 12).attr_float("alpha", 2), {-2, 1}), {2 * (0.36787944f - 1), 1}, 1e-6f);
  // Softplus = log(1 + e^x); stays finite where e^x overflows.
  expect_near_all(run_f32(OpCall("Softplus"), {0, 100, -100}), {0.69314718f, 100, 3.7200760e-44f}, 1e-6f);
}

TEST(Unary, PredicatesGiveBool) {
  Tensor nan = run1(OpCall("IsNaN", 13), {vec({1, kNaN, kInf})});
  EXPECT_EQ(nan.dtype(), DType::kBool);
  EXPECT_EQ(values_of<uint8_t>(nan), (std::vector<uint8_t>{0, 1, 0}));
  Tensor x = vec({-kInf, kInf, kNaN, 0});
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("IsInf", 10), {x})), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("IsInf", 10).attr_int("detect_negative", 0), {x})), (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("IsInf", 10).attr_int("detect_positive", 0), {x})), (std::vector<uint8_t>{1, 0, 0, 0}));
  Tensor b = Tensor::allocate(DType::kBool, Shape{3}).value();
  b.data<uint8_t>()[1] = 1;
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("Not", 1), {b})), (std::vector<uint8_t>{1, 0, 1}));
}

TEST(Unary, SpecialValuesOfTranscendentals) {
  const std::vector<float> x = {-kInf, kInf, kNaN, -200, 0};
  const auto e = run_f32(OpCall("Exp"), x);
  EXPECT_EQ(e[0], 0);
  EXPECT_EQ(e[1], kInf);
  EXPECT_TRUE(std::isnan(e[2]));
  EXPECT_EQ(e[3], 0);
  EXPECT_EQ(e[4], 1);
  const auto t = run_f32(OpCall("Tanh"), x);
  EXPECT_EQ(t[0], -1);
  EXPECT_EQ(t[1], 1);
  EXPECT_TRUE(std::isnan(t[2]));
  EXPECT_EQ(t[4], 0);
  const auto s = run_f32(OpCall("Sigmoid"), x);
  EXPECT_EQ(s[0], 0);
  EXPECT_EQ(s[1], 1);
  EXPECT_TRUE(std::isnan(s[2]));
  EXPECT_EQ(s[4], 0.5f);
  const auto r = run_f32(OpCall("Erf"), x);
  EXPECT_EQ(r[0], -1);
  EXPECT_EQ(r[1], 1);
  EXPECT_TRUE(std::isnan(r[2]));
  EXPECT_EQ(r[4], 0);
  // exp near the top of the float range must not be clamped early.
  expect_near_all(run_f32(OpCall("Exp"), {88.5f, -87.5f}), {std::exp(88.5f), std::exp(-87.5f)}, 1e-6f);
}

// Each SIMD table this CPU can run against the C library, over [-lo, hi] in small steps.
void check_vec_math(VecMathFn fn, float (*reference)(float), float lo, float hi, float rel_tol, const char* what) {
  ASSERT_NE(fn, nullptr) << what;
  std::vector<float> x;
  for (float v = lo; v <= hi; v += (hi - lo) / 200003) x.push_back(v);
  x.push_back(1e-20f);
  x.push_back(-3e-8f);
  std::vector<float> y(x.size());
  fn(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = reference(x[i]);
    const double err = std::fabs(y[i] - want) / std::max(std::fabs(want), 1e-30);
    ASSERT_LE(err, rel_tol) << what << "(" << x[i] << ") = " << y[i] << ", want " << want;
  }
}

float ref_exp(float x) { return std::exp(x); }
float ref_tanh(float x) { return std::tanh(x); }
float ref_sigmoid(float x) { return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x)))); }
float ref_erf(float x) { return std::erf(x); }

TEST(VecMath, EveryAvailableIsaMatchesLibm) {
  struct Isa {
    const char* name;
    bool available;
    VecMathFn (*table)(VecMathOp);
  };
  const Isa isas[] = {{"avx2", cpu_features().avx2, &avx2::vec_math}, {"avx512", cpu_features().avx512, &avx512::vec_math}};
  for (const Isa& isa : isas) {
    if (!isa.available) continue;
    SCOPED_TRACE(isa.name);
    // Relative error bounds of 2-5 float ulps (1 ulp = 1.2e-7; measured worst: exp 1.2e-7,
    // tanh 2.1e-7, sigmoid 1.9e-7, erf 3.6e-7), far inside the conformance tolerance of 1e-3.
    check_vec_math(isa.table(VecMathOp::kExp), ref_exp, -87, 88.7f, 2.5e-7f, "exp");
    check_vec_math(isa.table(VecMathOp::kTanh), ref_tanh, -10, 10, 4e-7f, "tanh");
    check_vec_math(isa.table(VecMathOp::kSigmoid), ref_sigmoid, -80, 30, 4e-7f, "sigmoid");
    check_vec_math(isa.table(VecMathOp::kErf), ref_erf, -5, 5, 6e-7f, "erf");
  }
}

TEST(Unary, HalfBfloatAndDoubleTypes) {
  // 4000 elements of f16 cross the 512-element widening blocks.
  std::vector<Float16> h(4000);
  for (size_t i = 0; i < h.size(); ++i) h[i] = Float16(static_cast<float>(i % 7) - 3);
  Tensor out = run1(OpCall("Relu", 14), {make<Float16>({4000}, h)});
  ASSERT_EQ(out.dtype(), DType::kF16);
  for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(static_cast<float>(out.data<Float16>()[i]), std::max(0.0f, static_cast<float>(i % 7) - 3));
  Tensor bf = run1(OpCall("Exp"), {make<BFloat16>({2}, {BFloat16(0), BFloat16(1)})});
  EXPECT_EQ(bf.dtype(), DType::kBF16);
  EXPECT_EQ(to_floats<BFloat16>(bf), (std::vector<float>{1, 2.71875f}));  // e rounded to 8 bits
  Tensor d = run1(OpCall("Sigmoid"), {make<double>({2}, {0, 2})});
  EXPECT_EQ(values_of<double>(d), (std::vector<double>{0.5, 1 / (1 + std::exp(-2.0))}));
  Tensor hs = run1(OpCall("Tanh"), {make<Float16>({1}, {Float16(0.5f)})});
  EXPECT_NEAR(static_cast<float>(hs.data<Float16>()[0]), 0.46211716f, 5e-4f);
}

TEST(Unary, LargeTensorOnThreadPool) {
  ThreadPool pool(4);
  const int64_t n = 100003;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 1000) / 100 - 5;
  Tensor out = run1(OpCall("Tanh"), {make<float>({n}, x)}, &pool);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(out.data<float>()[i], std::tanh(x[static_cast<size_t>(i)]), 1e-6f) << i;
}

TEST(Clip, InputsAttributesAndIntegers) {
  Tensor x = vec({-3, 0.5f, 7});
  EXPECT_EQ(values_of<float>(run1(OpCall("Clip", 13), {x, make<float>({}, {-1}), make<float>({}, {1})})), (std::vector<float>{-1, 0.5f, 1}));
  EXPECT_EQ(values_of<float>(run1(OpCall("Clip", 13), {x, Tensor(), make<float>({}, {1})})), (std::vector<float>{-3, 0.5f, 1}));
  EXPECT_EQ(values_of<float>(run1(OpCall("Clip", 13), {x, make<float>({}, {0})})), (std::vector<float>{0, 0.5f, 7}));
  EXPECT_EQ(values_of<float>(run1(OpCall("Clip", 13), {x})), (std::vector<float>{-3, 0.5f, 7}));
  EXPECT_EQ(values_of<float>(run1(OpCall("Clip", 6).attr_float("min", -2).attr_float("max", 2), {x})), (std::vector<float>{-2, 0.5f, 2}));
  EXPECT_EQ(values_of<int8_t>(run1(OpCall("Clip", 13), {make<int8_t>({3}, {-128, 5, 127}), make<int8_t>({}, {-5}), make<int8_t>({}, {5})})),
            (std::vector<int8_t>{-5, 5, 5}));
  Tensor h = run1(OpCall("Clip", 13), {make<Float16>({2}, {Float16(-3), Float16(3)}), make<Float16>({}, {Float16(-0.5f)})});
  EXPECT_EQ(to_floats<Float16>(h), (std::vector<float>{-0.5f, 3}));
}

TEST(Cast, NumericConversions) {
  Tensor x = vec({1.9f, -1.9f, 0, 300.5f});
  EXPECT_EQ(values_of<int32_t>(run1(OpCall("Cast", 13).attr_int("to", 6), {x})), (std::vector<int32_t>{1, -1, 0, 300}));
  EXPECT_EQ(values_of<uint8_t>(run1(OpCall("Cast", 13).attr_int("to", 9), {x})), (std::vector<uint8_t>{1, 1, 0, 1}));
  // f32 -> f16 rounds to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  Tensor h = run1(OpCall("Cast", 13).attr_int("to", 10), {vec({1.0f + 1.0f / 2048, 65504, 1e-8f})});
  EXPECT_EQ(h.dtype(), DType::kF16);
  EXPECT_EQ(to_floats<Float16>(h), (std::vector<float>{1, 65504, 0}));
  Tensor bf = run1(OpCall("Cast", 13).attr_int("to", 16), {vec({1.0f + 1.0f / 128, 3})});
  EXPECT_EQ(to_floats<BFloat16>(bf), (std::vector<float>{1.0f + 1.0f / 128, 3}));
  Tensor d = run1(OpCall("Cast", 13).attr_int("to", 11), {make<int64_t>({2}, {-5, 1LL << 40})});
  EXPECT_EQ(values_of<double>(d), (std::vector<double>{-5, 1099511627776.0}));
  Tensor b = Tensor::allocate(DType::kBool, Shape{2}).value();
  b.data<uint8_t>()[0] = 1;
  EXPECT_EQ(values_of<float>(run1(OpCall("Cast", 13).attr_int("to", 1), {b})), (std::vector<float>{1, 0}));
  // Same dtype: a copy.
  EXPECT_EQ(values_of<float>(run1(OpCall("Cast", 13).attr_int("to", 1), {x})), (std::vector<float>{1.9f, -1.9f, 0, 300.5f}));
  Tensor like = run1(OpCall("CastLike", 15), {make<Float16>({1}, {Float16(2.5f)}), make<double>({1}, {0})});
  EXPECT_EQ(values_of<double>(like), (std::vector<double>{2.5}));
}

TEST(Unary, BadInputsFailWithNodeName) {
  auto to_string = OpCall("Cast", 13).attr_int("to", 8).run({vec({1})});
  ASSERT_FALSE(to_string);
  EXPECT_NE(to_string.status().message().find("test_Cast"), std::string::npos) << to_string.status().message();
  EXPECT_FALSE(OpCall("Cast", 13).run({vec({1})}));  // no 'to'
  EXPECT_FALSE(OpCall("IsNaN", 13).run({make<int32_t>({1}, {1})}));
  EXPECT_FALSE(OpCall("Exp").run({make<int32_t>({1}, {1})}));
  auto bound = OpCall("Clip", 13).run({vec({1, 2}), vec({0, 1})});
  ASSERT_FALSE(bound);
  EXPECT_NE(bound.status().message().find("scalar"), std::string::npos) << bound.status().message();
  EXPECT_FALSE(OpCall("Clip", 13).run({vec({1, 2}), make<double>({}, {0})}));
  EXPECT_FALSE(OpCall("Relu").run({vec({1}), vec({2})}));
}

}  // namespace
}  // namespace onnx_genai::testing
