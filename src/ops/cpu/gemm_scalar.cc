// Portable GEMM kernels for CPUs without AVX2: the same driver over one-float "vectors" and a
// 4 x 4 register tile.
#include "ops/cpu/gemm_impl.h"

namespace onnx_genai {

namespace {

struct Scalar {
  using reg = float;
  static constexpr int kWidth = 1;
  static constexpr int kVecs = 4;
  static constexpr int kRows = 4;
  static constexpr int64_t kKc = 256;
  static constexpr int64_t kMc = 64;
  static constexpr int64_t kNc = 256;

  static reg zero() { return 0.0f; }
  static reg set1(float x) { return x; }
  static reg broadcast(const float* p) { return *p; }
  static reg fma(reg a, reg b, reg c) { return a * b + c; }
  static reg add(reg a, reg b) { return a + b; }
  static reg mul(reg a, reg b) { return a * b; }
  template <typename T>
  static reg load(const T* p) { return static_cast<float>(*p); }
  // A one-float vector is never partially filled.
  template <typename T>
  static reg load_partial(const T* p, int) { return static_cast<float>(*p); }
  static void store(float* p, reg v) { *p = v; }
  template <typename T>
  static void store(T* p, reg v) { *p = T(v); }
  template <typename T>
  static void store_partial(T* p, reg v, int) { store(p, v); }
};

}  // namespace

const GemmKernelSet& gemm_kernels_scalar() {
  static const GemmKernelSet set = gemm_impl::Gemm<Scalar>::kernel_set();
  return set;
}

}  // namespace onnx_genai
