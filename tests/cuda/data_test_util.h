// Helpers shared by the CUDA tests of the data-movement, mask and softmax-style ops
// (layout_test.cc, logical_test.cc, softmax_test.cc, mean_test.cc): attribute setters, int64
// inputs, random tensors of any dtype, small random shapes, and a byte-exact comparison for ops
// that only move bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace onnx_genai::testing {

inline void set_ints(Node& node, const std::string& name, std::vector<int64_t> values) {
  node.attrs.set(name, Attribute{.kind = Attribute::Kind::kInts, .ints = std::move(values)});
}

inline Tensor i64_tensor(const std::vector<int64_t>& values) {
  return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(values.size())}, values);
}

// Floats uniform in [lo, hi) (rounded to the dtype); integers in [lo, hi]; bool 0 / 1.
inline Tensor random_values(DType dtype, const Shape& shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  if (dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16) {
    return random_float_tensor(dtype, shape, rng, lo, hi);
  }
  Tensor t = Tensor::allocate(dtype, shape).value();
  std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = dist(rng);
    switch (dtype) {
      case DType::kBool: t.data<uint8_t>()[i] = static_cast<uint8_t>(v & 1); break;
      case DType::kI8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
      case DType::kU8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
      case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
      case DType::kI64: t.data<int64_t>()[i] = v; break;
      default: ADD_FAILURE() << "no random values for " << dtype_name(dtype);
    }
  }
  return t;
}

// Rank `rank`, dims drawn from `choices`, random dims halved until at most `max_numel` elements.
inline Shape random_dims(std::mt19937& rng, int rank, const std::vector<int64_t>& choices,
                         int64_t max_numel = int64_t{1} << 16) {
  std::vector<int64_t> dims;
  for (int d = 0; d < rank; ++d) dims.push_back(choices[rng() % choices.size()]);
  Shape shape(std::move(dims));
  while (shape.numel() > max_numel) {
    int64_t& dim = shape[static_cast<int>(rng() % static_cast<unsigned>(rank))];
    dim = (dim + 1) / 2;
  }
  return shape;
}

// Same dtype, shape and bytes (what a pure data movement must give).
inline void expect_same_bytes(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), static_cast<size_t>(want.nbytes())), 0) << what << ": bytes differ";
}

// Runs `node` on both sides and expects identical bytes in every output.
inline void expect_same_on_both(const Node& node, const std::vector<Tensor>& inputs, const cuda::Stream& stream,
                                const std::string& what) {
  Result<std::vector<Tensor>> cpu = run_on_cpu(node, inputs);
  ASSERT_TRUE(cpu.is_ok()) << what << ": " << cpu.status().message();
  Result<std::vector<Tensor>> gpu = run_on_cuda(node, inputs, stream);
  ASSERT_TRUE(gpu.is_ok()) << what << ": " << gpu.status().message();
  for (size_t i = 0; i < cpu->size(); ++i) expect_same_bytes((*gpu)[i], (*cpu)[i], what + " output " + std::to_string(i));
}

// The CUDA side turns the node down (so a session runs it on the CPU), with `message` in its error.
inline void expect_cuda_rejects(const Node& node, const std::vector<Tensor>& inputs, const std::string& message,
                                const std::string& what) {
  Result<PreparedNode> prepared = prepare_node(node, inputs, DeviceType::kCuda);
  ASSERT_FALSE(prepared.is_ok()) << what << ": expected an error";
  EXPECT_NE(prepared.status().message().find(message), std::string::npos) << what << ": " << prepared.status().message();
}

}  // namespace onnx_genai::testing
