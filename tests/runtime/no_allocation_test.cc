// Replaying a plan allocates nothing: after the first run compiles the plan, run_into with the
// same shapes and the same output tensors must not call operator new even once (on any thread).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "onnx/model.h"
#include "onnx_genai/session.h"
#include "onnx_model_builder.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace onnx_genai {
namespace {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

// A slice of a decoder layer: embedding gather, norm, projection, attention-style softmax,
// reshape/transpose, residual. Enough ops that a stray per-run allocation shows up.
ModelBuilder decoder_slice() {
  ModelBuilder b;
  b.input("ids", onnx::TensorProto::INT64, {1, -1}, {"", "seq"});
  std::vector<float> table(64 * 32), w(32 * 32), scale(32, 1.0f), bias(32, 0.0f);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>((i * 7919) % 97) / 97.0f - 0.5f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 104729) % 89) / 89.0f - 0.5f;
  b.initializer_f32("table", {64, 32}, table);
  b.initializer_f32("w", {32, 32}, w);
  b.initializer_f32("scale", {32}, scale);
  b.initializer_f32("bias", {32}, bias);
  b.initializer_i64("heads", {4}, {1, -1, 4, 8});
  b.node("Gather", {"table", "ids"}, {"x"});
  ModelBuilder::attr_int(b.node("LayerNormalization", {"x", "scale", "bias"}, {"n"}), "axis", -1);
  b.node("MatMul", {"n", "w"}, {"h"});
  b.node("Reshape", {"h", "heads"}, {"hr"});
  ModelBuilder::attr_ints(b.node("Transpose", {"hr"}, {"ht"}), "perm", {0, 2, 1, 3});
  ModelBuilder::attr_int(b.node("Softmax", {"ht"}, {"p"}), "axis", -1);
  ModelBuilder::attr_ints(b.node("Transpose", {"p"}, {"pt"}), "perm", {0, 2, 1, 3});
  b.node("Reshape", {"pt", "shape_back"}, {"pr"});
  b.initializer_i64("shape_back", {3}, {1, -1, 32});
  b.node("Add", {"pr", "x"}, {"y"});
  b.output("y", kF32);
  return b;
}

TEST(NoAllocation, ReplayingAPlanAllocatesNothing) {
  const std::string bytes = decoder_slice().bytes();
  auto owner = std::make_shared<std::string>(bytes);
  auto model = load_onnx_model_from_memory(reinterpret_cast<const uint8_t*>(owner->data()), owner->size(), owner, ".",
                                           "slice.onnx");
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  for (int threads : {1, 2}) {
    SessionOptions options;
    options.num_threads = threads;
    auto session = Session::create(*model, options);
    ASSERT_TRUE(session.is_ok()) << session.status().message();
    std::vector<int64_t> ids(17);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 5 % 64);
    std::vector<Tensor> inputs{Tensor::from_vector<int64_t>(Shape{1, 17}, ids)};
    std::vector<Tensor> outputs;
    ASSERT_TRUE((*session)->run_into(inputs, outputs).is_ok());  // compiles the plan
    g_allocations = 0;
    g_counting = true;
    Status status = Status::ok();
    for (int i = 0; i < 10 && status.is_ok(); ++i) status = (*session)->run_into(inputs, outputs);
    g_counting = false;
    ASSERT_TRUE(status.is_ok()) << status.message();
    EXPECT_EQ(g_allocations.load(), 0) << "threads=" << threads;
    EXPECT_EQ(outputs[0].shape(), (Shape{1, 17, 32}));
  }
}

}  // namespace
}  // namespace onnx_genai
