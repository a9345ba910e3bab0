// Feeds >= 100k mutated model files to the loader (and session creation, which type-checks and
// folds constants). Every one must come back as a model or an error Status: no crash, no hang,
// no leak (the sanitizer build runs this under ASan/UBSan with leak detection).
#include <gtest/gtest.h>

#include <cstdint>

#include "onnx/model.h"
#include "onnx_genai/session.h"
#include "onnx_model_builder.h"

namespace onnx_genai {
namespace {

using testing::ModelBuilder;

std::vector<std::string> seed_models() {
  std::vector<std::string> seeds;
  {
    ModelBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {-1, 4}, {"n"});
    b.initializer_f32("w", {4}, {1, 2, 3, 4});
    b.initializer_i64("shape", {2}, {2, 2});
    b.node("Add", {"x", "w"}, {"a"});
    b.node("Relu", {"a"}, {"r"});
    b.node("Reshape", {"w", "shape"}, {"y2"});
    b.node("Softmax", {"r"}, {"y"});
    b.output("y", onnx::TensorProto::FLOAT);
    b.output("y2", onnx::TensorProto::FLOAT);
    seeds.push_back(b.bytes());
  }
  {
    ModelBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {2});
    b.input("c", onnx::TensorProto::BOOL, {});
    auto& n = b.node("If", {"c"}, {"y"});
    for (const char* name : {"then_branch", "else_branch"}) {
      auto* a = n.add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::GRAPH);
      auto* g = a->mutable_g();
      auto* node = g->add_node();
      node->set_op_type("Neg");
      node->add_input("x");
      node->add_output("o");
      g->add_output()->set_name("o");
    }
    b.output("y", onnx::TensorProto::FLOAT);
    seeds.push_back(b.bytes());
  }
  return seeds;
}

// Deterministic xorshift so every run tests the same mutants.
struct Rng {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
};

std::string mutate(const std::string& seed, Rng& rng) {
  std::string m = seed;
  const int edits = 1 + static_cast<int>(rng.below(4));
  for (int e = 0; e < edits && !m.empty(); ++e) {
    const size_t at = rng.below(m.size());
    switch (rng.below(6)) {
      case 0: m[at] = static_cast<char>(m[at] ^ (1 << rng.below(8))); break;            // bit flip
      case 1: m[at] = static_cast<char>(rng.next()); break;                              // random byte
      case 2: m.resize(at); break;                                                       // truncate
      case 3: m.insert(at, 1, static_cast<char>(rng.next())); break;                     // insert
      case 4: m.erase(at, 1 + rng.below(8)); break;                                      // delete
      case 5: m.insert(at, m.substr(rng.below(m.size()), 1 + rng.below(16))); break;     // duplicate a run
    }
  }
  return m;
}

TEST(LoaderFuzz, HundredThousandMutantsNeverCrash) {
  const auto seeds = seed_models();
  Rng rng;
  int loaded = 0, sessions = 0, rejected = 0;
  constexpr int kMutants = 100000;
  for (int i = 0; i < kMutants; ++i) {
    auto bytes = std::make_shared<std::string>(mutate(seeds[static_cast<size_t>(i) % seeds.size()], rng));
    auto model = load_onnx_model_from_memory(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size(), bytes,
                                             "/nonexistent", "mutant.onnx");
    if (!model.is_ok()) {
      ++rejected;
      EXPECT_FALSE(model.status().message().empty());
      continue;
    }
    ++loaded;
    SessionOptions options;
    options.num_threads = 1;
    auto session = Session::create(std::move(model).value(), options);
    if (session.is_ok()) ++sessions;
  }
  std::printf("mutants: %d, loaded: %d, sessions created: %d, rejected with an error: %d\n", kMutants, loaded, sessions,
              rejected);
  EXPECT_EQ(loaded + rejected, kMutants);
  EXPECT_GT(rejected, 0);
  EXPECT_GT(loaded, 0);  // many mutations hit names or values and still parse
}

}  // namespace
}  // namespace onnx_genai
