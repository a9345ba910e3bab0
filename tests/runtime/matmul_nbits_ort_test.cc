// com.microsoft MatMulNBits, ours against ONNX Runtime: single-node models (opset 21 plus
// com.microsoft 1, weights as initializers so our kernel sees constant B) built by an inline
// Python/onnx script over random cases, both runtimes fed the same A.
//
// Tolerance: f32 A: |ours - ort| <= 1e-4 * (1 + |ort|); both sides dequantise exactly and
// accumulate in f32, so only summation order differs (K <= 520 here). f16 A: 1e-2 * (1 + |ort|),
// a few f16 ulps of the rounded output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "onnx_genai/session.h"
#include "oracle_io.h"

namespace onnx_genai {
namespace {

// Writes one model per case line "name M K N bits block zp(none|packed|float) bias(0|1) dtype(f32|f16)".
constexpr const char* kBuilder = R"PY(
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
out_dir = sys.argv[1]
for line in open(sys.argv[2]):
    name, m, k, n, bits, block, zp, bias, dt = line.split()
    m, k, n, bits, block, bias = int(m), int(k), int(n), int(bits), int(block), bias == "1"
    rng = np.random.default_rng(int(name[1:]))
    fdt = np.float32 if dt == "f32" else np.float16
    elem = TensorProto.FLOAT if dt == "f32" else TensorProto.FLOAT16
    blocks = (k + block - 1) // block
    codes = rng.integers(0, 256, size=(n, blocks, block * bits // 8), dtype=np.uint8)
    scales = (rng.uniform(-0.05, 0.05, size=n * blocks)).astype(fdt)
    inits = [numpy_helper.from_array(codes, "B"), numpy_helper.from_array(scales, "scales")]
    inputs = ["A", "B", "scales"]
    if zp == "packed":
        inits.append(numpy_helper.from_array(rng.integers(0, 256, size=(n, (blocks * bits + 7) // 8), dtype=np.uint8), "zp"))
        inputs.append("zp")
    elif zp == "float":
        inits.append(numpy_helper.from_array(rng.integers(0, 1 << bits, size=n * blocks).astype(fdt), "zp"))
        inputs.append("zp")
    if bias:
        inputs += [""] * (4 - len(inputs)) + ["", "bias"]
        inits.append(numpy_helper.from_array(rng.uniform(-1, 1, size=n).astype(fdt), "bias"))
    node = helper.make_node("MatMulNBits", inputs, ["Y"], domain="com.microsoft", K=k, N=n, bits=bits, block_size=block)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("A", elem, [m, k])],
                              [helper.make_tensor_value_info("Y", elem, [m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    onnx.save(model, f"{out_dir}/{name}.onnx")
)PY";

struct OrtCase {
  std::string name;
  int64_t m, k, n, bits, block;
  std::string zp;
  bool bias;
  bool f16;
};

std::vector<OrtCase> ort_cases() {
  std::vector<OrtCase> cases;
  const int64_t ks[] = {64, 100, 256, 520};
  const int64_t ns[] = {8, 33, 300};
  const char* zps[] = {"none", "packed", "float"};
  int i = 0;
  for (int64_t bits : {4, 8}) {
    for (int64_t block : {16, 32, 128}) {
      for (int64_t m : {1, 5}) {
        for (int variant = 0; variant < 4; ++variant, ++i) {
          // ORT 1.30 rejects float zero points with 8 bits (its unpacked path is 2/4-bit only).
          const char* zp = bits == 8 ? zps[i % 2] : zps[i % 3];
          const OrtCase c{"c" + std::to_string(i), m, ks[i % 4], ns[i % 3], bits, block, zp, variant >= 2, variant % 2 == 1};
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

Tensor random_a(const OrtCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(c.m * c.k));
  for (float& x : v) x = unit(rng);
  if (!c.f16) return Tensor::from_vector<float>(Shape{c.m, c.k}, v);
  std::vector<Float16> h;
  for (float x : v) h.push_back(Float16(x));
  return Tensor::from_vector<Float16>(Shape{c.m, c.k}, h);
}

std::vector<float> as_floats(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = t.dtype() == DType::kF16 ? static_cast<float>(t.data<Float16>()[i]) : t.data<float>()[i];
  }
  return out;
}

TEST(MatMulNBitsOrt, RandomCasesMatchOnnxRuntime) {
  testing::ScopedTempDir dir;
  ASSERT_TRUE(dir.valid());
  const std::vector<OrtCase> cases = ort_cases();
  {
    std::FILE* script = std::fopen((dir.path() / "build.py").c_str(), "w");
    std::FILE* list = std::fopen((dir.path() / "cases.txt").c_str(), "w");
    ASSERT_TRUE(script != nullptr && list != nullptr);
    std::fputs(kBuilder, script);
    for (const OrtCase& c : cases) {
      std::fprintf(list, "%s %lld %lld %lld %lld %lld %s %d %s\n", c.name.c_str(), static_cast<long long>(c.m),
                   static_cast<long long>(c.k), static_cast<long long>(c.n), static_cast<long long>(c.bits),
                   static_cast<long long>(c.block), c.zp.c_str(), c.bias ? 1 : 0, c.f16 ? "f16" : "f32");
    }
    std::fclose(script);
    std::fclose(list);
  }
  auto built = testing::run_command("/usr/bin/python3 " + testing::shell_quote((dir.path() / "build.py").string()) + " " +
                                        testing::shell_quote(dir.path().string()) + " " +
                                        testing::shell_quote((dir.path() / "cases.txt").string()),
                                    dir.path());
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  ASSERT_EQ(built->exit_code, 0) << built->err;

  float worst_f32 = 0.0f, worst_f16 = 0.0f;
  uint32_t seed = 1;
  for (const OrtCase& c : cases) {
    const std::string model = (dir.path() / (c.name + ".onnx")).string();
    const Tensor a = random_a(c, seed++);
    SessionOptions options;
    options.num_threads = 2;
    auto session = Session::load(model, options);
    ASSERT_TRUE(session.is_ok()) << c.name << ": " << session.status().message();
    auto ours = (*session)->run_named({{"A", a}});
    ASSERT_TRUE(ours.is_ok()) << c.name << ": " << ours.status().message();
    auto ort = testing::run_onnx_runtime(model, {{"A", a}});
    ASSERT_TRUE(ort.is_ok()) << c.name << ": " << ort.status().message();
    ASSERT_EQ((*ours)[0].shape(), (*ort)[0].tensor.shape()) << c.name;
    const std::vector<float> got = as_floats((*ours)[0]), want = as_floats((*ort)[0].tensor);
    const float tol = c.f16 ? 1e-2f : 1e-4f;
    float& worst = c.f16 ? worst_f16 : worst_f32;
    for (size_t i = 0; i < got.size(); ++i) {
      const float diff = std::fabs(got[i] - want[i]);
      worst = std::max(worst, diff);
      ASSERT_LE(diff, tol * (1.0f + std::fabs(want[i]))) << c.name << " at " << i << ": " << got[i] << " vs " << want[i];
    }
  }
  std::printf("[ ort      ] MatMulNBits %zu cases, worst abs diff f32 %.3g, f16 %.3g\n", cases.size(), worst_f32, worst_f16);
}

}  // namespace
}  // namespace onnx_genai
