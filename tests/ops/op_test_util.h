// Builds a one-node graph and runs it through run_node_on_cpu, for op unit tests:
//   OpCall call("Add");
//   auto out = call.run({Tensor::from_vector<float>({2}, {1, 2}), ...});
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "graph/graph.h"
#include "runtime/node_runner.h"

namespace onnx_genai::testing {

class OpCall {
 public:
  explicit OpCall(std::string op_type, int opset = 17, std::string domain = "", int num_outputs = 1) {
    node_.op_type = std::move(op_type);
    node_.domain = std::move(domain);
    node_.opset = opset;
    node_.name = "test_" + node_.op_type;
    for (int i = 0; i < num_outputs; ++i) node_.outputs.push_back(graph_.add_value("out" + std::to_string(i)));
  }
  OpCall& attr_int(const std::string& name, int64_t v) { return set(name, Attribute{.kind = Attribute::Kind::kInt, .i = v}); }
  OpCall& attr_float(const std::string& name, float v) { return set(name, Attribute{.kind = Attribute::Kind::kFloat, .f = v}); }
  OpCall& attr_string(const std::string& name, std::string v) {
    Attribute a; a.kind = Attribute::Kind::kString; a.s = std::move(v); return set(name, std::move(a));
  }
  OpCall& attr_ints(const std::string& name, std::vector<int64_t> v) {
    Attribute a; a.kind = Attribute::Kind::kInts; a.ints = std::move(v); return set(name, std::move(a));
  }
  OpCall& attr_tensor(const std::string& name, Tensor t) {
    Attribute a; a.kind = Attribute::Kind::kTensor; a.t = std::move(t); return set(name, std::move(a));
  }
  Node& node() { return node_; }

  // Undefined tensors are omitted optional inputs.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, ThreadPool* pool = nullptr) {
    node_.inputs.clear();
    for (size_t i = 0; i < inputs.size(); ++i) {
      node_.inputs.push_back(inputs[i].defined() ? graph_.add_value("in" + std::to_string(i)) : nullptr);
    }
    return run_node_on_cpu(node_, inputs, pool);
  }

 private:
  OpCall& set(const std::string& name, Attribute a) { node_.attrs.set(name, std::move(a)); return *this; }
  Graph graph_;
  Node node_;
};

inline Tensor f32(Shape shape, std::vector<float> v) { return Tensor::from_vector<float>(std::move(shape), v); }

// `v` rounded to T (a 16-bit float type, or any type constructible from float).
template <typename T>
Tensor cast_tensor(Shape shape, const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return Tensor::from_vector<T>(std::move(shape), out);
}

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

template <typename T>
std::vector<float> to_floats(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(t.data<T>()[i]);
  return out;
}

inline void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "at element " << i;
  }
}

}  // namespace onnx_genai::testing
