// Launch interface of the CUDA gather kernels (gather_kernels.cu): Gather and com.microsoft
// GatherBlockQuantized. No CUDA headers needed.
//
// Index values are only known on the device, so an out-of-range index cannot fail the run the
// way the CPU kernel does (it returns an error): its output rows are written as zeros instead.
// Callers that need the error validate indices on the host before upload (token ids are).
#pragma once

#include <cstdint>

#include "onnx_genai/dtype.h"
#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// data [outer, axis_n, row_bytes] gathered by indices [n] (int32 / int64, -axis_n <= i < axis_n)
// into out [outer, n, row_bytes]; rows are moved as bytes, 16 at a time when sizes and pointers
// allow (the embedding lookup: axis 0, rows of hidden_size elements).
struct GatherArgs {
  int64_t outer = 1, axis_n = 0, n = 0, row_bytes = 0;
  DType index_dtype = DType::kI64;
  const void* data = nullptr;
  const void* indices = nullptr;
  void* out = nullptr;
};

Status launch_gather(const GatherArgs& args, void* stream);

// GatherElements: element i of indices (same rank as data, dims `dims`) takes the data element
// at i's coordinates with coordinate `axis` replaced by the index; elements of elem_bytes (1, 2,
// 4 or 8). The genai layer's logit-row selection is one: hidden [batch, 1, hidden_size] picked
// from [batch, positions, hidden_size].
inline constexpr int kGatherElementsMaxRank = 8;
struct GatherElementsArgs {
  int rank = 0, axis = 0;
  int64_t dims[kGatherElementsMaxRank] = {};          // indices dims (= output dims)
  int64_t data_strides[kGatherElementsMaxRank] = {};  // data element strides
  int64_t axis_n = 0, total = 0;
  int elem_bytes = 4;
  DType index_dtype = DType::kI64;
  const void* data = nullptr;
  const void* indices = nullptr;
  void* out = nullptr;
};

Status launch_gather_elements(const GatherElementsArgs& args, void* stream);

// GatherBlockQuantized (layout in ops/schema/gather_block_quantized.h). codes = [outer, axis_n,
// slice] around gather_axis; the output is [outer, n, slice] in `dtype` (the scales' dtype),
// each element (code - zero_point) * scale in f32. q_len / q_inner describe quantize_axis within
// the codes; blocks is the scales' dim there.
struct GatherBlockQuantizedArgs {
  DType dtype = DType::kF32;
  DType index_dtype = DType::kI64;
  int64_t outer = 1, axis_n = 0, n = 0, slice = 0;
  int64_t q_len = 0, q_inner = 1, blocks = 0, block_size = 0;
  int bits = 4;
  bool is_signed = false;      // int4: codes are two's complement nibbles
  int64_t zp_row_bytes = 0;    // uint8 below 8 bits: zero points packed per row of blocks
  int32_t default_zero_point = 0;
  // quantize_axis is the last one, gather_axis before it and rows hold whole bytes: each
  // gathered slice is whole rows, decoded 8 codes per thread (bits 4).
  bool by_rows = false;
  const void* data = nullptr;
  const void* indices = nullptr;
  const void* scales = nullptr;
  const void* zero_points = nullptr;  // null: default_zero_point
  void* out = nullptr;
};

Status launch_gather_block_quantized(const GatherBlockQuantizedArgs& args, void* stream);

}  // namespace onnx_genai::cuda
