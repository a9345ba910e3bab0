// ONNX Attention (opset 23, 24): the CUDA kernel (ops/cuda/onnx_attention.cc, run by the
// GroupQueryAttention kernels) against the CPU kernel on random cases: 3-D and 4-D inputs, GQA
// ratios 1 / 4 / 7, prompts with and without a past (an empty past too, as a model's first step
// has), decodes after a past, is_causal, bool and float masks in every broadcast shape the
// schema takes, softcap, explicit scale, nonpad_kv_seqlen (opset 24), omitted present outputs,
// f32 / f16 / bf16; and the nodes the CUDA kernel turns down (the runtime then runs them on the
// CPU, which accepts them).
//
// Tolerances: cuda_test_util.h's per output dtype, as the GroupQueryAttention tests use: both
// sides accumulate in f32 in different orders (the f16 / bf16 tensor-core decode also rounds the
// probabilities to the dtype before P.V).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ops/schema/attention.h"

namespace onnx_genai::testing {
namespace {

using P = OnnxAttentionParams;

constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

enum class Mask { kNone, kBool, kFloat };

struct AttnCase {
  DType dtype = DType::kF16;
  int64_t batch = 2, q_heads = 4, kv_heads = 2, head_size = 64, q_len = 1;
  int64_t kv_len = -1;        // -1: q_len (anything else the CUDA kernel turns down)
  int64_t v_head_size = -1;   // -1: head_size
  int64_t past_len = -1;      // -1: no past inputs; 0: an empty past
  bool four_d = false, causal = false;
  Mask mask = Mask::kNone;
  std::vector<int64_t> mask_shape;  // broadcasting to [B, Nq, S, T]
  bool nonpad = false;              // opset 24
  float scale = 0.0f, softcap = 0.0f;
  bool present_key = true, present_value = true, qk_output = false;

  int64_t keys() const { return kv_len < 0 ? q_len : kv_len; }
  int64_t v_head() const { return v_head_size < 0 ? head_size : v_head_size; }
  int64_t total() const { return std::max<int64_t>(past_len, 0) + keys(); }

  std::string describe() const {
    std::string s = std::string(dtype_name(dtype)) + (four_d ? " 4-D" : " 3-D") + " B" + std::to_string(batch) + " S" +
                    std::to_string(q_len) + " N" + std::to_string(q_heads) + "/" + std::to_string(kv_heads) + " D" +
                    std::to_string(head_size);
    if (keys() != q_len) s += " L" + std::to_string(keys());
    if (v_head() != head_size) s += " Dv" + std::to_string(v_head());
    s += past_len < 0 ? " no past" : " past " + std::to_string(past_len);
    if (causal) s += " causal";
    if (mask != Mask::kNone) s += std::string(mask == Mask::kBool ? " bool" : " float") + " mask " + Shape(mask_shape).to_string();
    if (nonpad) s += " nonpad";
    if (scale != 0.0f) s += " scale " + std::to_string(scale);
    if (softcap != 0.0f) s += " softcap " + std::to_string(softcap);
    if (!present_key) s += " no present_key";
    if (!present_value) s += " no present_value";
    if (qk_output) s += " qk_matmul_output";
    return s;
  }
};

// A mask shape of rank 1..4 broadcasting to [B, Nq, S, T]: the last dim T, each other 1 or full.
std::vector<int64_t> mask_shape(const AttnCase& c, int rank, unsigned ones) {
  const int64_t full[4] = {c.batch, c.q_heads, c.q_len, c.total()};
  std::vector<int64_t> shape;
  for (int axis = 4 - rank; axis < 4; ++axis) shape.push_back(axis < 3 && (ones >> axis & 1) != 0 ? 1 : full[axis]);
  return shape;
}

Tensor float_tensor(DType dtype, Shape shape, const std::vector<float>& values) {
  Tensor t = Tensor::allocate(dtype, std::move(shape)).value();
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF16) t.data<Float16>()[i] = Float16(values[i]);
    else if (dtype == DType::kBF16) t.data<BFloat16>()[i] = BFloat16(values[i]);
    else t.data<float>()[i] = values[i];
  }
  return t;
}

// The node (attributes set on `spec`) and its inputs: undefined tensors for omitted ones.
std::vector<Tensor> make_inputs(const AttnCase& c, CudaNode& spec, std::mt19937& rng) {
  if (!c.four_d) spec.attr_int("q_num_heads", c.q_heads).attr_int("kv_num_heads", c.kv_heads);
  if (c.causal) spec.attr_int("is_causal", 1);
  if (c.scale != 0.0f) spec.attr_float("scale", c.scale);
  if (c.softcap != 0.0f) spec.attr_float("softcap", c.softcap);
  const auto shape = [&](int64_t heads, int64_t len, int64_t d) {
    return c.four_d ? Shape{c.batch, heads, len, d} : Shape{c.batch, len, heads * d};
  };
  std::vector<Tensor> in(7);
  in[P::kQ] = random_float_tensor(c.dtype, shape(c.q_heads, c.q_len, c.head_size), rng, -2.0f, 2.0f);
  in[P::kK] = random_float_tensor(c.dtype, shape(c.kv_heads, c.keys(), c.head_size), rng);
  in[P::kV] = random_float_tensor(c.dtype, shape(c.kv_heads, c.keys(), c.v_head()), rng);
  if (c.mask == Mask::kBool) {
    Tensor m = Tensor::allocate(DType::kBool, Shape(c.mask_shape)).value();
    for (int64_t i = 0; i < m.numel(); ++i) m.data<uint8_t>()[i] = rng() % 7 != 0;  // some rows lose every key
    in[P::kAttnMask] = std::move(m);
  } else if (c.mask == Mask::kFloat) {
    std::uniform_real_distribution<float> value(-2.0f, 2.0f);
    std::vector<float> m(static_cast<size_t>(Shape(c.mask_shape).numel()));
    for (float& v : m) v = rng() % 10 == 0 ? -std::numeric_limits<float>::infinity() : value(rng);
    in[P::kAttnMask] = float_tensor(c.dtype, Shape(c.mask_shape), m);
  }
  if (c.past_len >= 0) {
    in[P::kPastKey] = random_float_tensor(c.dtype, Shape{c.batch, c.kv_heads, c.past_len, c.head_size}, rng);
    in[P::kPastValue] = random_float_tensor(c.dtype, Shape{c.batch, c.kv_heads, c.past_len, c.v_head()}, rng);
  }
  if (c.nonpad) {
    // Lengths 0 (every key padding) to past T (clamped to T).
    std::vector<int64_t> lengths;
    for (int64_t b = 0; b < c.batch; ++b) lengths.push_back(std::uniform_int_distribution<int64_t>(0, c.total() + 2)(rng));
    in[P::kNonpadKvSeqlen] = Tensor::from_vector<int64_t>(Shape{c.batch}, lengths);
  }
  while (!in.back().defined()) in.pop_back();
  return in;
}

CudaNode attention_node(const AttnCase& c) {
  std::vector<bool> outputs = {true, c.present_key, c.present_value};
  if (c.qk_output) outputs.push_back(true);
  return CudaNode("Attention", "", outputs, c.nonpad ? 24 : 23);
}

class OnnxAttentionCuda : public CudaKernelTest {
 protected:
  void check(const AttnCase& c) {
    CudaNode spec = attention_node(c);
    const std::vector<Tensor> inputs = make_inputs(c, spec, rng_);
    compare(spec.with_inputs(inputs), inputs, "Attention " + c.describe());
  }

  int64_t pick(std::initializer_list<int64_t> values) { return values.begin()[rng_() % values.size()]; }
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  // No mask, a bool or a float one, in a random broadcast shape, by trial.
  void set_mask(AttnCase& c, int trial) {
    c.mask = static_cast<Mask>(trial % 3);
    if (c.mask != Mask::kNone) c.mask_shape = mask_shape(c, static_cast<int>(uniform(1, 4)), static_cast<unsigned>(rng_() % 8));
  }
};

// Prompts (S = 2..40, and 100 / 300 on the flash kernel where no bias goes with them): 3-D and
// 4-D, GQA ratios 1 / 4 / 7, head sizes 8 / 64 / 80 / 128, no past, an empty past or one of up
// to 300 rows, causal or not, masks, softcap, scale.
TEST_F(OnnxAttentionCuda, PromptMatchesCpu) {
  for (int trial = 0; trial < 54; ++trial) {
    AttnCase c;
    c.dtype = kDtypes[trial % 3];
    c.four_d = trial / 3 % 2 == 1;
    c.batch = pick({1, 2, 3});
    c.kv_heads = pick({1, 2});
    c.q_heads = c.kv_heads * pick({1, 4, 7});
    c.head_size = pick({8, 64, 80, 128});
    c.q_len = trial % 9 == 8 ? pick({100, 300}) : uniform(2, 40);
    const int past = trial / 2 % 3;
    c.past_len = past == 0 ? -1 : past == 1 ? 0 : uniform(1, 300);
    c.causal = trial / 4 % 2 == 0;
    c.softcap = trial % 5 == 3 ? 1.5f : 0.0f;
    c.scale = trial % 7 == 5 ? 0.3f : 0.0f;
    set_mask(c, trial / 6);
    check(c);
  }
}

// Decodes (S = 1) after a past of 1..2000 rows: the tensor-core decode kernel in f16 / bf16 (split
// over long pasts), the tiled kernel in f32; 4-D Q / K / V of one row read in place.
TEST_F(OnnxAttentionCuda, DecodeMatchesCpu) {
  for (int trial = 0; trial < 42; ++trial) {
    AttnCase c;
    c.dtype = kDtypes[trial % 3];
    c.four_d = trial / 3 % 2 == 0;
    c.batch = pick({1, 2, 3});
    c.kv_heads = pick({1, 2, 4});
    c.q_heads = c.kv_heads * pick({1, 4, 7});
    c.head_size = pick({64, 128, 256});
    c.past_len = trial % 4 == 0 ? uniform(600, 2000) : uniform(1, 300);
    c.causal = trial % 2 == 1;
    c.softcap = trial % 5 == 2 ? 2.0f : 0.0f;
    c.scale = trial % 7 == 4 ? 0.2f : 0.0f;
    set_mask(c, trial / 2);
    check(c);
  }
}

// Short steps after a past (S = 2..16, a speculative-decoding verify): the tensor-core decode
// kernel's multi-row steps, causal within the step.
TEST_F(OnnxAttentionCuda, ShortStepMatchesCpu) {
  for (int trial = 0; trial < 24; ++trial) {
    AttnCase c;
    c.dtype = kDtypes[trial % 3];
    c.four_d = trial % 2 == 0;
    c.batch = pick({1, 2});
    c.kv_heads = pick({1, 2});
    c.q_heads = c.kv_heads * pick({1, 4, 7});
    c.head_size = pick({64, 128});
    c.q_len = uniform(2, 16);
    c.past_len = uniform(1, 500);
    c.causal = trial % 4 != 3;
    set_mask(c, trial / 3);
    check(c);
  }
}

// nonpad_kv_seqlen (opset 24): keys past each entry's length dropped (lengths 0 to past T);
// without a past it also moves the causal diagonal (rows before it see nothing and give 0).
TEST_F(OnnxAttentionCuda, NonpadKvSeqlenMatchesCpu) {
  for (int trial = 0; trial < 36; ++trial) {
    AttnCase c;
    c.dtype = kDtypes[trial % 3];
    c.four_d = trial / 3 % 2 == 1;
    c.batch = 3;
    c.kv_heads = pick({1, 2});
    c.q_heads = c.kv_heads * pick({1, 4, 7});
    c.head_size = pick({64, 128});
    c.q_len = trial % 4 == 0 ? 1 : uniform(2, 30);
    c.past_len = trial / 2 % 2 == 0 ? -1 : uniform(1, 200);
    c.causal = trial / 6 % 2 == 0;
    c.nonpad = true;
    set_mask(c, trial / 4);
    check(c);
  }
}

// Every mask shape the schema takes (ranks 1..4, each leading dim 1 or full), bool and float,
// for a prompt and a decode: a float mask with a row per query row is passed to the kernel as
// its bias, the others are expanded into one.
TEST_F(OnnxAttentionCuda, MaskBroadcastShapesMatchCpu) {
  for (const int64_t q_len : {1, 5}) {
    for (const Mask kind : {Mask::kBool, Mask::kFloat}) {
      for (int rank = 1; rank <= 4; ++rank) {
        for (unsigned ones = 0; ones < 8; ++ones) {
          if ((ones & ((1u << (4 - rank)) - 1)) != 0) continue;  // bits of dims the rank has only
          AttnCase c;
          c.dtype = kDtypes[(rank + ones) % 3];
          c.four_d = ones % 2 == 0;
          c.batch = 2;
          c.q_heads = 4;
          c.kv_heads = 2;
          c.q_len = q_len;
          c.past_len = 7;
          c.causal = rank % 2 == 0;
          c.mask = kind;
          c.mask_shape = mask_shape(c, rank, ones);
          check(c);
        }
      }
    }
  }
}

// present_key / present_value omitted, one or both (the kernel keeps them in its workspace).
TEST_F(OnnxAttentionCuda, OmittedPresentOutputsMatchCpu) {
  for (int trial = 0; trial < 12; ++trial) {
    AttnCase c;
    c.dtype = kDtypes[trial % 3];
    c.four_d = trial % 2 == 0;
    c.q_len = trial % 4 < 2 ? 1 : 9;
    c.past_len = trial % 3 == 0 ? -1 : 20;
    c.causal = true;
    c.present_key = trial % 3 != 1;
    c.present_value = trial % 3 == 0;
    check(c);
  }
}

// The node tools/build_model.py --style opset23 writes: 4-D Q / K / V, a float mask [B, 1, S, T]
// (0 or the dtype's lowest), is_causal 0, an explicit scale, a past (empty in the prefill); a
// prefill, a decode, and a longer causal prompt without a mask (the flash kernel in f16 / bf16).
TEST_F(OnnxAttentionCuda, ModelShapedStepsMatchCpu) {
  for (const DType dtype : kDtypes) {
    for (const auto& [q_len, past] : {std::pair<int64_t, int64_t>{5, 0}, {1, 5}, {1, 300}}) {
      AttnCase c;
      c.dtype = dtype;
      c.four_d = true;
      c.q_heads = 14;
      c.kv_heads = 2;
      c.q_len = q_len;
      c.past_len = past;
      c.scale = 0.125f;
      CudaNode spec = attention_node(c);
      std::vector<Tensor> inputs = make_inputs(c, spec, rng_);
      // The builder's np.finfo(dtype).min (f32's for bf16, which rounds to -inf there).
      const float lowest = dtype == DType::kF16 ? -65504.0f : std::numeric_limits<float>::lowest();
      const std::vector<int64_t> lengths = {c.total(), c.total() - 2};  // the second row right-padded
      std::vector<float> mask;
      for (int64_t b = 0; b < c.batch; ++b) {
        for (int64_t s = 0; s < c.q_len; ++s) {
          for (int64_t j = 0; j < c.total(); ++j) mask.push_back(j <= past + s && j < lengths[static_cast<size_t>(b)] ? 0.0f : lowest);
        }
      }
      inputs[P::kAttnMask] = float_tensor(dtype, Shape{c.batch, 1, c.q_len, c.total()}, mask);
      compare(spec.with_inputs(inputs), inputs, "Attention (model-shaped) " + c.describe() + " float mask [B, 1, S, T]");
    }
    AttnCase c;
    c.dtype = dtype;
    c.four_d = true;
    c.batch = 1;
    c.q_heads = 8;
    c.kv_heads = 2;
    c.head_size = 128;
    c.q_len = 500;
    c.past_len = 0;
    c.causal = true;
    check(c);
  }
}

// Nodes the CUDA kernel turns down, each with a message naming the node, which the CPU kernel
// runs (the runtime then places them there). Needs no GPU: prepare() turns them down before it
// plans the GQA kernels.
TEST(OnnxAttentionCudaSupport, RejectsWhatTheGqaKernelsCannotRunNamingTheNode) {
  struct Rejected {
    AttnCase c;
    std::string why;
  };
  std::vector<Rejected> rejected;
  AttnCase base;
  base.q_len = 3;
  base.past_len = 2;
  base.causal = true;
  rejected.push_back({base, "qk_matmul_output"});
  rejected.back().c.qk_output = true;
  rejected.push_back({base, "V's head size"});
  rejected.back().c.v_head_size = 32;
  rejected.push_back({base, "head sizes that are multiples of 8 up to 256, got 36"});
  rejected.back().c.head_size = 36;
  rejected.push_back({base, "head sizes that are multiples of 8 up to 256, got 264"});
  rejected.back().c.head_size = 264;
  rejected.push_back({base, "one key / value row per query row, got 5 and 3"});
  rejected.back().c.kv_len = 5;
  rejected.push_back({base, "one key / value row per query row, got 5 and 3"});
  rejected.back().c.kv_len = 5;
  rejected.back().c.four_d = true;
  std::mt19937 rng(7);
  for (const Rejected& r : rejected) {
    CudaNode spec = attention_node(r.c);
    const std::vector<Tensor> inputs = make_inputs(r.c, spec, rng);
    const Node& node = spec.with_inputs(inputs);
    Result<PreparedNode> prepared = prepare_node(node, inputs, DeviceType::kCuda);
    ASSERT_FALSE(prepared.is_ok()) << r.c.describe();
    const std::string& message = prepared.status().message();
    EXPECT_NE(message.find("Attention (node 'cuda_test_Attention')"), std::string::npos) << message;
    EXPECT_NE(message.find(r.why), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    Result<std::vector<Tensor>> cpu = run_on_cpu(node, inputs);
    EXPECT_TRUE(cpu.is_ok()) << r.c.describe() << ": " << cpu.status().message();
  }
}

}  // namespace
}  // namespace onnx_genai::testing
