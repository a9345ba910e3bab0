// seqlens_k and the additive bias of an ONNX Attention step (see onnx_attention_kernels.h).
//
// Memory-access plan: one thread per bias element (b, h, s, j), grid-stride, j innermost so a
// warp writes consecutive bias elements and reads consecutive mask elements of one row; the
// first B threads also write seqlens_k. The bias is at most the size of a full mask: this runs
// once per node and step, bound by launch latency at decode and by the bias write in a prompt.
#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/onnx_attention_kernels.h"

namespace onnx_genai::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;  // many waves on an H200; the grid-stride loop covers the rest

// std::clamp is host-only without --expt-relaxed-constexpr.
__device__ __forceinline__ int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

template <typename T>
__global__ void __launch_bounds__(kThreads) onnx_attention_setup_kernel(OnnxAttentionSetup a) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (first < a.batch) a.seqlens_k[first] = static_cast<int32_t>(a.total_len - 1);
  if (a.bias == nullptr) return;
  const int64_t t = a.total_len, rows = a.q_len;
  const int64_t n = a.bias_batch * a.bias_heads * rows * t;
  T* bias = static_cast<T*>(a.bias);
  for (int64_t i = first; i < n; i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t j = i % t, s = i / t % rows, h = i / (t * rows) % a.bias_heads, b = i / (t * rows * a.bias_heads);
    bool keep = true;
    float add = 0.0f;
    if (a.nonpad_kv_seqlen != nullptr) {
      const int64_t len = a.nonpad_kv_seqlen[b];
      keep = j < clamp64(len, 0, t);
      if (a.causal_nonpad) keep = keep && j <= clamp64(len, 0, t + rows) - rows + s;
    }
    if (a.mask != nullptr) {
      const int64_t at = b * a.mask_batch_stride + h * a.mask_head_stride + s * a.mask_row_stride + j;
      if (a.mask_bool) keep = keep && static_cast<const uint8_t*>(a.mask)[at] != 0;
      else add = to_float(static_cast<const T*>(a.mask)[at]);
    }
    bias[i] = from_float<T>(keep ? add : -__builtin_huge_valf());
  }
}

}  // namespace

Status launch_onnx_attention_setup(const OnnxAttentionSetup& a, void* stream) {
  if (a.batch == 0) return Status::ok();
  const int64_t elements = a.bias != nullptr ? a.bias_batch * a.bias_heads * a.q_len * a.total_len : 0;
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>((std::max(elements, a.batch) + kThreads - 1) / kThreads, 1, kMaxBlocks));
  const auto s = static_cast<cudaStream_t>(stream);
  const bool known = dispatch_float_type(a.dtype, [&]<typename T>() { onnx_attention_setup_kernel<T><<<blocks, kThreads, 0, s>>>(a); });
  if (!known) return OG_ERROR("ONNX Attention setup: unsupported dtype ", dtype_name(a.dtype));
  return launch_status("ONNX Attention setup kernel");
}

}  // namespace onnx_genai::cuda
