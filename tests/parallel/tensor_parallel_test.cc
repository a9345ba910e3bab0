// Tensor parallelism on the CPU (runtime/tensor_parallel_pass.h, tensor_parallel_session.h):
// decoders built with tools/build_model.py (random weights; float32, float16 and int4 MatMulNBits,
// packed, separate and split q/k/v, per-head q/k norms) sharded for N = 2 and 4 ranks on threads
// must give the unsharded session's logits and greedy tokens.
//
// Tolerance: each rank computes its heads / intermediate columns / vocabulary slice exactly as the
// unsharded model does (the same kernels on fewer columns); only the o- and down-projections'
// sums over K change order (N partial dot products, then the all-reduce adds them in rank order).
// Float32 logits then agree to a few ulps of the largest intermediate: we allow 1e-5 of the
// largest |logit| (kRelTol below), and the greedy tokens must be identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include "onnx/model.h"
#include "runtime/model_parity.h"
#include "runtime/tensor_parallel_session.h"

namespace onnx_genai {
namespace {

using testing::ParityFixture;

constexpr double kRelTol = 1e-5;
constexpr int kTokens = 32;

// TensorParallelDecoders with 8 query heads, 4 KV heads (so N = 2 and 4 keep whole GQA groups).
const std::vector<std::string> kHeads = {"--preset", "llama", "--set", "num_attention_heads=8", "--set",
                                         "num_key_value_heads=4"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

class TensorParallelDecoders : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { scratch_ = new testing::ScopedTempDir(); }
  static void TearDownTestSuite() { delete scratch_; }

  // The model.onnx of `args`, built once per suite under `name`.
  static std::string model(const std::string& name, const std::vector<std::string>& args) {
    const std::filesystem::path dir = scratch_->path() / name;
    if (!std::filesystem::exists(dir / "model.onnx")) {
      auto built = testing::build_fixture_model(ParityFixture{name, args, {}, 0, ""}, scratch_->path());
      EXPECT_TRUE(built.is_ok()) << built.status().message();
    }
    return (dir / "model.onnx").string();
  }

  static testing::ScopedTempDir* scratch_;
};

testing::ScopedTempDir* TensorParallelDecoders::scratch_ = nullptr;

// One decoder run: each rank's inputs and outputs.
using RunAll = std::function<Status(const std::vector<std::vector<Tensor>>&, std::vector<std::vector<Tensor>>&)>;

struct Decode {
  std::vector<Tensor> logits;  // rank 0's, per run
  std::vector<int64_t> tokens;
};

double logit(const Tensor& t, int64_t i);

int64_t last_row_argmax(const Tensor& logits) {
  const int64_t vocab = logits.shape()[2];
  int64_t best = 0;  // the first of equal maxima: the lowest id
  for (int64_t v = 1; v < vocab; ++v) {
    if (logit(logits, logits.numel() - vocab + v) > logit(logits, logits.numel() - vocab + best)) best = v;
  }
  return best;
}

// Greedy decode of `prompt` then `count` - 1 more tokens, each rank carrying its own KV cache.
Result<Decode> greedy_decode(const std::vector<Session*>& ranks, const RunAll& run, std::vector<int64_t> prompt,
                             int count) {
  std::vector<std::map<std::string, Tensor>> past(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const IoInfo& input : ranks[r]->inputs()) {
      if (input.name.rfind("past_key_values.", 0) != 0) continue;
      OG_ASSIGN_OR_RETURN(past[r][input.name], testing::empty_past(input, 1));
    }
  }
  Decode decode;
  std::vector<int64_t> fresh = prompt;
  for (int step = 0; step < count; ++step) {
    const auto total = static_cast<int64_t>(prompt.size());
    std::vector<std::vector<Tensor>> inputs(ranks.size()), outputs(ranks.size());
    for (size_t r = 0; r < ranks.size(); ++r) {
      for (const IoInfo& input : ranks[r]->inputs()) {
        if (input.name == "input_ids") {
          inputs[r].push_back(Tensor::from_vector<int64_t>(Shape{1, static_cast<int64_t>(fresh.size())}, fresh));
        } else if (input.name == "position_ids") {
          std::vector<int64_t> positions(fresh.size());
          for (size_t i = 0; i < fresh.size(); ++i) positions[i] = total - static_cast<int64_t>(fresh.size()) + static_cast<int64_t>(i);
          inputs[r].push_back(Tensor::from_vector<int64_t>(Shape{1, static_cast<int64_t>(fresh.size())}, positions));
        } else if (input.name == "attention_mask") {
          inputs[r].push_back(Tensor::from_vector<int64_t>(Shape{1, total}, std::vector<int64_t>(static_cast<size_t>(total), 1)));
        } else {
          inputs[r].push_back(past[r].at(input.name));
        }
      }
      outputs[r].resize(ranks[r]->outputs().size());
    }
    OG_RETURN_IF_ERROR(run(inputs, outputs));
    for (size_t r = 0; r < ranks.size(); ++r) {
      OG_ASSIGN_OR_RETURN(auto bindings, testing::cache_bindings(*ranks[r]));
      for (const auto& [name, index] : bindings) past[r][name] = outputs[r][index];
    }
    OG_ASSIGN_OR_RETURN(size_t logits, testing::output_index(*ranks[0], "logits"));
    decode.logits.push_back(outputs[0][logits]);
    decode.tokens.push_back(last_row_argmax(outputs[0][logits]));
    fresh = {decode.tokens.back()};
    prompt.push_back(decode.tokens.back());
  }
  return decode;
}

Result<Decode> unsharded(const std::string& path, const std::vector<int64_t>& prompt) {
  OG_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::load(path));
  Session* s = session.get();
  return greedy_decode({s}, [s](const auto& in, auto& out) { return s->run_into(in[0], out[0]); }, prompt, kTokens);
}

Result<Decode> sharded(const std::string& path, int ranks, const std::vector<int64_t>& prompt) {
  SessionOptions options;
  options.num_threads = 1;
  OG_ASSIGN_OR_RETURN(auto tp, TensorParallelSessions::load(path, "logits", ranks, options));
  std::vector<Session*> sessions;
  for (int r = 0; r < ranks; ++r) sessions.push_back(&tp->rank(r));
  return greedy_decode(sessions, [&](const auto& in, auto& out) { return tp->run_into(in, out); }, prompt, kTokens);
}

double logit(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kF16 ? static_cast<double>(t.data<Float16>()[i]) : static_cast<double>(t.data<float>()[i]);
}

// The largest |a - b| over every run's logits, relative to the largest |a|.
double relative_difference(const Decode& a, const Decode& b) {
  double diff = 0, scale = 0;
  for (size_t s = 0; s < std::min(a.logits.size(), b.logits.size()); ++s) {
    const Tensor& x = a.logits[s];
    const Tensor& y = b.logits[s];
    if (x.shape() != y.shape() || x.dtype() != y.dtype()) return INFINITY;
    for (int64_t i = 0; i < x.numel(); ++i) {
      diff = std::max(diff, std::fabs(logit(x, i) - logit(y, i)));
      scale = std::max(scale, std::fabs(logit(x, i)));
    }
  }
  return scale > 0 ? diff / scale : diff;
}

void expect_same_decode(const std::string& path, int ranks, double tolerance = kRelTol) {
  const std::vector<int64_t> prompt = {1, 17, 400, 3, 999, 250, 42};
  auto want = unsharded(path, prompt);
  ASSERT_TRUE(want.is_ok()) << want.status().message();
  auto got = sharded(path, ranks, prompt);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  const double rel = relative_difference(*want, *got);
  std::printf("[ tp       ] %s, %d ranks: logits differ by %.3g of the largest\n", path.c_str(), ranks, rel);
  EXPECT_LE(rel, tolerance) << ranks << " ranks";
  EXPECT_EQ(got->tokens, want->tokens) << ranks << " ranks";
}

TEST_F(TensorParallelDecoders, Float32PackedQkvMatchesUnsharded) {
  const std::string path = model("f32", kHeads);
  for (int ranks : {2, 4}) expect_same_decode(path, ranks);
}

// float16 weights and activations: each rank rounds its o- and down-projection partial sums to
// float16 before the all-reduce adds them (in float32, rounded once), where the unsharded product
// rounds its whole sum once, so each such projection may differ by about one float16 ulp (2^-11
// of its output) per rank, compounding over the layers: 5e-3 of the largest logit is allowed
// (measured: 1.3e-3 at 2 ranks).
TEST_F(TensorParallelDecoders, Float16MatchesUnshardedWithinHalfPrecision) {
  const std::string path = model("f16", with(kHeads, {"--io-dtype", "f16"}));
  for (int ranks : {2, 4}) expect_same_decode(path, ranks, 5e-3);
}

// Qwen3's layout: q/k/v from one projection through a Split, the query and key through per-head
// RMS norms (Reshape -> SimplifiedLayerNormalization -> Reshape) before attention; with
// position_ids, also through com.microsoft RotaryEmbedding nodes.
TEST_F(TensorParallelDecoders, QkNormSplitQkvMatchesUnsharded) {
  const std::vector<std::string> qwen3 = {"--preset", "qwen3", "--set", "num_attention_heads=8", "--set", "num_key_value_heads=4"};
  for (const auto& [name, args] : {std::pair{"qwen3", qwen3}, std::pair{"qwen3_position_ids", with(qwen3, {"--position-ids"})}}) {
    const std::string path = model(name, args);
    for (int ranks : {2, 4}) expect_same_decode(path, ranks);
  }
}

// position_ids as a model input, read by rotary nodes before attention: every rank reads them
// whole, and each rotary turns only its rank's heads.
TEST_F(TensorParallelDecoders, PositionIdsInputMatchesUnsharded) {
  const std::string path = model("position_ids", with(kHeads, {"--position-ids"}));
  for (int ranks : {2, 4}) expect_same_decode(path, ranks);
}

// gpt-oss's attention sinks (GroupQueryAttention's head_sink, one learned logit per query head):
// each rank keeps its heads' sinks. With q/k/v and o biases as gpt-oss has them.
TEST_F(TensorParallelDecoders, HeadSinksMatchUnsharded) {
  const std::string path = model("sinks", with(kHeads, {"--set", "attention_sinks=true", "--set", "attention_bias=true",
                                                         "--set", "o_proj_bias=true"}));
  for (int ranks : {2, 4}) expect_same_decode(path, ranks);
}

// Mixture-of-experts layers (com.microsoft MoE / QMoE): each expert's intermediate features split
// across the ranks, the router whole. Float experts (mixtral), int4 experts with block scales
// (qwen3_moe, 16-value blocks of its 64 features), and gpt-oss's mxfp4 experts (32-value blocks
// of 256) with their biases, clamped SwiGLU and the attention sinks.
TEST_F(TensorParallelDecoders, MixtureOfExpertsMatchUnsharded) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"mixtral", {"--preset", "mixtral", "--set", "num_attention_heads=8", "--set", "num_key_value_heads=4"}},
      {"qwen3_moe_int4", {"--preset", "qwen3_moe", "--set", "num_attention_heads=8", "--set", "num_key_value_heads=4",
                          "--weights", "int4", "--block-size", "16"}},
      {"gpt_oss_mxfp4", {"--preset", "gpt_oss", "--set", "num_attention_heads=8", "--set", "num_key_value_heads=4",
                         "--moe-weights", "mxfp4"}},
  };
  for (const auto& [name, args] : cases) {
    const std::string path = model(name, args);
    auto model_ir = load_onnx_model(path);
    ASSERT_TRUE(model_ir.is_ok()) << model_ir.status().message();
    auto shards = shard_for_tensor_parallel(*(*model_ir)->graph, "logits", 1, 2);
    ASSERT_TRUE(shards.is_ok()) << name << ": " << shards.status().message();
    EXPECT_EQ(shards->moe_layers, 2) << name;
    for (int ranks : {2, 4}) expect_same_decode(path, ranks);
  }
}

TEST_F(TensorParallelDecoders, Int4SeparateQkvMatchesUnsharded) {
  const std::string path = model("int4_separate", with(kHeads, {"--weights", "int4", "--block-size", "16", "--separate-qkv"}));
  for (int ranks : {2, 4}) expect_same_decode(path, ranks);
}

// Blocks of 32 along the o-projection's K = 128: with 4 ranks each keeps one block, so ranks 1
// and 3 start at an odd block and their packed 4-bit zero points are re-packed.
TEST_F(TensorParallelDecoders, Int4AsymmetricPackedQkvMatchesUnsharded) {
  const std::string path = model("int4_zp", with(kHeads, {"--weights", "int4", "--block-size", "32", "--asymmetric"}));
  for (int ranks : {2, 4}) expect_same_decode(path, ranks);
}

// The shards: every layer's attention and MLP, the LM head and the embedding.
TEST_F(TensorParallelDecoders, ShardsEveryLayer) {
  auto model_ir = load_onnx_model(model("f32", kHeads));
  ASSERT_TRUE(model_ir.is_ok());
  auto shards = shard_for_tensor_parallel(*(*model_ir)->graph, "logits", 1, 2);
  ASSERT_TRUE(shards.is_ok()) << shards.status().message();
  EXPECT_EQ(shards->attention_layers, 2);
  EXPECT_EQ(shards->mlps, 2);
  EXPECT_TRUE(shards->lm_head);
  EXPECT_TRUE(shards->embedding);
}

// A refusal: one line naming `needle`.
void expect_refused(const std::string& path, int ranks, const std::string& needle) {
  auto tp = TensorParallelSessions::load(path, "logits", ranks);
  ASSERT_FALSE(tp.is_ok()) << ranks << " ranks";
  const std::string& message = tp.status().message();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find(needle), std::string::npos) << message << " (wanted '" << needle << "')";
}

TEST_F(TensorParallelDecoders, BadSplitsAreRefused) {
  const std::string f32 = model("f32", kHeads);
  expect_refused(f32, 3, "kv_num_heads 4 cannot be split evenly across 3");
  expect_refused(f32, 0, "at least one rank");
  expect_refused(f32, -2, "at least one rank");
  // Blocks of 64 along K = 128: 4 ranks would keep 32 rows of the o-projection each.
  const std::string coarse = model("int4_b64", with(kHeads, {"--weights", "int4", "--block-size", "64"}));
  expect_refused(coarse, 4, "do not fall on its quantization blocks of 64");
}

// The default model has 5 query heads and one KV head: no split keeps whole GQA groups.
TEST(TensorParallel, DefaultModelRefusesToSplitItsOneKvHead) {
  const std::string path = std::string(OG_SOURCE_DIR) + "/models/debian-prose-11m/model.onnx";
  for (int ranks : {2, 5}) expect_refused(path, ranks, "kv_num_heads 1 cannot be split evenly across");
}

}  // namespace
}  // namespace onnx_genai
