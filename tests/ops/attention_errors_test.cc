// GroupQueryAttention on bad input: shape problems fail while planning, bad seqlens_k /
// position_ids values fail the run; every message names the node and says what is wrong.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ops/attention_test_util.h"

namespace onnx_genai::testing {
namespace {

// Runs `c` after `edit` changes the inputs or the call; expects an error mentioning `needle`.
void expect_error(const GqaCase& c, const std::string& needle,
                  const std::function<void(std::vector<Tensor>&, OpCall&)>& edit = nullptr) {
  const GqaData x = make_gqa_data<float>(c, 3);
  OpCall call = gqa_call();
  std::vector<Tensor> in = gqa_inputs<float>(c, x, call);
  if (edit) edit(in, call);
  auto out = call.run(in);
  ASSERT_FALSE(out.is_ok()) << "expected an error about: " << needle;
  const std::string message = out.status().message();
  EXPECT_NE(message.find("test_GroupQueryAttention"), std::string::npos) << message;
  EXPECT_NE(message.find(needle), std::string::npos) << message;
}

GqaCase decode_case() {
  GqaCase c;
  c.batch = 2;
  c.past = 8;
  c.seqlens = {7, 3};
  c.total = 8;
  return c;
}

Tensor zeros(Shape shape) {
  return cast_tensor<float>(shape, std::vector<float>(static_cast<size_t>(shape.numel()), 0.0f));
}

TEST(GqaErrors, HeadCountsAndHiddenSizes) {
  GqaCase c = decode_case();
  expect_error(c, "num_heads 4 must be a multiple of kv_num_heads 3",
               [](auto&, OpCall& call) { call.attr_int("kv_num_heads", 3); });
  expect_error(c, "query hidden size 64 is not divisible by 5",
               [](auto&, OpCall& call) { call.attr_int("num_heads", 5).attr_int("kv_num_heads", 1); });
  expect_error(c, "key shape [2,1,30] must be [batch=2, sequence, kv_num_heads*head_size=32]",
               [](std::vector<Tensor>& in, OpCall&) { in[1] = zeros(Shape{2, 1, 30}); });
  expect_error(c, "key sequence length 2 must equal the query's (1) or be 0",
               [](std::vector<Tensor>& in, OpCall&) { in[1] = in[2] = zeros(Shape{2, 2, 32}); });
  expect_error(c, "key and value must be both present or both absent",
               [](std::vector<Tensor>& in, OpCall&) { in[2] = Tensor(); });
}

TEST(GqaErrors, MismatchedCacheShapes) {
  GqaCase c = decode_case();
  expect_error(c, "past_key shape [2,2,8,8] must be [batch=2, kv_num_heads=2, past_sequence, head_size=16]",
               [](std::vector<Tensor>& in, OpCall&) { in[3] = zeros(Shape{2, 2, 8, 8}); });
  expect_error(c, "past_value shape [2,4,8,16] must be",
               [](std::vector<Tensor>& in, OpCall&) { in[4] = zeros(Shape{2, 4, 8, 16}); });
  expect_error(c, "have different sequence lengths",
               [](std::vector<Tensor>& in, OpCall&) { in[4] = zeros(Shape{2, 2, 9, 16}); });
  expect_error(c, "past_key and past_value must be both present or both absent",
               [](std::vector<Tensor>& in, OpCall&) { in[4] = Tensor(); });
  expect_error(c, "seqlens_k must be int32 [batch=2]",
               [](std::vector<Tensor>& in, OpCall&) { in[5] = Tensor::from_vector<int32_t>(Shape{3}, {1, 1, 1}); });
  expect_error(c, "total_sequence_length must be positive",
               [](std::vector<Tensor>& in, OpCall&) { in[6] = Tensor::from_vector<int32_t>(Shape{}, {0}); });
  // ORT 1.30 takes a scalar or [1] only ("total_sequence_length tensor must be of one element").
  expect_error(c, "total_sequence_length must be an int32 scalar or [1], got int32 [1,1]",
               [](std::vector<Tensor>& in, OpCall&) { in[6] = Tensor::from_vector<int32_t>(Shape{1, 1}, {8}); });
}

TEST(GqaErrors, SeqlensOutsideTheCacheFailTheRun) {
  GqaCase c = decode_case();
  c.seqlens = {7, 8};  // row 8 does not exist in a present of 8 rows
  expect_error(c, "seqlens_k[1] = 8 is out of range [0, 8)");
  c.seqlens = {-1, 2};
  expect_error(c, "seqlens_k[0] = -1 is out of range");
  c.past = 4;  // a present of 8 rows, but the past holds only 4 of the 7 rows this step keeps
  c.seqlens = {7, 2};
  expect_error(c, "seqlens_k[0] = 7 needs 7 past rows but past_key holds 4");
  GqaCase continued = decode_case();
  continued.batch = 1;
  continued.seq = 3;
  continued.seqlens = {1};  // three new tokens cannot end at total length 2
  expect_error(continued, "seqlens_k[0] = 1 is too small for sequence length 3");
  continued.batch = 2;
  continued.seqlens = {6, 6};
  expect_error(continued, "batch must be 1 when a prompt continues past context");
}

TEST(GqaErrors, RotaryCachesTooShortOrMismatched) {
  GqaCase c = decode_case();
  c.rotary_dim = 16;
  c.rotary_rows = 7;  // fewer positions than total_sequence_length
  expect_error(c, "cos_cache has 7 positions, fewer than total_sequence_length 8");
  c.total = 4;  // present still 8 rows long (past buffer), so seqlens_k may point past the cache
  c.seqlens = {7, 2};
  expect_error(c, "rotary position 7 (batch 0, token 0) is out of range for cos_cache's 7 positions");
  c = decode_case();
  c.rotary_dim = 16;
  c.rotary_rows = 10;
  c.position_ids = true;
  expect_error(c, "rotary position -3", [](std::vector<Tensor>& in, OpCall&) {
    in[9] = Tensor::from_vector<int64_t>(Shape{2, 1}, {1, -3});
  });
  expect_error(c, "cos_cache [10,8] and sin_cache [10,4] differ",
               [](std::vector<Tensor>& in, OpCall&) { in[8] = zeros(Shape{10, 4}); });
  expect_error(c, "must be [positions, rotary_dim/2] with rotary_dim <= head_size=16",
               [](std::vector<Tensor>& in, OpCall&) { in[7] = in[8] = zeros(Shape{10, 9}); });
  expect_error(c, "cos_cache and sin_cache must be both present or both absent",
               [](std::vector<Tensor>& in, OpCall&) { in[8] = Tensor(); });
}

TEST(GqaErrors, BiasSinkAndUnsupportedFeatures) {
  GqaCase c = decode_case();
  c.bias_batch = 2;
  c.bias_heads = 4;
  expect_error(c, "attention_bias shape [2,3,1,8] must be",
               [](std::vector<Tensor>& in, OpCall&) { in[10] = zeros(Shape{2, 3, 1, 8}); });
  c.bias_batch = 0;
  c.sink = true;
  expect_error(c, "head_sink must be float32 [num_heads=4]",
               [](std::vector<Tensor>& in, OpCall&) { in[11] = zeros(Shape{2}); });
  c.sink = false;
  expect_error(c, "sliding_window_cache=1 is not supported", [](auto&, OpCall& call) { call.attr_int("sliding_window_cache", 1); });
  expect_error(c, "quantized KV caches", [](auto&, OpCall& call) { call.attr_string("k_quant_type", "PER_TENSOR"); });
  expect_error(c, "unsupported attribute 'foo'", [](auto&, OpCall& call) { call.attr_int("foo", 1); });
  expect_error(c, "local_window_size must be -1 when causal is 0",
               [](auto&, OpCall& call) { call.attr_int("causal", 0).attr_int("local_window_size", 2); });
  expect_error(c, "input 12 (k_scale, v_scale, q_norm_weight or k_norm_weight) is not supported",
               [](std::vector<Tensor>& in, OpCall&) {
                 in.resize(13);
                 in[12] = zeros(Shape{1});
               });
}

TEST(GqaErrors, TotalSequenceLengthBeyondBiasColumns) {
  GqaCase c = decode_case();
  c.past = 12;   // present 12 rows while total_sequence_length (and the bias) says 8
  c.seqlens = {9, 2};
  c.bias_batch = 1;
  c.bias_heads = 1;
  expect_error(c, "seqlens_k[0] = 9 reaches past attention_bias's 8 key columns");
}

}  // namespace
}  // namespace onnx_genai::testing
