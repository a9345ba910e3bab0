// Gather, GatherElements and com.microsoft GatherBlockQuantized on the GPU.
//
// Memory-access plan, Gather: the output is [outer, n, row] with rows of row_bytes; a
// grid-stride loop over the output in copy units (16 bytes when row_bytes and both pointers
// allow, else the widest of 8 / 4 / 2 / 1 that does) reads the unit of the indexed source row.
// Consecutive threads take consecutive units of a row, so each row moves as coalesced 16-byte
// accesses (an embedding row of 4096 f16 is 512 units); an out-of-range index writes zeros.
//
// GatherElements: one thread per output element, its data offset from its coordinates.
//
// GatherBlockQuantized: only gathered codes are decoded. When each slice is whole rows of
// 4-bit codes along the last axis (the int4 embedding table), a thread decodes 8 codes from one
// 32-bit load (8 codes never straddle a block: block_size is a power of two >= 16), with one
// scale and one zero point, and stores 8 outputs as one access. Any other layout decodes one
// code per thread with the CPU kernel's index arithmetic.
#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/gather_kernels.h"

namespace onnx_genai::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;  // the grid-stride loop covers the rest
constexpr int kCodesPerThread = 8;       // bits-4 row path: one 32-bit load

unsigned grid_for(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename F>
void with_index_type(DType dtype, F&& fn) {
  if (dtype == DType::kI32) fn.template operator()<int32_t>();
  else fn.template operator()<int64_t>();
}

// The row an index selects along a dim of size n (negative from the end), or -1 when out of range.
template <typename I>
__device__ __forceinline__ int64_t wrap_index(I i, int64_t n) {
  const int64_t w = i < 0 ? static_cast<int64_t>(i) + n : static_cast<int64_t>(i);
  return w >= 0 && w < n ? w : -1;
}

// ---- Gather --------------------------------------------------------------------------------------

template <typename Unit, typename I>
__global__ void gather_kernel(GatherArgs a) {
  const int64_t units = a.row_bytes / static_cast<int64_t>(sizeof(Unit));
  const int64_t total = a.outer * a.n * units;
  const Unit* src = static_cast<const Unit*>(a.data);
  const I* idx = static_cast<const I*>(a.indices);
  Unit* dst = static_cast<Unit*>(a.out);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
    const int64_t u = t / units, k = t - u * units;  // output row, unit in the row
    const int64_t o = u / a.n;
    const int64_t row = wrap_index(idx[u - o * a.n], a.axis_n);
    Unit v{};
    if (row >= 0) v = src[(o * a.axis_n + row) * units + k];
    dst[t] = v;
  }
}

template <typename Unit>
void launch_gather_units(const GatherArgs& a, cudaStream_t s) {
  const int64_t total = a.outer * a.n * (a.row_bytes / static_cast<int64_t>(sizeof(Unit)));
  with_index_type(a.index_dtype, [&]<typename I>() { gather_kernel<Unit, I><<<grid_for(total), kThreads, 0, s>>>(a); });
}

// ---- GatherElements ------------------------------------------------------------------------------

// One thread per output element (the rows picked are short: one hidden state per sequence).
template <typename Unit, typename I>
__global__ void gather_elements_kernel(GatherElementsArgs a) {
  const Unit* src = static_cast<const Unit*>(a.data);
  const I* idx = static_cast<const I*>(a.indices);
  Unit* dst = static_cast<Unit*>(a.out);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < a.total; t += stride) {
    int64_t offset = 0, rem = t;
    for (int d = a.rank - 1; d >= 0; --d) {
      const int64_t c = rem % a.dims[d];
      rem /= a.dims[d];
      if (d != a.axis) offset += c * a.data_strides[d];
    }
    const int64_t pos = wrap_index(idx[t], a.axis_n);
    dst[t] = pos >= 0 ? src[offset + pos * a.data_strides[a.axis]] : Unit{};
  }
}

// ---- GatherBlockQuantized ------------------------------------------------------------------------

using QArgs = GatherBlockQuantizedArgs;

// Code `i` of an array of `bits`-wide codes packed low bits first.
__device__ __forceinline__ int32_t packed_code(const uint8_t* p, int64_t i, int bits) {
  if (bits == 8) return p[i];
  const int per_byte = 8 / bits;
  return (p[i / per_byte] >> (i % per_byte * bits)) & ((1 << bits) - 1);
}

__device__ __forceinline__ int32_t code_value(const QArgs& a, int32_t code) {
  return a.is_signed && code >= 8 ? code - 16 : code;
}

// The zero point of the block with flat scales index `scale_index`.
__device__ __forceinline__ int32_t zero_point(const QArgs& a, int64_t scale_index) {
  const auto* zp = static_cast<const uint8_t*>(a.zero_points);
  if (zp == nullptr) return a.default_zero_point;
  if (a.zp_row_bytes == 0) return code_value(a, packed_code(zp, scale_index, a.bits));
  return packed_code(zp + scale_index / a.blocks * a.zp_row_bytes, scale_index % a.blocks, a.bits);
}

// The flat code index of element `w` of output slice `u`, or -1 for an out-of-range index.
template <typename I>
__device__ __forceinline__ int64_t source_code(const QArgs& a, const I* idx, int64_t u, int64_t w) {
  const int64_t o = u / a.n;
  const int64_t row = wrap_index(idx[u - o * a.n], a.axis_n);
  return row < 0 ? -1 : (o * a.axis_n + row) * a.slice + w;
}

template <typename T, typename I>
__global__ void gather_block_quantized_kernel(QArgs a) {
  const int64_t total = a.outer * a.n * a.slice;
  const auto* data = static_cast<const uint8_t*>(a.data);
  const T* scales = static_cast<const T*>(a.scales);
  const I* idx = static_cast<const I*>(a.indices);
  T* out = static_cast<T*>(a.out);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t u = e / a.slice;
    const int64_t d = source_code(a, idx, u, e - u * a.slice);
    float v = 0.0f;
    if (d >= 0) {
      const int64_t outer = d / (a.q_len * a.q_inner), along = d / a.q_inner % a.q_len, inner = d % a.q_inner;
      const int64_t scale_index = (outer * a.blocks + along / a.block_size) * a.q_inner + inner;
      v = static_cast<float>(code_value(a, packed_code(data, d, a.bits)) - zero_point(a, scale_index)) *
          to_float(scales[scale_index]);
    }
    out[e] = from_float<T>(v);
  }
}

// Rows of 4-bit codes along the last axis: 8 codes per thread (q_len and slice multiples of 8).
template <typename T, typename I>
__global__ void gather_block_quantized_rows_kernel(QArgs a) {
  const int64_t groups = a.outer * a.n * a.slice / kCodesPerThread;
  const auto* data = static_cast<const uint8_t*>(a.data);
  const T* scales = static_cast<const T*>(a.scales);
  const I* idx = static_cast<const I*>(a.indices);
  T* out = static_cast<T*>(a.out);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) {
    const int64_t e = g * kCodesPerThread;
    const int64_t u = e / a.slice;
    const int64_t d = source_code(a, idx, u, e - u * a.slice);
    Pack<T, kCodesPerThread> pack;
    if (d < 0) {
#pragma unroll
      for (int t = 0; t < kCodesPerThread; ++t) pack.v[t] = from_float<T>(0.0f);
    } else {
      const int64_t r = d / a.q_len;
      const int64_t scale_index = r * a.blocks + (d - r * a.q_len) / a.block_size;
      const float scale = to_float(scales[scale_index]);
      const int32_t zp = zero_point(a, scale_index);
      const uint32_t word = *reinterpret_cast<const uint32_t*>(data + d / 2);
#pragma unroll
      for (int t = 0; t < kCodesPerThread; ++t) {
        const int32_t code = code_value(a, static_cast<int32_t>((word >> (4 * t)) & 0xFu));
        pack.v[t] = from_float<T>(static_cast<float>(code - zp) * scale);
      }
    }
    *reinterpret_cast<Pack<T, kCodesPerThread>*>(out + e) = pack;
  }
}

}  // namespace

Status launch_gather(const GatherArgs& a, void* stream) {
  if (a.outer * a.n * a.row_bytes == 0) return Status::ok();
  const auto s = static_cast<cudaStream_t>(stream);
  const auto fits = [&](int64_t unit) {
    return a.row_bytes % unit == 0 && aligned(a.data, static_cast<size_t>(unit)) && aligned(a.out, static_cast<size_t>(unit));
  };
  if (fits(16)) launch_gather_units<uint4>(a, s);
  else if (fits(8)) launch_gather_units<uint2>(a, s);
  else if (fits(4)) launch_gather_units<uint32_t>(a, s);
  else if (fits(2)) launch_gather_units<uint16_t>(a, s);
  else launch_gather_units<uint8_t>(a, s);
  return launch_status("gather_kernel");
}

Status launch_gather_elements(const GatherElementsArgs& a, void* stream) {
  if (a.total == 0) return Status::ok();
  const auto s = static_cast<cudaStream_t>(stream);
  const auto launch = [&]<typename Unit>() {
    with_index_type(a.index_dtype, [&]<typename I>() {
      gather_elements_kernel<Unit, I><<<grid_for(a.total), kThreads, 0, s>>>(a);
    });
  };
  switch (a.elem_bytes) {
    case 1: launch.template operator()<uint8_t>(); break;
    case 2: launch.template operator()<uint16_t>(); break;
    case 4: launch.template operator()<uint32_t>(); break;
    case 8: launch.template operator()<uint2>(); break;
    default: return OG_ERROR("GatherElements: ", a.elem_bytes, "-byte elements are not supported");
  }
  return launch_status("gather_elements_kernel");
}

Status launch_gather_block_quantized(const GatherBlockQuantizedArgs& a, void* stream) {
  const int64_t total = a.outer * a.n * a.slice;
  if (total == 0) return Status::ok();
  if (a.q_len <= 0 || a.q_inner <= 0 || a.blocks <= 0 || a.block_size <= 0) {
    return OG_ERROR("GatherBlockQuantized: bad quantisation geometry");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  const bool known = dispatch_float_type(a.dtype, [&]<typename T>() {
    const bool rows = a.by_rows && a.bits == 4 && a.q_len % kCodesPerThread == 0 && aligned(a.data, 4) &&
                      aligned(a.out, sizeof(T) * kCodesPerThread);
    with_index_type(a.index_dtype, [&]<typename I>() {
      if (rows) gather_block_quantized_rows_kernel<T, I><<<grid_for(total / kCodesPerThread), kThreads, 0, s>>>(a);
      else gather_block_quantized_kernel<T, I><<<grid_for(total), kThreads, 0, s>>>(a);
    });
  });
  if (!known) return OG_ERROR("GatherBlockQuantized: unsupported output dtype ", dtype_name(a.dtype));
  return launch_status("gather_block_quantized_kernel");
}

}  // namespace onnx_genai::cuda
