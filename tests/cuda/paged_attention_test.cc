// onnx_genai PagedAttention: the CUDA kernels against the CPU kernel (itself checked against
// GroupQueryAttention per sequence, tests/ops/paged_attention_test.cc) on random packed steps:
// several sequences with cached pasts and new tokens (decodes and prefill chunks), shuffled block
// tables with shared prefix blocks, lengths that are not multiples of the block, padding tokens,
// rotary both layouts, packed QKV, windows, softcap, attention sinks, f32 / f16 / bf16. The harness binds the cache
// outputs apart from the inputs, so the kernels' copy of the pool is covered too.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ops/schema/paged_attention.h"

namespace onnx_genai::testing {
namespace {

struct PagedCase {
  DType dtype = DType::kF16;
  int64_t heads = 8, kv_heads = 2, head_size = 64, block = 16, sequences = 4, padding = 0;
  int64_t most_cached = 70, most_fresh = 20;  // per sequence: positions cached before, new tokens
  bool packed = false, rotary = true, interleaved = false, sinks = false;
  int64_t window = -1;
  float softcap = 0.0f;

  std::string describe() const {
    return std::string(dtype_name(dtype)) + " N" + std::to_string(heads) + "/" + std::to_string(kv_heads) + " D" +
           std::to_string(head_size) + " block " + std::to_string(block) + " seqs " + std::to_string(sequences) +
           (packed ? " packed" : "") + (rotary ? (interleaved ? " rotary-interleaved" : " rotary") : "") +
           (window >= 0 ? " window " + std::to_string(window) : "") + (softcap > 0 ? " softcap" : "") + (sinks ? " sinks" : "") + " cached < " +
           std::to_string(most_cached) + " fresh <= " + std::to_string(most_fresh);
  }
};

class PagedAttentionCuda : public CudaKernelTest {
 protected:
  void check(const PagedCase& c) {
    std::vector<int64_t> cached, fresh;
    int64_t tokens = 0, longest = 0;
    for (int64_t s = 0; s < c.sequences; ++s) {
      cached.push_back(static_cast<int64_t>(rng_() % static_cast<uint64_t>(c.most_cached)));
      fresh.push_back(s % 2 == 0 ? 1 : 1 + static_cast<int64_t>(rng_() % static_cast<uint64_t>(c.most_fresh)));
      tokens += fresh.back();
      longest = std::max(longest, cached.back() + fresh.back());
    }
    const int64_t max_blocks = (longest + c.block - 1) / c.block + 1;
    const int64_t pool = c.sequences * max_blocks + 3;
    std::vector<int32_t> ids(static_cast<size_t>(pool));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng_);
    std::vector<int32_t> tables;
    for (int64_t s = 0; s < c.sequences; ++s) {
      for (int64_t b = 0; b < max_blocks; ++b) {
        // Sequence 1 shares sequence 0's first block when both have it full.
        const bool shared = s == 1 && b == 0 && cached[0] >= c.block && cached[1] >= c.block;
        tables.push_back(shared ? tables[0] : ids[static_cast<size_t>(s * max_blocks + b)]);
      }
    }
    std::vector<int32_t> starts{0}, lens;
    for (int64_t s = 0; s < c.sequences; ++s) {
      starts.push_back(starts.back() + static_cast<int32_t>(fresh[static_cast<size_t>(s)]));
      lens.push_back(static_cast<int32_t>(cached[static_cast<size_t>(s)] + fresh[static_cast<size_t>(s)]));
    }
    const int64_t all = tokens + c.padding, d = c.head_size;
    const int64_t q_row = (c.packed ? c.heads + 2 * c.kv_heads : c.heads) * d;
    CudaNode node(PagedAttentionParams::kOpType, PagedAttentionParams::kDomain, {true, true, true});
    node.attr_int("num_heads", c.heads).attr_int("kv_num_heads", c.kv_heads);
    if (c.rotary) node.attr_int("do_rotary", 1).attr_int("rotary_interleaved", c.interleaved ? 1 : 0);
    if (c.window >= 0) node.attr_int("local_window_size", c.window);
    if (c.softcap > 0) node.attr_float("softcap", c.softcap);
    std::vector<Tensor> in(8);
    in[0] = random_float_tensor(c.dtype, Shape{1, all, q_row}, rng_);
    if (!c.packed) {
      in[1] = random_float_tensor(c.dtype, Shape{1, all, c.kv_heads * d}, rng_);
      in[2] = random_float_tensor(c.dtype, Shape{1, all, c.kv_heads * d}, rng_);
    }
    in[3] = random_float_tensor(c.dtype, Shape{pool, c.block, c.kv_heads, d}, rng_);
    in[4] = random_float_tensor(c.dtype, Shape{pool, c.block, c.kv_heads, d}, rng_);
    in[5] = Tensor::from_vector<int32_t>(Shape{c.sequences, max_blocks}, tables);
    in[6] = Tensor::from_vector<int32_t>(Shape{c.sequences + 1}, starts);
    in[7] = Tensor::from_vector<int32_t>(Shape{c.sequences}, lens);
    if (c.rotary || c.sinks) in.resize(c.sinks ? 11 : 10);
    if (c.rotary) {
      in[8] = random_float_tensor(c.dtype, Shape{longest + 5, d / 2}, rng_);
      in[9] = random_float_tensor(c.dtype, Shape{longest + 5, d / 2}, rng_);
    }
    // Sinks near the scores' scale (random keys and queries in [-1, 1)), so they matter.
    if (c.sinks) in[10] = random_float_tensor(c.dtype, Shape{c.heads}, rng_, -2.0f, 2.0f);
    compare(node.with_inputs(in), in, "PagedAttention " + c.describe());
  }
};

TEST_F(PagedAttentionCuda, MatchesCpuOnRandomSteps) {
  int trial = 0;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t head_size : {64, 128, 80}) {
      for (int variant = 0; variant < 4; ++variant, ++trial) {
        PagedCase c;
        c.dtype = dtype;
        c.head_size = head_size;
        c.sequences = 1 + trial % 6;
        c.block = variant == 3 ? 1 : 16;
        c.packed = variant == 1;
        c.rotary = variant != 2;
        c.interleaved = variant == 3;
        c.window = variant == 2 ? 9 : -1;
        c.softcap = variant == 1 ? 3.0f : 0.0f;
        c.padding = trial % 3;
        c.sinks = variant == 0 || variant == 2;
        check(c);
      }
    }
  }
}

// The tensor-core kernel's work split: query vectors of a KV group (G = 7, 16, 4) filling several
// 64-vector slices per prefill chunk, decodes sharing a slice, long contexts split over blocks
// (few tokens) or not (many), a window across slices.
TEST_F(PagedAttentionCuda, MatchesCpuOnGroupsLongPrefillsAndSplits) {
  struct Shape {
    DType dtype;
    int64_t heads, kv_heads, head_size, sequences, most_cached, most_fresh, window;
  };
  const Shape shapes[] = {
      {DType::kF16, 14, 2, 64, 3, 300, 130, -1},   {DType::kBF16, 28, 4, 128, 5, 200, 70, -1},
      {DType::kF16, 16, 1, 128, 2, 1500, 1, -1},   {DType::kBF16, 14, 2, 64, 8, 1000, 1, -1},
      {DType::kF16, 32, 8, 128, 4, 500, 90, 100},  {DType::kF16, 12, 3, 80, 6, 400, 40, -1},
  };
  for (const Shape& shape : shapes) {
    PagedCase c;
    c.dtype = shape.dtype;
    c.heads = shape.heads;
    c.kv_heads = shape.kv_heads;
    c.head_size = shape.head_size;
    c.sequences = shape.sequences;
    c.most_cached = shape.most_cached;
    c.most_fresh = shape.most_fresh;
    c.window = shape.window;
    c.sinks = shape.window >= 0 || shape.heads == 16;
    c.padding = 2;
    check(c);
  }
}

}  // namespace
}  // namespace onnx_genai::testing
