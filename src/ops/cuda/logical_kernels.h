// Launch interface of the CUDA comparison / logical ops and Where (logical_kernels.cu). No CUDA
// headers needed.
//
// Semantics are the CPU kernels' (ops/cpu/binary.cc): comparisons of f16 / bf16 compare the
// values as floats (NaN compares false, Equal included); And / Or / Xor read bool bytes as
// `!= 0`; Where picks x where cond != 0, else y, moving bytes of any 1, 2, 4 or 8-byte dtype.
// Every output is written in full; inputs are read through numpy broadcasting.
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// Rank of the merged broadcast the kernels index (ops/broadcast.h merges dims first).
inline constexpr int kMaxLogicalRank = 8;

// The output walked as `rank` merged dims; operand k advances strides[k][d] elements along dim d
// (0 where it is broadcast).
struct BroadcastIndex {
  int64_t n = 0;
  int rank = 0;
  int64_t dims[kMaxLogicalRank] = {};
  int64_t strides[3][kMaxLogicalRank] = {};
};

enum class CompareOp { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual, kAnd, kOr, kXor };

// out (bool) = op(a, b); a and b have `dtype`.
struct CompareArgs {
  CompareOp op = CompareOp::kEqual;
  DType dtype = DType::kF32;
  BroadcastIndex index;
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
};

// Equal on f32, f16, bf16, int8, uint8, int32, int64 and bool; the orderings on those but bool;
// And / Or / Xor on bool.
bool compare_supported(CompareOp op, DType dtype);
Status launch_compare(const CompareArgs& args, void* stream);

struct WhereArgs {
  int elem_bytes = 4;  // x, y and out; 1, 2, 4 or 8
  BroadcastIndex index;  // operands: cond, x, y
  const void* cond = nullptr;
  const void* x = nullptr;
  const void* y = nullptr;
  void* out = nullptr;
};

Status launch_where(const WhereArgs& args, void* stream);

}  // namespace onnx_genai::cuda
