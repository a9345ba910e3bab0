// RotaryEmbedding, com.microsoft and ONNX (opset 23): the CUDA kernel (ops/cuda/rotary.cc) against
// the CPU kernel (ops/cpu/rotary.cc) on random cases of every form the schema allows
// (ops/schema/rotary.h): 3-D X (num_heads given, or for com.microsoft the head size taken from
// the cache width) and 4-D X, rotate-half and interleaved pairs, partial rotary_dim, position_ids
// [B, S], one base position (com.microsoft: shape [1] or a scalar) or none (opset 23: caches
// gathered per token), f32 / f16 / bf16, odd head sizes, plus the decoders' shapes.
//
// Tolerance: both sides rotate each pair in f32 with the same roundings (no fused multiply-add)
// and round once to the dtype, so they should agree to the bit; the harness's per-dtype
// tolerances (cuda_test_util.h) are what is held. Positions outside the cache fail the CPU run;
// the CUDA kernel clamps them into the cache (ops/cuda/rotary_kernels.h), checked here against the
// CPU kernel given the clamped positions.
#include <algorithm>
#include <string>
#include <vector>

#include "data_test_util.h"

namespace onnx_genai::testing {
namespace {

constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

enum class Positions { kNone, kBase, kBaseScalar, kPerToken };

struct RotaryCase {
  bool contrib = true;  // com.microsoft, else ONNX opset 23
  DType dtype = DType::kF32;
  int64_t batch = 1, seq = 1, heads = 1, head_size = 64, rotary_dim = 64, cache_rows = 64;
  bool heads_first = false;       // X [B, heads, S, head_size], else [B, S, heads * head_size]
  bool interleaved = false;
  bool num_heads_attr = true;     // com.microsoft with the whole head rotated may leave num_heads out
  Positions positions = Positions::kPerToken;

  std::string describe() const {
    const char* forms[] = {"none", "base[1]", "base[]", "[B,S]"};
    return std::string(contrib ? "com.microsoft" : "onnx23") + " " + std::string(dtype_name(dtype)) + " B" +
           std::to_string(batch) + " S" + std::to_string(seq) + " heads " + std::to_string(heads) + " head " +
           std::to_string(head_size) + " rotary " + std::to_string(rotary_dim) + (heads_first ? " 4-D" : " 3-D") +
           (interleaved ? " interleaved" : "") + " positions " + forms[static_cast<int>(positions)] + " cache " +
           std::to_string(cache_rows);
  }
};

// Position ids inside the cache: [B, S] rows, or one base with room for the S tokens.
Tensor position_tensor(const RotaryCase& c, std::mt19937& rng) {
  if (c.positions == Positions::kPerToken) {
    std::vector<int64_t> ids(static_cast<size_t>(c.batch * c.seq));
    std::uniform_int_distribution<int64_t> row(0, c.cache_rows - 1);
    for (int64_t& id : ids) id = row(rng);
    return Tensor::from_vector<int64_t>(Shape{c.batch, c.seq}, ids);
  }
  const int64_t base = std::uniform_int_distribution<int64_t>(0, c.cache_rows - c.seq)(rng);
  return Tensor::from_vector<int64_t>(c.positions == Positions::kBase ? Shape{1} : Shape{}, std::vector<int64_t>{base});
}

// A RotaryEmbedding node for case `c` and random inputs (positions inside the cache); the same
// node runs on other inputs of the same form.
class RotaryNode {
 public:
  RotaryNode(const RotaryCase& c, std::mt19937& rng)
      : spec_("RotaryEmbedding", c.contrib ? "com.microsoft" : "", {true}, c.contrib ? 1 : 23) {
    if (c.interleaved) spec_.attr_int("interleaved", 1);
    if (c.num_heads_attr) spec_.attr_int("num_heads", c.heads);
    if (c.rotary_dim != c.head_size) spec_.attr_int("rotary_embedding_dim", c.rotary_dim);
    const Shape x = c.heads_first ? Shape{c.batch, c.heads, c.seq, c.head_size}
                                  : Shape{c.batch, c.seq, c.heads * c.head_size};
    const Shape cache = c.positions == Positions::kNone ? Shape{c.batch, c.seq, c.rotary_dim / 2}
                                                        : Shape{c.cache_rows, c.rotary_dim / 2};
    Tensor xs = random_float_tensor(c.dtype, x, rng, -2.0f, 2.0f);
    Tensor cos = random_float_tensor(c.dtype, cache, rng);
    Tensor sin = random_float_tensor(c.dtype, cache, rng);
    Tensor positions = c.positions == Positions::kNone ? Tensor() : position_tensor(c, rng);
    inputs = c.contrib ? std::vector<Tensor>{xs, positions, cos, sin} : std::vector<Tensor>{xs, cos, sin, positions};
    if (!c.contrib && c.positions == Positions::kNone) inputs.pop_back();
  }

  const Node& node(const std::vector<Tensor>& bound) { return spec_.with_inputs(bound); }
  const Node& node() { return node(inputs); }

  std::vector<Tensor> inputs;  // com.microsoft: (X, position_ids, cos, sin); opset 23: (X, cos, sin, position_ids?)

 private:
  CudaNode spec_;
};

RotaryCase random_case(int trial, std::mt19937& rng) {
  constexpr int64_t kHeadSizes[] = {64, 128, 96, 80, 32, 8, 10, 6, 2};
  RotaryCase c;
  c.contrib = trial % 2 == 0;
  c.dtype = kDtypes[trial / 2 % 3];
  c.batch = std::uniform_int_distribution<int64_t>(1, 3)(rng);
  c.seq = trial % 7 == 3 ? 37 : std::uniform_int_distribution<int64_t>(1, 9)(rng);
  c.heads = std::uniform_int_distribution<int64_t>(1, 6)(rng);
  c.head_size = kHeadSizes[rng() % std::size(kHeadSizes)];
  // Every third case rotates part of the head: an even size below it (at least 2).
  c.rotary_dim = c.head_size;
  if (trial % 3 == 1 && c.head_size > 2) {
    c.rotary_dim = 2 * std::uniform_int_distribution<int64_t>(1, (c.head_size - 1) / 2)(rng);
  }
  c.heads_first = trial % 4 >= 2;
  c.interleaved = trial % 5 >= 3;
  // com.microsoft needs num_heads with a partial rotary_dim; without either (3-D X), the head is
  // twice the cache width.
  c.num_heads_attr = !c.contrib || c.rotary_dim != c.head_size || trial % 6 != 0;
  if (c.contrib) {
    const Positions forms[] = {Positions::kPerToken, Positions::kBase, Positions::kPerToken, Positions::kBaseScalar};
    c.positions = forms[trial / 3 % 4];
  } else {
    c.positions = trial / 3 % 2 == 0 ? Positions::kPerToken : Positions::kNone;
  }
  c.cache_rows = c.seq + std::uniform_int_distribution<int64_t>(0, 200)(rng);
  return c;
}

using RotaryCuda = CudaKernelTest;

TEST_F(RotaryCuda, MatchesCpuOnRandomCases) {
  for (int trial = 0; trial < 240; ++trial) {
    const RotaryCase c = random_case(trial, rng_);
    RotaryNode node(c, rng_);
    compare(node.node(), node.inputs, "RotaryEmbedding " + c.describe());
  }
}

// The test decoders' and real models' shapes: one decode token and a prefill, q and k heads.
TEST_F(RotaryCuda, MatchesCpuOnDecoderShapes) {
  const struct {
    int64_t heads, head_size, seq;
  } kShapes[] = {{32, 128, 1}, {8, 128, 1}, {14, 64, 1}, {2, 64, 1}, {32, 128, 300}, {14, 64, 129}, {4, 32, 7}};
  for (const auto& shape : kShapes) {
    for (const bool contrib : {true, false}) {
      for (const DType dtype : kDtypes) {
        RotaryCase c;
        c.contrib = contrib;
        c.dtype = dtype;
        c.batch = shape.seq == 1 ? 4 : 1;
        c.seq = shape.seq;
        c.heads = shape.heads;
        c.head_size = c.rotary_dim = shape.head_size;
        c.heads_first = !contrib;  // the opset-23 graphs rotate [B, heads, S, head_size]
        c.cache_rows = 4096;
        RotaryNode node(c, rng_);
        compare(node.node(), node.inputs, "RotaryEmbedding " + c.describe());
      }
    }
  }
}

// Positions outside the cache (below 0, past its end, a base running past it): the CUDA kernel
// takes the nearest cache row, as the CPU kernel does given the clamped positions.
TEST_F(RotaryCuda, ClampsPositionsOutsideTheCache) {
  for (const Positions form : {Positions::kPerToken, Positions::kBase}) {
    for (const DType dtype : kDtypes) {
      RotaryCase c;
      c.dtype = dtype;
      c.batch = 2;
      c.seq = 5;
      c.heads = 3;
      c.head_size = c.rotary_dim = 16;
      c.cache_rows = 8;
      c.positions = form;
      RotaryNode node(c, rng_);
      std::vector<int64_t> bad = form == Positions::kBase ? std::vector<int64_t>{6}
                                                          : std::vector<int64_t>{-3, 0, 7, 8, 1000, -1, 2, 9, 4, 7};
      std::vector<int64_t> clamped;
      for (int64_t b = 0; b < c.batch; ++b) {
        for (int64_t s = 0; s < c.seq; ++s) {
          const int64_t p = form == Positions::kBase ? bad[0] + s : bad[static_cast<size_t>(b * c.seq + s)];
          clamped.push_back(std::clamp<int64_t>(p, 0, c.cache_rows - 1));
        }
      }
      std::vector<Tensor> on_gpu = node.inputs, on_cpu = node.inputs;
      on_gpu[1] = Tensor::from_vector<int64_t>(form == Positions::kBase ? Shape{1} : Shape{c.batch, c.seq}, bad);
      on_cpu[1] = Tensor::from_vector<int64_t>(Shape{c.batch, c.seq}, clamped);
      const Node& n = node.node(on_gpu);
      const std::string what = "RotaryEmbedding clamped " + c.describe();
      Result<std::vector<Tensor>> cpu = run_on_cpu(n, on_cpu);
      ASSERT_TRUE(cpu.is_ok()) << what << ": " << cpu.status().message();
      Result<std::vector<Tensor>> gpu = run_on_cuda(n, on_gpu, *stream_);
      ASSERT_TRUE(gpu.is_ok()) << what << ": " << gpu.status().message();
      expect_close((*gpu)[0], (*cpu)[0], tolerance_for(dtype), what);
    }
  }
}

// An empty cache with positions: every position is outside it, which the CPU kernel reports, so
// the CUDA kernel turns the node down (a session runs it on the CPU).
TEST_F(RotaryCuda, TurnsDownAnEmptyCache) {
  RotaryCase c;
  c.cache_rows = 4;
  RotaryNode node(c, rng_);
  const Tensor empty = random_float_tensor(c.dtype, Shape{0, c.rotary_dim / 2}, rng_);
  node.inputs[2] = empty;
  node.inputs[3] = empty;
  expect_cuda_rejects(node.node(), node.inputs, "empty", "RotaryEmbedding, empty cache");
}

}  // namespace
}  // namespace onnx_genai::testing
