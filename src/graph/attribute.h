// Node attributes, decoded from onnx::AttributeProto once at load.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "onnx_genai/tensor.h"

namespace onnx_genai {

class Graph;

struct Attribute {
  enum class Kind { kInt, kFloat, kString, kTensor, kGraph, kInts, kFloats, kStrings };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
};

class Attributes {
 public:
  void set(std::string name, Attribute a) { map_[std::move(name)] = std::move(a); }
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  const Attribute* find(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;
  float get_float(const std::string& name, float fallback) const;
  std::string get_string(const std::string& name, const std::string& fallback) const;
  // Empty when absent.
  std::vector<int64_t> get_ints(const std::string& name) const;
  std::vector<float> get_floats(const std::string& name) const;
  const std::map<std::string, Attribute>& all() const { return map_; }

 private:
  std::map<std::string, Attribute> map_;
};

}  // namespace onnx_genai
