// Comparisons, And / Or / Xor and Where on the GPU (see logical_kernels.h).
//
// Memory-access plan: one thread per output element, grid-stride; the element index is split
// over the merged broadcast dims (innermost first, 32-bit arithmetic unless the output passes
// 2^30 elements) to find each operand's element. These ops touch masks and a few rows per
// decode step, so they are bound by launch latency, not by the index arithmetic.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/logical_kernels.h"

namespace onnx_genai::cuda {

namespace {

using CompareTypes = TypeList<float, __half, __nv_bfloat16, int8_t, uint8_t, int32_t, int64_t, bool>;

template <typename Index, int kOperands>
__device__ __forceinline__ void operand_offsets(const BroadcastIndex& ix, Index i, Index (&at)[kOperands]) {
#pragma unroll
  for (int k = 0; k < kOperands; ++k) at[k] = 0;
#pragma unroll
  for (int d = kMaxLogicalRank - 1; d >= 0; --d) {
    if (d >= ix.rank) continue;
    const Index size = static_cast<Index>(ix.dims[d]);
    const Index idx = i % size;
    i /= size;
#pragma unroll
    for (int k = 0; k < kOperands; ++k) at[k] += idx * static_cast<Index>(ix.strides[k][d]);
  }
}

template <typename T>
__device__ __forceinline__ auto compare_value(T v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) return to_float(v);
  else return v;
}

template <typename T, typename Index>
__global__ void compare_kernel(CompareArgs a) {
  const auto* x = static_cast<const T*>(a.a);
  const auto* y = static_cast<const T*>(a.b);
  auto* out = static_cast<bool*>(a.out);
  const Index n = static_cast<Index>(a.index.n);
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    Index at[2];
    operand_offsets<Index, 2>(a.index, i, at);
    const auto u = compare_value(x[at[0]]);
    const auto v = compare_value(y[at[1]]);
    const decltype(u) zero = 0;
    bool r = false;
    switch (a.op) {
      case CompareOp::kEqual: r = u == v; break;
      case CompareOp::kLess: r = u < v; break;
      case CompareOp::kGreater: r = u > v; break;
      case CompareOp::kLessOrEqual: r = u <= v; break;
      case CompareOp::kGreaterOrEqual: r = u >= v; break;
      case CompareOp::kAnd: r = (u != zero) && (v != zero); break;
      case CompareOp::kOr: r = (u != zero) || (v != zero); break;
      case CompareOp::kXor: r = (u != zero) != (v != zero); break;
    }
    out[i] = r;
  }
}

template <typename Unit, typename Index>
__global__ void where_kernel(WhereArgs a) {
  const auto* cond = static_cast<const uint8_t*>(a.cond);
  const auto* x = static_cast<const Unit*>(a.x);
  const auto* y = static_cast<const Unit*>(a.y);
  auto* out = static_cast<Unit*>(a.out);
  const Index n = static_cast<Index>(a.index.n);
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    Index at[3];
    operand_offsets<Index, 3>(a.index, i, at);
    out[i] = cond[at[0]] != 0 ? x[at[1]] : y[at[2]];
  }
}

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 8192)); }

// 32-bit indexing while the grid-stride increment cannot overflow (operand offsets are at most
// the output index).
bool wide_index(const BroadcastIndex& ix) { return ix.n > (int64_t{1} << 30); }

}  // namespace

bool compare_supported(CompareOp op, DType dtype) {
  const bool logical = op == CompareOp::kAnd || op == CompareOp::kOr || op == CompareOp::kXor;
  if (logical) return dtype == DType::kBool;
  if (op != CompareOp::kEqual && dtype == DType::kBool) return false;
  return listed(CompareTypes{}, dtype);
}

Status launch_compare(const CompareArgs& a, void* stream) {
  if (!compare_supported(a.op, a.dtype)) return OG_ERROR("compare: unsupported dtype ", dtype_name(a.dtype));
  if (a.index.n == 0) return Status::ok();
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch(CompareTypes{}, a.dtype, [&]<typename T>() {
    if (wide_index(a.index)) compare_kernel<T, int64_t><<<blocks_for(a.index.n), kThreads, 0, s>>>(a);
    else compare_kernel<T, int32_t><<<blocks_for(a.index.n), kThreads, 0, s>>>(a);
  });
  return launch_status("compare");
}

Status launch_where(const WhereArgs& a, void* stream) {
  if (a.index.n == 0) return Status::ok();
  const auto s = static_cast<cudaStream_t>(stream);
  const auto run = [&]<typename Unit>() {
    if (wide_index(a.index)) where_kernel<Unit, int64_t><<<blocks_for(a.index.n), kThreads, 0, s>>>(a);
    else where_kernel<Unit, int32_t><<<blocks_for(a.index.n), kThreads, 0, s>>>(a);
  };
  switch (a.elem_bytes) {
    case 1: run.template operator()<uint8_t>(); break;
    case 2: run.template operator()<uint16_t>(); break;
    case 4: run.template operator()<uint32_t>(); break;
    case 8: run.template operator()<uint64_t>(); break;
    default: return OG_ERROR("where: no kernel for ", a.elem_bytes, "-byte elements");
  }
  return launch_status("where");
}

}  // namespace onnx_genai::cuda
