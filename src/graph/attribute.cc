#include "graph/attribute.h"

namespace onnx_genai {

const Attribute* Attributes::find(const std::string& name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

int64_t Attributes::get_int(const std::string& name, int64_t fallback) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::kInt ? a->i : fallback;
}

float Attributes::get_float(const std::string& name, float fallback) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::kFloat ? a->f : fallback;
}

std::string Attributes::get_string(const std::string& name, const std::string& fallback) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::kString ? a->s : fallback;
}

std::vector<int64_t> Attributes::get_ints(const std::string& name) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::kInts ? a->ints : std::vector<int64_t>{};
}

std::vector<float> Attributes::get_floats(const std::string& name) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::kFloats ? a->floats : std::vector<float>{};
}

}  // namespace onnx_genai
