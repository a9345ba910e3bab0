// Gather, GatherElements and com.microsoft GatherBlockQuantized: CUDA kernels (ops/cuda/gather.cc) against the
// CPU kernels on random shapes, axes, element sizes and index types (negative indices
// included), the embedding lookup, and the 4-bit / uint8 block-quantised layouts.
//
// One documented difference: an out-of-range index is an error on the CPU (checked on the host
// before copying) but writes zeros on the GPU, where the index is only read by the kernel. The
// OutOfRange tests pin both behaviours down.
#include <cstring>
#include <string>

#include "cuda_test_util.h"

namespace onnx_genai::testing {
namespace {

Tensor random_indices(DType dtype, const Shape& shape, int64_t dim, std::mt19937& rng) {
  Tensor t = Tensor::allocate(dtype, shape).value();
  std::uniform_int_distribution<int64_t> dist(-dim, dim - 1);  // negative ones count from the end
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = dist(rng);
    if (dtype == DType::kI32) t.data<int32_t>()[i] = static_cast<int32_t>(v);
    else t.data<int64_t>()[i] = v;
  }
  return t;
}

Tensor random_data(DType dtype, const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::allocate(dtype, shape).value();
  auto* bytes = static_cast<uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(dtype == DType::kBool ? rng() % 2 : rng());
  return t;
}

// Gather moves bytes: the outputs must be identical.
void expect_same_bytes(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(std::memcmp(got.raw(), want.raw(), static_cast<size_t>(want.nbytes())), 0) << what << ": outputs differ";
}

class GatherCuda : public CudaKernelTest {
 protected:
  void compare_bytes(const Node& node, const std::vector<Tensor>& inputs, const std::string& what) {
    Result<std::vector<Tensor>> cpu = run_on_cpu(node, inputs);
    ASSERT_TRUE(cpu.is_ok()) << what << ": " << cpu.status().message();
    Result<std::vector<Tensor>> gpu = run_on_cuda(node, inputs, *stream_);
    ASSERT_TRUE(gpu.is_ok()) << what << ": " << gpu.status().message();
    expect_same_bytes((*gpu)[0], (*cpu)[0], what);
  }
};

TEST_F(GatherCuda, AnyAxisAndElementSizeMatchesCpu) {
  constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI8, DType::kBool};
  for (int trial = 0; trial < 120; ++trial) {
    const DType dtype = kDtypes[trial % std::size(kDtypes)];
    const int rank = 1 + static_cast<int>(rng_() % 4);
    std::vector<int64_t> dims;
    for (int d = 0; d < rank; ++d) dims.push_back(1 + static_cast<int64_t>(rng_() % 9) * (rng_() % 4 == 0 ? 7 : 1));
    const Shape data_shape(dims);
    const int64_t axis_attr = std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng_);  // axis 0, 1, -1, ...
    const int64_t axis_n = data_shape[static_cast<int>(axis_attr < 0 ? axis_attr + rank : axis_attr)];
    const Shape index_shapes[] = {Shape{}, Shape{5}, Shape{2, 3}, Shape{0}};
    const Shape index_shape = index_shapes[trial / 7 % 4];
    const DType index_dtype = trial % 2 ? DType::kI32 : DType::kI64;
    std::vector<Tensor> inputs{random_data(dtype, data_shape, rng_), random_indices(index_dtype, index_shape, axis_n, rng_)};
    CudaNode spec("Gather", "", {true}, 13);
    spec.attr_int("axis", axis_attr);
    compare_bytes(spec.with_inputs(inputs), inputs,
                  "Gather " + std::string(dtype_name(dtype)) + data_shape.to_string() + " axis " + std::to_string(axis_attr) +
                      " indices " + std::string(dtype_name(index_dtype)) + index_shape.to_string());
  }
}

TEST_F(GatherCuda, EmbeddingLookupMatchesCpu) {
  const struct {
    DType dtype;
    int64_t vocab, hidden;
  } kTables[] = {{DType::kF16, 1000, 4096}, {DType::kBF16, 513, 896}, {DType::kF32, 300, 1536}, {DType::kF16, 64, 1001}};
  for (const auto& table : kTables) {
    for (const Shape& ids : {Shape{1, 1}, Shape{2, 37}}) {
      std::vector<Tensor> inputs{random_float_tensor(table.dtype, Shape{table.vocab, table.hidden}, rng_),
                                 random_indices(DType::kI64, ids, table.vocab, rng_)};
      CudaNode spec("Gather", "", {true}, 13);
      compare_bytes(spec.with_inputs(inputs), inputs,
                    "embedding " + std::string(dtype_name(table.dtype)) + " [" + std::to_string(table.vocab) + ", " +
                        std::to_string(table.hidden) + "] ids " + ids.to_string());
    }
  }
}

TEST_F(GatherCuda, GatherElementsAnyAxisAndElementSizeMatchesCpu) {
  constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kI64, DType::kI8, DType::kBF16};
  for (int trial = 0; trial < 100; ++trial) {
    const DType dtype = kDtypes[trial % std::size(kDtypes)];
    const int rank = 1 + static_cast<int>(rng_() % 4);
    std::vector<int64_t> dims, index_dims;
    for (int d = 0; d < rank; ++d) dims.push_back(1 + static_cast<int64_t>(rng_() % 6) * (rng_() % 3 == 0 ? 5 : 1));
    const int64_t axis_attr = std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng_);
    const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + rank : axis_attr);
    // Off the axis, indices are no larger than data; along it, any length.
    for (int d = 0; d < rank; ++d) {
      index_dims.push_back(d == axis ? 1 + static_cast<int64_t>(rng_() % 7) : 1 + static_cast<int64_t>(rng_()) % dims[static_cast<size_t>(d)]);
    }
    const DType index_dtype = trial % 2 ? DType::kI32 : DType::kI64;
    std::vector<Tensor> inputs{random_data(dtype, Shape(dims), rng_),
                               random_indices(index_dtype, Shape(index_dims), dims[static_cast<size_t>(axis)], rng_)};
    CudaNode spec("GatherElements", "", {true}, 13);
    spec.attr_int("axis", axis_attr);
    compare_bytes(spec.with_inputs(inputs), inputs,
                  "GatherElements " + std::string(dtype_name(dtype)) + Shape(dims).to_string() + " axis " +
                      std::to_string(axis_attr) + " indices " + Shape(index_dims).to_string());
  }
}

// The genai layer's logit-row pick: each sequence's last fed position of [batch, positions, hidden].
TEST_F(GatherCuda, GatherElementsPicksLogitRowsAsTheCpu) {
  const int64_t batch = 3, positions = 37, hidden = 896;
  Tensor rows = Tensor::allocate(DType::kI64, Shape{batch, 1, hidden}).value();
  for (int64_t b = 0; b < batch; ++b) std::fill_n(rows.data<int64_t>() + b * hidden, hidden, positions - 1 - 5 * b);
  std::vector<Tensor> inputs{random_float_tensor(DType::kF16, Shape{batch, positions, hidden}, rng_), rows};
  CudaNode spec("GatherElements", "", {true}, 13);
  spec.attr_int("axis", 1);
  compare_bytes(spec.with_inputs(inputs), inputs, "logit rows");
}

// CPU: an error naming the node and the index. GPU: zeros for that row, the others gathered.
TEST_F(GatherCuda, OutOfRangeIndexGivesZerosOnTheDevice) {
  Tensor data = random_float_tensor(DType::kF32, Shape{4, 8}, rng_, 1.0f, 2.0f);
  Tensor ids = Tensor::from_vector<int64_t>(Shape{3}, std::vector<int64_t>{1, 4, -5});
  const std::vector<Tensor> inputs{data, ids};
  CudaNode spec("Gather", "", {true}, 13);
  const Node& node = spec.with_inputs(inputs);
  Result<std::vector<Tensor>> cpu = run_on_cpu(node, inputs);
  ASSERT_FALSE(cpu.is_ok());
  EXPECT_NE(cpu.status().message().find("cuda_test_Gather"), std::string::npos) << cpu.status().message();
  Result<std::vector<Tensor>> gpu = run_on_cuda(node, inputs, *stream_);
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  const float* out = (*gpu)[0].data<float>();
  for (int64_t j = 0; j < 8; ++j) {
    EXPECT_EQ(out[j], data.data<float>()[8 + j]) << "row 0 (index 1), element " << j;
    EXPECT_EQ(out[8 + j], 0.0f) << "row 1 (index 4), element " << j;
    EXPECT_EQ(out[16 + j], 0.0f) << "row 2 (index -5), element " << j;
  }
}

// ---- GatherBlockQuantized -------------------------------------------------------------------

struct QuantCase {
  DType data_dtype;  // kU4, kI4 or kU8
  int64_t bits;
  Shape codes;       // data shape in codes
  int gather_axis, quantize_axis;
  int64_t block_size;
  bool zero_points;
  DType scale_dtype;
};

std::string describe(const QuantCase& c) {
  return std::string(dtype_name(c.data_dtype)) + " bits " + std::to_string(c.bits) + " codes " + c.codes.to_string() +
         " gather_axis " + std::to_string(c.gather_axis) + " quantize_axis " + std::to_string(c.quantize_axis) + " block " +
         std::to_string(c.block_size) + (c.zero_points ? " zp " : " ") + std::string(dtype_name(c.scale_dtype));
}

// data, scales and (optionally) zero points for a case, laid out as the schema wants.
std::vector<Tensor> quantized_inputs(const QuantCase& c, const Tensor& indices, std::mt19937& rng) {
  const int q = c.quantize_axis, last = c.codes.rank() - 1;
  Shape data_shape = c.codes;
  if (c.data_dtype == DType::kU8) data_shape = [&] { auto d = c.codes.dims(); d[static_cast<size_t>(last)] = d.back() * c.bits / 8; return Shape(d); }();
  Shape scale_shape = [&] { auto d = c.codes.dims(); d[static_cast<size_t>(q)] = (d[static_cast<size_t>(q)] + c.block_size - 1) / c.block_size; return Shape(d); }();
  std::vector<Tensor> inputs{random_data(c.data_dtype, data_shape, rng), indices,
                             random_float_tensor(c.scale_dtype, scale_shape, rng, -0.2f, 0.2f)};
  if (c.zero_points) {
    Shape zp_shape = scale_shape;
    if (c.data_dtype == DType::kU8) {
      auto d = scale_shape.dims();
      d[static_cast<size_t>(q)] = (d[static_cast<size_t>(q)] * c.bits + 7) / 8;
      zp_shape = Shape(d);
    }
    inputs.push_back(random_data(c.data_dtype, zp_shape, rng));
  }
  return inputs;
}

using GatherBlockQuantizedCuda = CudaKernelTest;

TEST_F(GatherBlockQuantizedCuda, MatchesCpuOnEveryLayout) {
  std::vector<QuantCase> cases;
  constexpr int64_t kBlocks[] = {16, 32, 64, 128, 256};
  constexpr DType kScales[] = {DType::kF32, DType::kF16, DType::kBF16};
  int k = 0;
  for (const DType data : {DType::kU4, DType::kI4}) {
    for (const int64_t cols : {int64_t{64}, int64_t{100}, int64_t{4096}, int64_t{33}}) {
      for (const bool zp : {false, true}) {
        const int64_t block = kBlocks[k % 5];
        const DType scales = kScales[k++ % 3];
        cases.push_back({data, 4, Shape{50, cols}, 0, 1, block, zp, scales});             // embedding table
        cases.push_back({data, 4, Shape{3, 20, cols}, 1, 2, block, zp, scales});          // outer > 1, by rows
        cases.push_back({data, 4, Shape{cols, 12}, 1, 0, block, zp, scales});             // quantised along dim 0
      }
    }
  }
  for (const int64_t bits : {int64_t{2}, int64_t{4}, int64_t{8}}) {
    for (const bool zp : {false, true}) {
      const int64_t block = kBlocks[k % 5];
      cases.push_back({DType::kU8, bits, Shape{40, 256}, 0, 1, block, zp, kScales[k++ % 3]});
      cases.push_back({DType::kU8, bits, Shape{40, 96}, 0, 1, 64, zp, kScales[k++ % 3]});
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const QuantCase& c = cases[i];
    const int64_t axis_n = c.codes[c.gather_axis];
    const Shape index_shape = i % 3 == 0 ? Shape{7} : i % 3 == 1 ? Shape{2, 5} : Shape{};
    const Tensor indices = random_indices(i % 2 ? DType::kI32 : DType::kI64, index_shape, axis_n, rng_);
    std::vector<Tensor> inputs = quantized_inputs(c, indices, rng_);
    CudaNode spec("GatherBlockQuantized", "com.microsoft", {true});
    spec.attr_int("gather_axis", c.gather_axis).attr_int("quantize_axis", c.quantize_axis);
    spec.attr_int("block_size", c.block_size).attr_int("bits", c.bits);
    compare(spec.with_inputs(inputs), inputs, "GatherBlockQuantized " + describe(c) + " indices " + index_shape.to_string());
  }
}

TEST_F(GatherBlockQuantizedCuda, OutOfRangeIndexGivesZerosOnTheDevice) {
  const QuantCase c{DType::kI4, 4, Shape{6, 64}, 0, 1, 32, true, DType::kF16};
  const Tensor indices = Tensor::from_vector<int32_t>(Shape{2}, std::vector<int32_t>{-7, 2});
  std::vector<Tensor> inputs = quantized_inputs(c, indices, rng_);
  CudaNode spec("GatherBlockQuantized", "com.microsoft", {true});
  spec.attr_int("block_size", c.block_size);
  const Node& node = spec.with_inputs(inputs);
  Result<std::vector<Tensor>> cpu = run_on_cpu(node, inputs);
  ASSERT_FALSE(cpu.is_ok());
  EXPECT_NE(cpu.status().message().find("cuda_test_GatherBlockQuantized"), std::string::npos) << cpu.status().message();
  Result<std::vector<Tensor>> gpu = run_on_cuda(node, inputs, *stream_);
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  for (int64_t j = 0; j < 64; ++j) EXPECT_EQ(static_cast<float>((*gpu)[0].data<Float16>()[j]), 0.0f) << "element " << j;
}

// Bad inputs fail in prepare with the node's name (no device needed).
TEST(GatherCudaErrors, BadInputsNameTheNode) {
  const auto expect_error = [](const Node& node, const std::vector<Tensor>& inputs, const std::string& want) {
    Result<PreparedNode> prepared = prepare_node(node, inputs, DeviceType::kCuda);
    ASSERT_FALSE(prepared.is_ok()) << want;
    EXPECT_NE(prepared.status().message().find(want), std::string::npos) << prepared.status().message();
  };
  std::mt19937 rng(7);
  {
    const std::vector<Tensor> inputs{random_data(DType::kI4, Shape{4, 8}, rng), random_indices(DType::kI64, Shape{2}, 4, rng)};
    CudaNode spec("Gather", "", {true}, 13);
    expect_error(spec.with_inputs(inputs), inputs, "cuda_test_Gather");
  }
  {
    const QuantCase c{DType::kU4, 4, Shape{6, 64}, 0, 1, 32, false, DType::kF32};
    const std::vector<Tensor> inputs = quantized_inputs(c, random_indices(DType::kI64, Shape{2}, 6, rng), rng);
    CudaNode spec("GatherBlockQuantized", "com.microsoft", {true});
    spec.attr_int("block_size", 24);  // not a power of two
    expect_error(spec.with_inputs(inputs), inputs, "cuda_test_GatherBlockQuantized");
  }
}

}  // namespace
}  // namespace onnx_genai::testing
