// Launch interface of the CUDA elementwise kernels (elementwise_kernels.cu): broadcasting binary
// arithmetic, one-tensor math and activations, and Cast. No CUDA headers needed.
//
// Semantics are the CPU kernels' (ops/cpu/binary.cc, unary.cc, activation.cc): 16-bit floats
// compute in f32 and round to nearest even on store; integer Div truncates, x / 0 = 0 and
// MIN / -1 wraps; integer Add / Sub / Mul / Neg / Abs wrap.
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kPow };

// Rank of the coalesced broadcast the general binary kernel indexes (ops/broadcast.h merges
// dims first, so this bounds the merged rank, not the tensors' rank).
inline constexpr int kMaxBroadcastRank = 8;

// How one operand of the flat binary kernel is read at output index i.
enum class Operand : int32_t {
  kScalar,      // element 0 for every i
  kContiguous,  // element i (same shape as the output)
  kRow,         // element i % period (a vector broadcast along the last dim)
};

// out[i] = op(a[.], b[.]) for the n elements of the output. `flat` selects the fast kernel
// (a_read / b_read / period); otherwise the general one walks `dims` with per-operand element
// strides (0 along broadcast dims). a and out have `dtype`; b has `b_dtype` (Pow's exponent may
// differ, every other op has b_dtype == dtype).
struct BinaryArgs {
  BinaryOp op = BinaryOp::kAdd;
  DType dtype = DType::kF32;
  DType b_dtype = DType::kF32;
  int64_t n = 0;
  bool flat = true;
  Operand a_read = Operand::kContiguous, b_read = Operand::kContiguous;
  int64_t period = 1;
  int rank = 0;
  int64_t dims[kMaxBroadcastRank] = {};
  int64_t a_strides[kMaxBroadcastRank] = {};
  int64_t b_strides[kMaxBroadcastRank] = {};
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
};

// Whether launch_binary has an instantiation for (op, dtype, b_dtype): Add / Sub / Mul / Div on
// f32, f16, bf16, int32, int64 (b_dtype == dtype); Pow with an f32 / f16 / bf16 base and an f32,
// f16, bf16, int32 or int64 exponent.
bool binary_supported(BinaryOp op, DType dtype, DType b_dtype);
Status launch_binary(const BinaryArgs& args, void* stream);

enum class UnaryOp {
  kSigmoid, kTanh, kNeg, kExp, kLog, kSqrt, kReciprocal, kRelu, kErf, kAbs,
  kGeluTanh,   // 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))  (FastGelu, Gelu approximate=tanh)
  kGeluErf,    // 0.5 v (1 + erf(v / sqrt(2)))                     (BiasGelu, Gelu approximate=none)
  kQuickGelu,  // v * sigmoid(alpha v)
};

// y[i] = op(x[i] (+ bias[i % bias_period])); x, bias and y have `dtype`. bias is only given for
// the Gelu family.
struct UnaryArgs {
  UnaryOp op = UnaryOp::kRelu;
  DType dtype = DType::kF32;
  int64_t n = 0;
  float alpha = 1.702f;
  const void* x = nullptr;
  const void* bias = nullptr;
  int64_t bias_period = 1;
  void* y = nullptr;
};

// f32 / f16 / bf16 for every op; int32 / int64 too for Neg, Abs and Relu.
bool unary_supported(UnaryOp op, DType dtype);
Status launch_unary(const UnaryArgs& args, void* stream);

// Cast among f32, f16, bf16, int32, int64, bool, uint8, int8, as the CPU does it on x86:
// float to int64 truncates toward zero, NaN / out of range giving INT64_MIN; float to the
// narrower integers goes through int32 (NaN / out of int32 range give INT32_MIN) and keeps the
// low bits; integers narrow by keeping the low bits; anything to bool is `!= 0` (NaN is true).
bool cast_supported(DType from, DType to);
Status launch_cast(DType from, DType to, const void* in, void* out, int64_t n, void* stream);

}  // namespace onnx_genai::cuda
