// com.microsoft GatherBlockQuantized: against a reference that dequantises the whole table in
// double with its own index arithmetic and then gathers, for uint8 (2/4/8-bit codes) and int4 /
// uint4 data, with and without zero points, f32 / f16 / bf16 scales, other axis combinations,
// across threads, against ONNX Runtime, and with bad inputs.
#include <gtest/gtest.h>

#include <random>

#include "ops/contrib_test_util.h"
#include "ops/op_test_util.h"

namespace onnx_genai::testing {
namespace {

// A quantised table described by its codes (one int per code, in data's code shape).
struct Table {
  Shape codes;
  std::vector<int> code, zero;  // zero: one per block (scales' shape), empty for the default
  std::vector<float> scale;
  int quantize_axis = 1;
  int64_t block = 16;
  int bits = 4;
  bool is_signed = false;  // int4
};

std::vector<int> random_codes(int64_t n, int bits, bool is_signed, uint32_t seed) {
  std::mt19937 gen(seed);
  const int lo = is_signed ? -(1 << (bits - 1)) : 0;
  std::uniform_int_distribution<int> dist(lo, lo + (1 << bits) - 1);
  std::vector<int> v(static_cast<size_t>(n));
  for (int& c : v) c = dist(gen);
  return v;
}

Shape scales_shape(const Table& t) {
  Shape s = t.codes;
  s[t.quantize_axis] = (s[t.quantize_axis] + t.block - 1) / t.block;
  return s;
}

Table random_table(Shape codes, int quantize_axis, int64_t block, int bits, bool is_signed, bool zero_points, uint32_t seed) {
  Table t{std::move(codes), {}, {}, {}, quantize_axis, block, bits, is_signed};
  t.code = random_codes(t.codes.numel(), bits, is_signed, seed);
  const int64_t blocks = scales_shape(t).numel();
  if (zero_points) t.zero = random_codes(blocks, bits, is_signed, seed + 1);
  std::mt19937 gen(seed + 2);
  std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
  for (int64_t i = 0; i < blocks; ++i) t.scale.push_back(dist(gen));
  return t;
}

// Every code dequantised: (code - zero) * scale, the block found by walking the coordinates.
std::vector<double> dequantize_all(const Table& t, int default_zero) {
  const Shape sshape = scales_shape(t);
  const std::vector<int64_t> strides = t.codes.strides(), sstrides = sshape.strides();
  std::vector<double> out(t.code.size());
  for (int64_t d = 0; d < t.codes.numel(); ++d) {
    int64_t rest = d, s = 0;
    for (int a = 0; a < t.codes.rank(); ++a) {
      const int64_t coord = rest / strides[static_cast<size_t>(a)];
      rest %= strides[static_cast<size_t>(a)];
      s += (a == t.quantize_axis ? coord / t.block : coord) * sstrides[static_cast<size_t>(a)];
    }
    const int zero = t.zero.empty() ? default_zero : t.zero[static_cast<size_t>(s)];
    out[static_cast<size_t>(d)] = static_cast<double>(t.code[static_cast<size_t>(d)] - zero) * t.scale[static_cast<size_t>(s)];
  }
  return out;
}

// Gather of `values` (shape `shape`) along `axis` by `indices` (negative counts from the end).
std::vector<double> gather(const std::vector<double>& values, const Shape& shape, int axis, const std::vector<int64_t>& indices) {
  const int64_t outer = shape.numel(0, axis), n = shape[axis], inner = shape.numel(axis + 1, shape.rank());
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i : indices) {
      const int64_t row = i < 0 ? i + n : i;
      for (int64_t e = 0; e < inner; ++e) out.push_back(values[static_cast<size_t>((o * n + row) * inner + e)]);
    }
  }
  return out;
}

// Codes packed `bits` wide, low bits first: along each row of the last dim (uint8), or over the
// flat array (int4 / uint4, whose shape counts codes).
std::vector<uint8_t> pack(const std::vector<int>& codes, int bits, int64_t row) {
  const int per = 8 / bits;
  const int64_t row_bytes = (row + per - 1) / per;
  std::vector<uint8_t> bytes(static_cast<size_t>(static_cast<int64_t>(codes.size()) / row * row_bytes), 0);
  for (size_t i = 0; i < codes.size(); ++i) {
    const int64_t r = static_cast<int64_t>(i) / row, c = static_cast<int64_t>(i) % row;
    bytes[static_cast<size_t>(r * row_bytes + c / per)] |= static_cast<uint8_t>((codes[i] & ((1 << bits) - 1)) << (c % per * bits));
  }
  return bytes;
}

Tensor nibble_tensor(const std::vector<int>& codes, const Shape& shape, bool is_signed) {
  Tensor t = *Tensor::allocate(is_signed ? DType::kI4 : DType::kU4, shape);
  const std::vector<uint8_t> bytes = pack(codes, 4, static_cast<int64_t>(codes.size()));
  std::copy(bytes.begin(), bytes.end(), static_cast<uint8_t*>(t.raw()));
  return t;
}

// uint8 data (codes packed along the last dim), or int4 / uint4.
Tensor data_tensor(const Table& t, bool as_uint8) {
  if (!as_uint8) return nibble_tensor(t.code, t.codes, t.is_signed);
  Shape packed = t.codes;
  packed[packed.rank() - 1] = packed[packed.rank() - 1] * t.bits / 8;
  return Tensor::from_vector<uint8_t>(packed, pack(t.code, t.bits, t.codes[t.codes.rank() - 1]));
}

Tensor zero_tensor(const Table& t, bool as_uint8) {
  const Shape s = scales_shape(t);
  if (!as_uint8) return nibble_tensor(t.zero, s, t.is_signed);
  Shape packed = s;
  const int64_t blocks = s[s.rank() - 1];
  packed[packed.rank() - 1] = (blocks * t.bits + 7) / 8;
  return Tensor::from_vector<uint8_t>(packed, pack(t.zero, t.bits, blocks));
}

template <typename S>
Tensor scale_tensor(const Table& t) {
  return cast_tensor<S>(scales_shape(t), t.scale);
}

OpCall gbq_call(const Table& t, int gather_axis) {
  OpCall call("GatherBlockQuantized", 1, "com.microsoft");
  call.attr_int("gather_axis", gather_axis).attr_int("quantize_axis", t.quantize_axis).attr_int("block_size", t.block);
  call.attr_int("bits", t.bits);
  return call;
}

// Runs the node on `t` and checks it against the reference; S is the scales' (output) dtype.
template <typename S, typename I = int64_t>
void check(const Table& t, bool as_uint8, int gather_axis, const std::vector<int64_t>& idx, const Shape& idx_shape,
           double tol, ThreadPool* pool = nullptr) {
  Table rounded = t;  // the reference sees the scales the kernel reads
  for (float& s : rounded.scale) s = static_cast<float>(S(s));
  std::vector<Tensor> in{data_tensor(t, as_uint8), Tensor::from_vector<I>(idx_shape, std::vector<I>(idx.begin(), idx.end())),
                         scale_tensor<S>(t)};
  if (!t.zero.empty()) in.push_back(zero_tensor(t, as_uint8));
  auto out = gbq_call(t, gather_axis).run(in, pool);
  ASSERT_TRUE(out) << out.status().message();
  std::vector<int64_t> dims(t.codes.dims().begin(), t.codes.dims().begin() + gather_axis);
  dims.insert(dims.end(), idx_shape.dims().begin(), idx_shape.dims().end());
  dims.insert(dims.end(), t.codes.dims().begin() + gather_axis + 1, t.codes.dims().end());
  ASSERT_EQ((*out)[0].shape(), Shape(dims));
  ASSERT_EQ((*out)[0].dtype(), DTypeOf<S>::value);
  const int default_zero = as_uint8 ? 1 << (t.bits - 1) : 0;
  const std::vector<double> want = gather(dequantize_all(rounded, default_zero), t.codes, gather_axis, idx);
  const std::vector<float> got = to_floats<S>((*out)[0]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
}

TEST(GatherBlockQuantized, Uint8FourBitEmbedding) {
  // 96 codes per row in blocks of 32: three blocks, so packed zero points end in half a byte.
  for (bool zero_points : {false, true}) {
    SCOPED_TRACE(zero_points ? "zero points" : "default zero point 8");
    const Table t = random_table({50, 96}, 1, 32, 4, false, zero_points, 1);
    check<float>(t, true, 0, {3, 0, 49, -1, -50, 3}, {2, 3}, 1e-7);
    check<Float16>(t, true, 0, {7, 7}, {2}, 1e-3);
    check<BFloat16>(t, true, 0, {-2}, {1}, 1e-2);
    check<float, int32_t>(t, true, 0, {11}, {}, 1e-7);  // a scalar index drops the axis
  }
}

TEST(GatherBlockQuantized, Uint8TwoAndEightBitAndRankThree) {
  for (int bits : {2, 8}) {
    for (bool zero_points : {false, true}) {
      SCOPED_TRACE(::testing::Message() << bits << " bits, zero points " << zero_points);
      check<float>(random_table({9, 64}, 1, 16, bits, false, zero_points, 2), true, 0, {8, 0, -3}, {3}, 1e-7);
    }
  }
  // [2, V, K] gathered on axis 0, quantised along the last axis, block larger than a decode piece.
  check<float>(random_table({2, 4, 1024}, 2, 512, 4, false, true, 3), true, 0, {1, 0, 1}, {3}, 1e-7);
}

TEST(GatherBlockQuantized, Int4AndUint4Embedding) {
  for (bool is_signed : {true, false}) {
    for (bool zero_points : {false, true}) {
      SCOPED_TRACE(::testing::Message() << (is_signed ? "int4" : "uint4") << " zero points " << zero_points);
      // Five blocks per row: int4 zero points packed over the flat array straddle rows.
      const Table t = random_table({30, 80}, 1, 16, 4, is_signed, zero_points, 4);
      check<float>(t, false, 0, {0, 29, -7, 12}, {2, 2}, 1e-7);
      check<Float16, int32_t>(t, false, 0, {5}, {1}, 1e-3);
    }
  }
}

TEST(GatherBlockQuantized, Int4OtherAxes) {
  // Quantised along the gathered axis.
  check<float>(random_table({40, 6}, 0, 16, 4, true, true, 5), false, 0, {0, 17, 39, -1}, {4}, 1e-7);
  // Gather the last axis of a 3-D table quantised along the middle one.
  check<float>(random_table({3, 40, 5}, 1, 16, 4, true, false, 6), false, 2, {4, 0, 1, 1}, {2, 2}, 1e-7);
  // Quantised along an odd-length last axis (rows not byte aligned), gathered on the middle axis.
  check<float>(random_table({3, 5, 33}, 2, 16, 4, false, true, 7), false, 1, {4, -5}, {2}, 1e-7);
}

TEST(GatherBlockQuantized, ManyRowsAcrossThreads) {
  const Table t = random_table({256, 2048}, 1, 64, 4, false, true, 8);
  std::vector<int64_t> idx;
  for (int i = 0; i < 64; ++i) idx.push_back((i * 37) % 256);
  ThreadPool pool(4);
  check<float>(t, true, 0, idx, {64}, 1e-7, &pool);
}

// ---- ONNX Runtime ---------------------------------------------------------------------------

OrtNodeModel ort_model(const Table& t, bool as_uint8, int gather_axis, const Tensor& scales, const Tensor& indices) {
  OrtNodeModel m{.op_type = "GatherBlockQuantized", .domain = "com.microsoft",
                 .attributes = {{"gather_axis", gather_axis}, {"quantize_axis", t.quantize_axis}, {"block_size", t.block},
                                {"bits", t.bits}},
                 .inputs = {"data", "indices", "scales"}, .outputs = {"y"}, .feeds = {{"indices", indices}},
                 .constants = {{"data", data_tensor(t, as_uint8)}, {"scales", scales}}};
  if (!t.zero.empty()) {
    m.inputs.push_back("zero_points");
    m.constants.push_back({"zero_points", zero_tensor(t, as_uint8)});
  }
  return m;
}

TEST(GatherBlockQuantizedOrt, Uint8FourBitFloat16ScalesWithZeroPoints) {
  const Table t = random_table({20, 96}, 1, 32, 4, false, true, 9);
  expect_matches_ort(ort_model(t, true, 0, scale_tensor<Float16>(t), Tensor::from_vector<int64_t>({2, 2}, {3, -1, 0, 19})), 0);
}

TEST(GatherBlockQuantizedOrt, Uint8EightBitDefaultZeroPoint) {
  const Table t = random_table({12, 64}, 1, 16, 8, false, false, 10);
  expect_matches_ort(ort_model(t, true, 0, scale_tensor<float>(t), Tensor::from_vector<int32_t>({3}, {11, 0, 5})), 1e-7);
}

TEST(GatherBlockQuantizedOrt, Int4EmbeddingAndUint4OtherAxes) {
  const Table t = random_table({16, 64}, 1, 16, 4, true, true, 11);
  expect_matches_ort(ort_model(t, false, 0, scale_tensor<float>(t), Tensor::from_vector<int64_t>({3}, {15, -16, 2})), 1e-7);
  const Table u = random_table({3, 40, 5}, 1, 16, 4, false, true, 12);
  expect_matches_ort(ort_model(u, false, 2, scale_tensor<float>(u), Tensor::from_vector<int64_t>({2}, {4, 1})), 1e-7);
}

// ---- Bad inputs -----------------------------------------------------------------------------

TEST(GatherBlockQuantized, BadInputsAreErrorsNamingTheNode) {
  const Table t = random_table({10, 64}, 1, 16, 4, false, true, 13);
  const Tensor data = data_tensor(t, true), scales = scale_tensor<float>(t), zeros = zero_tensor(t, true);
  const Tensor idx = Tensor::from_vector<int64_t>({2}, {1, 2});
  const char* node = "test_GatherBlockQuantized";
  const auto run = [](auto&& call, const std::vector<Tensor>& in) { return call.run(in); };
  // Scales for blocks of 32 given to a node that says 16.
  EXPECT_TRUE(fails_with(run(gbq_call(t, 0), {data, idx, f32({10, 2}, std::vector<float>(20, 1))}), node,
                         "scales shape [10,2] should be [10,4]"));
  // Packed data one byte short per row for the scales given.
  EXPECT_TRUE(fails_with(run(gbq_call(t, 0), {Tensor::from_vector<uint8_t>({10, 24}, std::vector<uint8_t>(240)), idx, scales}),
                         node, "scales shape [10,4] should be [10,3]"));
  EXPECT_TRUE(fails_with(run(gbq_call(t, 0), {data, Tensor::from_vector<int64_t>({2}, {1, 10}), scales, zeros}), node,
                         "index 10 at position 1 out of range for gather_axis dim of size 10"));
  EXPECT_TRUE(fails_with(run(gbq_call(t, 0), {data, Tensor::from_vector<int32_t>({1}, {-11}), scales}), node, "index -11"));
  EXPECT_TRUE(fails_with(run(gbq_call(t, 0), {data, idx, scales, Tensor::from_vector<uint8_t>({10, 1}, std::vector<uint8_t>(10))}),
                         node, "zero_points shape [10,1] should be [10,2]"));
  EXPECT_TRUE(fails_with(run(gbq_call(t, 0), {data, idx, scales, nibble_tensor(t.zero, {10, 4}, false)}), node,
                         "zero_points dtype uint4 differs from data dtype uint8"));
  EXPECT_TRUE(fails_with(run(gbq_call(t, 1), {data, idx, scales}), node, "uint8 data needs gather_axis 0"));
  EXPECT_TRUE(fails_with(run(gbq_call(t, 0).attr_int("bits", 3), {data, idx, scales}), node, "bits must be 2, 4 or 8"));
  EXPECT_TRUE(fails_with(run(gbq_call(t, 0).attr_int("block_size", 24), {data, idx, scales}), node, "power of two >= 16"));
  EXPECT_TRUE(fails_with(run(gbq_call(t, 0), {data, f32({1}, {1.0f}), scales}), node, "indices must be int32 or int64"));
  EXPECT_TRUE(fails_with(run(gbq_call(t, 0).attr_int("bits", 8), {nibble_tensor(t.code, t.codes, true), idx, scales}), node,
                         "bits must be 4 for int4 data"));
}

}  // namespace
}  // namespace onnx_genai::testing
