// com.microsoft GroupQueryAttention against the double-precision reference in
// attention_test_util.h: prompts and decode steps, separate and max-length (shared) caches,
// ragged batches, sliding windows, softcap, smooth softmax and head sinks, attention_bias,
// packed QKV, rotary in both layouts, position_ids, head sizes 64/80/96/128/256 and odd ones,
// f32 / f16 / bf16, and the multi-threaded KV split. Every output element is compared,
// including the zeroed tail of the present caches.
//
// Tolerances: |got - want| <= tol * (1 + |want|), tol = 2e-5 for f32 (f32 dot products and
// softmax against double), 4e-3 for f16 (outputs rounded to f16), 2e-2 for bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/attention_test_util.h"
#include "ops/cpu/avx2/attention_rows.h"
#include "ops/op.h"

namespace onnx_genai::testing {
namespace {

template <typename T>
float tolerance() {
  if constexpr (std::is_same_v<T, float>) return 2e-5f;
  if constexpr (std::is_same_v<T, Float16>) return 4e-3f;
  return 2e-2f;
}

template <typename T>
void expect_matches(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const float tol = tolerance<T>();
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " at element " << i;
  }
}

template <typename T>
void check_case(const GqaCase& c, uint32_t seed, ThreadPool* pool = nullptr) {
  SCOPED_TRACE("B=" + std::to_string(c.batch) + " S=" + std::to_string(c.seq) + " N=" + std::to_string(c.heads) +
               " Nkv=" + std::to_string(c.kv_heads) + " D=" + std::to_string(c.head) + " total=" + std::to_string(c.total));
  const GqaData x = make_gqa_data<T>(c, seed);
  OpCall call = gqa_call(c.omit_present);
  auto out = call.run(gqa_inputs<T>(c, x, call), pool);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  const GqaResult want = gqa_reference(c, x, [](double v) { return static_cast<double>(round_to<T>(static_cast<float>(v))); });
  ASSERT_EQ((*out)[0].shape(), (Shape{c.batch, c.seq, c.heads * c.head}));
  expect_matches<T>(to_floats<T>((*out)[0]), want.out, "output");
  if (c.omit_present) return;
  ASSERT_EQ((*out)[1].shape(), (Shape{c.batch, c.kv_heads, c.present_len(), c.head}));
  expect_matches<T>(to_floats<T>((*out)[1]), want.present_k, "present_key");
  expect_matches<T>(to_floats<T>((*out)[2]), want.present_v, "present_value");
}

GqaCase prompt(int64_t head, std::vector<int32_t> seqlens, int64_t seq) {
  GqaCase c;
  c.batch = static_cast<int64_t>(seqlens.size());
  c.seq = seq;
  c.total = seq;
  c.head = head;
  c.seqlens = std::move(seqlens);
  return c;
}

GqaCase decode(int64_t head, int64_t past, std::vector<int32_t> seqlens, int64_t total) {
  GqaCase c;
  c.batch = static_cast<int64_t>(seqlens.size());
  c.seq = 1;
  c.total = total;
  c.past = past;
  c.head = head;
  c.seqlens = std::move(seqlens);
  return c;
}

GqaCase with_rotary(GqaCase c, bool interleaved, int64_t rotary_dim = 0) {
  c.rotary_dim = rotary_dim > 0 ? rotary_dim : c.head;
  c.rotary_rows = c.present_len() + 3;
  c.interleaved = interleaved;
  return c;
}

template <typename T>
class GqaTyped : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, Float16, BFloat16>;
TYPED_TEST_SUITE(GqaTyped, StorageTypes);

TYPED_TEST(GqaTyped, RaggedPromptEveryHeadSize) {
  uint32_t seed = 1;
  for (int64_t head : {64, 80, 96, 128, 256, 40, 6}) {
    check_case<TypeParam>(prompt(head, {4, 2}, 5), seed++);
    const bool interleaved = seed % 2 == 0;
    check_case<TypeParam>(with_rotary(prompt(head, {5, 3, 0}, 6), interleaved), seed++);
  }
}

TYPED_TEST(GqaTyped, DecodeSeparateAndSharedBuffers) {
  uint32_t seed = 20;
  for (int64_t head : {64, 128, 72}) {
    check_case<TypeParam>(decode(head, 7, {7, 3}, 8), seed++);                        // present = past + 1
    check_case<TypeParam>(decode(head, 16, {9, 4}, 10), seed++);                      // max-length buffers
    check_case<TypeParam>(with_rotary(decode(head, 16, {15, 0}, 16), true), seed++);  // buffer full / first token
    check_case<TypeParam>(with_rotary(decode(head, 12, {6, 2}, 7), false), seed++);
  }
}

TYPED_TEST(GqaTyped, WindowSoftcapSinksAndBias) {
  GqaCase c = with_rotary(prompt(32, {6, 4}, 7), false);
  c.window = 3;
  check_case<TypeParam>(c, 40);
  c = decode(32, 16, {11, 5}, 12);
  c.window = 4;
  c.softcap = 0.7f;
  c.scale = 2.5f;
  check_case<TypeParam>(c, 41);
  c = prompt(32, {5, 2}, 6);
  c.smooth = true;
  check_case<TypeParam>(c, 42);
  c.smooth = false;
  c.sink = true;
  check_case<TypeParam>(c, 43);
  c.bias_batch = 2;
  c.bias_heads = 1;
  c.softcap = 1.5f;
  check_case<TypeParam>(c, 44);
  c = decode(32, 9, {8, 3}, 9);
  c.bias_batch = 1;
  c.bias_heads = 4;
  check_case<TypeParam>(c, 45);
}

TEST(Gqa, NotCausalAndWindowOfOne) {
  GqaCase c = prompt(16, {4, 1}, 5);
  c.causal = false;
  check_case<float>(c, 50);
  c = prompt(16, {4}, 5);
  c.window = 1;  // each token sees only itself
  check_case<float>(c, 51);
}

TEST(Gqa, PackedQkvWithRotaryBothLayouts) {
  for (bool interleaved : {false, true}) {
    GqaCase c = with_rotary(prompt(64, {4, 2}, 5), interleaved);
    c.packed = true;
    check_case<float>(c, 60 + interleaved);
    c = with_rotary(decode(64, 8, {8, 4}, 9), interleaved, 32);  // partial rotary
    c.packed = true;
    check_case<Float16>(c, 62 + interleaved);
  }
}

TEST(Gqa, ContinuedPromptAndPositionIds) {
  GqaCase c = with_rotary(decode(32, 5, {7}, 8), true);
  c.seq = 3;  // three more tokens after five cached ones
  check_case<float>(c, 70);
  c.position_ids = true;
  check_case<float>(c, 71);
  c = with_rotary(prompt(32, {4, 2}, 5), false);
  c.rotary_rows = 12;
  c.position_ids = true;  // the first prompt uses only position_ids[0][0], as an offset
  check_case<float>(c, 72);
  c = with_rotary(decode(32, 8, {6, 3}, 7), false);
  c.position_ids = true;
  check_case<Float16>(c, 73);
}

TEST(Gqa, SharedKvAttendsToPastOnly) {
  GqaCase c = decode(32, 10, {7, 3}, 8);
  c.shared_kv = true;
  check_case<float>(c, 80);
  c = with_rotary(decode(32, 10, {4, 2}, 5), false);
  c.seq = 5;  // a first prompt over a shared cache: causal from row 0
  c.shared_kv = true;
  check_case<float>(c, 81);
}

TEST(Gqa, PresentOutputsOmitted) {
  GqaCase c = decode(32, 6, {6, 2}, 7);
  c.omit_present = true;
  check_case<float>(c, 90);
}

TEST(Gqa, GroupsWiderThanOneUnit) {
  GqaCase c = prompt(16, {8, 5}, 9);
  c.heads = 66;  // 66 query heads on 2 KV heads: 33 per group, more than one unit carries (32)
  check_case<float>(c, 95);
  c = decode(16, 9, {8, 5}, 9);
  c.heads = 34;
  c.kv_heads = 1;
  check_case<float>(c, 96);
}

// Long contexts on several threads take the flash-decoding split; ragged batches give some
// units empty chunks.
TEST(Gqa, LongDecodeSplitsKeysAcrossThreads) {
  ThreadPool pool(4);
  GqaCase c = decode(64, 3000, {2999, 1200}, 3000);
  c.heads = 8;
  c.kv_heads = 1;
  check_case<float>(c, 100, &pool);
  c = with_rotary(decode(128, 2048, {2047}, 2048), false);
  c.heads = 14;
  c.kv_heads = 2;
  c.window = 700;
  c.softcap = 1.0f;
  c.sink = true;
  check_case<Float16>(c, 101, &pool);
  c = decode(128, 2100, {2100}, 2101);  // 17 MB of past rows: copied with streaming stores
  c.heads = 32;
  c.kv_heads = 8;
  c.window = 1500;  // rows before the window are copied but never read
  check_case<float>(c, 103, &pool);
  c = prompt(64, {300, 120}, 301);  // prompts split by rows, not keys
  c.heads = 8;
  check_case<float>(c, 102, &pool);
}

// Past and present as one buffer (ORT's past_present_share_buffer): old rows stay, the new row
// lands at seqlens_k, nothing else is touched.
TEST(Gqa, SharedPastPresentBufferWritesInPlace) {
  const GqaCase c = decode(16, 8, {5, 2}, 6);
  const GqaData x = make_gqa_data<float>(c, 110);
  OpCall call = gqa_call();
  std::vector<Tensor> in = gqa_inputs<float>(c, x, call);
  const Node& node = call.node();
  std::vector<TensorInfo> infos(in.size());
  std::vector<const TensorInfo*> info_ptrs;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < in.size(); ++i) {
    infos[i] = {in[i].dtype(), in[i].shape()};
    info_ptrs.push_back(in[i].defined() ? &infos[i] : nullptr);
    values.push_back(in[i].defined() ? &in[i] : nullptr);
  }
  const OpSchema* schema = OpRegistry::instance().find_schema("com.microsoft", "GroupQueryAttention");
  InferContext infer{node, info_ptrs, values, {}};
  infer.outputs.resize(3);
  ASSERT_TRUE(schema->infer_shapes(infer).is_ok());
  ASSERT_EQ(infer.outputs[1]->shape, in[3].shape());  // present as long as past
  std::vector<DType> dtypes;
  for (const Tensor& t : in) dtypes.push_back(t.dtype());
  auto def = OpRegistry::instance().find_kernel(node, DeviceType::kCpu, dtypes);
  ASSERT_TRUE(def.is_ok());
  std::unique_ptr<OpKernel> kernel = (*def)->create(node);
  std::vector<const TensorInfo*> outs{&*infer.outputs[0], &*infer.outputs[1], &*infer.outputs[2]};
  PrepareContext prepare{node, info_ptrs, {}, outs, 0, nullptr};
  prepare.input_values = values;
  ASSERT_TRUE(kernel->prepare(prepare).is_ok());
  std::vector<float> workspace(prepare.workspace_bytes / sizeof(float) + 16);
  auto output = Tensor::allocate(DType::kF32, infer.outputs[0]->shape);
  ASSERT_TRUE(output.is_ok());
  std::vector<KernelTensor> in_views, out_views;
  for (const Tensor& t : in) in_views.push_back({t.dtype(), &t.shape(), const_cast<void*>(t.raw())});
  out_views = {{DType::kF32, &output->shape(), output->raw()}, in_views[3], in_views[4]};
  KernelContext run{in_views, out_views, workspace.data(), nullptr};
  ASSERT_TRUE(kernel->run(run).is_ok());

  const GqaResult want = gqa_reference(c, x, [](double v) { return v; });
  expect_matches<float>(to_floats<float>(*output), want.out, "output");
  const std::vector<float> cache = to_floats<float>(in[3]);
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t g = 0; g < c.kv_heads; ++g) {
      for (int64_t j = 0; j < c.past; ++j) {
        for (int64_t i = 0; i < c.head; ++i) {
          const size_t at = static_cast<size_t>(((b * c.kv_heads + g) * c.past + j) * c.head + i);
          // Row seqlens_k[b] is the new key; every other row keeps its old value.
          const double expect = j == c.seqlens[static_cast<size_t>(b)] ? want.present_k[at] : x.past_k[at];
          ASSERT_EQ(cache[at], static_cast<float>(expect)) << "b=" << b << " g=" << g << " row " << j;
        }
      }
    }
  }
}

// Each row-kernel table this CPU runs, against double loops: odd sizes, strided rows, masked tails.
TEST(AttentionRowKernels, EveryBuildMatchesReference) {
  std::vector<const AttentionRowKernels*> builds{&scalar_attention_row_kernels()};
  if (cpu_features().avx2) builds.push_back(&avx2::attention_row_kernels());
  if (cpu_features().avx512) builds.push_back(&avx512::attention_row_kernels());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (const AttentionRowKernels* k : builds) {
    for (int64_t d : {1, 5, 8, 16, 23, 64, 80, 100, 136, 256, 300}) {
      for (int64_t n : {1, 3, 8, 9, 17}) {
        const int64_t stride = d + 3;
        std::vector<float> q(static_cast<size_t>(d)), rows(static_cast<size_t>(n * stride)), p(static_cast<size_t>(n));
        for (float& v : q) v = unit(rng);
        for (float& v : rows) v = unit(rng);
        for (float& v : p) v = unit(rng);
        std::vector<float> scores(static_cast<size_t>(n));
        k->dot_rows(q.data(), rows.data(), stride, n, d, scores.data());
        std::vector<float> acc(static_cast<size_t>(d), 0.5f);
        k->accumulate_rows(p.data(), rows.data(), stride, n, d, 0.25f, acc.data());
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(q[static_cast<size_t>(i)]) * rows[static_cast<size_t>(j * stride + i)];
          ASSERT_NEAR(scores[static_cast<size_t>(j)], dot, 1e-5 * (1 + static_cast<double>(d))) << "d=" << d << " n=" << n;
        }
        for (int64_t i = 0; i < d; ++i) {
          double want = 0.5 * 0.25;
          for (int64_t j = 0; j < n; ++j) want += static_cast<double>(p[static_cast<size_t>(j)]) * rows[static_cast<size_t>(j * stride + i)];
          ASSERT_NEAR(acc[static_cast<size_t>(i)], want, 1e-5 * (1 + static_cast<double>(n))) << "d=" << d << " n=" << n;
        }
        // The tile forms: kQueryTile queries (q shifted per query) against the same rows.
        std::vector<std::vector<float>> qs(kQueryTile), tile_scores(kQueryTile, std::vector<float>(static_cast<size_t>(n))),
            tile_acc(kQueryTile, std::vector<float>(static_cast<size_t>(d), 0.5f)), ps(kQueryTile);
        const float* q_ptrs[kQueryTile];
        const float* p_ptrs[kQueryTile];
        float* score_ptrs[kQueryTile];
        float* acc_ptrs[kQueryTile];
        const float corrections[kQueryTile] = {0.25f, 1.0f, 0.0f, 2.0f};
        for (int r = 0; r < kQueryTile; ++r) {
          for (float v : q) qs[static_cast<size_t>(r)].push_back(v + 0.1f * static_cast<float>(r));
          for (float v : p) ps[static_cast<size_t>(r)].push_back(v - 0.2f * static_cast<float>(r));
          q_ptrs[r] = qs[static_cast<size_t>(r)].data();
          p_ptrs[r] = ps[static_cast<size_t>(r)].data();
          score_ptrs[r] = tile_scores[static_cast<size_t>(r)].data();
          acc_ptrs[r] = tile_acc[static_cast<size_t>(r)].data();
        }
        k->dot_rows_tile(q_ptrs, rows.data(), stride, n, d, score_ptrs);
        k->accumulate_rows_tile(p_ptrs, rows.data(), stride, n, d, corrections, acc_ptrs);
        for (int r = 0; r < kQueryTile; ++r) {
          for (int64_t j = 0; j < n; ++j) {
            double dot = 0;
            for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(q_ptrs[r][i]) * rows[static_cast<size_t>(j * stride + i)];
            ASSERT_NEAR(score_ptrs[r][j], dot, 1e-5 * (1 + static_cast<double>(d))) << "tile d=" << d << " n=" << n << " r=" << r;
          }
          for (int64_t i = 0; i < d; ++i) {
            double want = 0.5 * corrections[r];
            for (int64_t j = 0; j < n; ++j) want += static_cast<double>(p_ptrs[r][j]) * rows[static_cast<size_t>(j * stride + i)];
            ASSERT_NEAR(acc_ptrs[r][i], want, 1e-5 * (1 + static_cast<double>(n))) << "tile d=" << d << " n=" << n << " r=" << r;
          }
        }
        std::vector<float> x = scores;
        x[0] = -std::numeric_limits<float>::infinity();  // a masked key: contributes exactly 0
        const float m = k->row_max(scores.data(), n);
        EXPECT_EQ(m, *std::max_element(scores.begin(), scores.end()));
        const float sum = k->exp_sum(x.data(), n, m);
        double want_sum = 0;
        for (int64_t j = 1; j < n; ++j) want_sum += std::exp(static_cast<double>(scores[static_cast<size_t>(j)]) - m);
        EXPECT_EQ(x[0], 0.0f);
        EXPECT_NEAR(sum, want_sum, 1e-6 * (1 + want_sum));
      }
    }
  }
}

}  // namespace
}  // namespace onnx_genai::testing
