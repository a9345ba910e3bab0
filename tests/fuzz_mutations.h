// Seeded mutations for the fuzz tests of small text inputs (package configs, command lines):
// byte edits of any text, and JSON edits (a node replaced by a hostile value, removed, or
// swapped with another) that keep the text parseable so the checks behind the parser run too.
#pragma once

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace onnx_genai::testing {

using FuzzRng = std::mt19937_64;

inline size_t fuzz_pick(FuzzRng& rng, size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

template <typename T>
const T& fuzz_pick(FuzzRng& rng, const std::vector<T>& items) {
  return items[fuzz_pick(rng, items.size())];
}

// Bytes that parsers treat specially: UTF-8 lead and continuation bytes, NUL, quotes, escapes.
inline std::string fuzz_bytes(FuzzRng& rng, size_t max_bytes) {
  static constexpr char kBytes[] = "\x80\xBF\xC0\xC2\xE0\xED\xF0\xF4\xFF\x00 -=\\\"{}[],:0";
  static const std::string kInteresting(kBytes, sizeof kBytes - 1);  // the NUL inside counts
  std::string out(fuzz_pick(rng, max_bytes + 1), '\0');
  for (char& c : out) {
    c = fuzz_pick(rng, 2) ? static_cast<char>(fuzz_pick(rng, 256)) : kInteresting[fuzz_pick(rng, kInteresting.size())];
  }
  return out;
}

// One byte-level edit: flipped bytes, a truncation, an insertion or a deleted range.
inline std::string mutate_bytes(FuzzRng& rng, std::string text) {
  if (text.empty()) return fuzz_bytes(rng, 8);
  const size_t at = fuzz_pick(rng, text.size());
  switch (fuzz_pick(rng, 4)) {
    case 0:
      for (size_t n = 1 + fuzz_pick(rng, 4); n > 0; --n) {
        text[fuzz_pick(rng, text.size())] ^= static_cast<char>(1 + fuzz_pick(rng, 255));
      }
      return text;
    case 1:
      return text.substr(0, at);
    case 2:
      return text.insert(at, fuzz_bytes(rng, 6));
    default:
      return text.erase(at, 1 + fuzz_pick(rng, 16));
  }
}

// Values that break typed readers: wrong types, bounds of int32/int64 and past them, negatives,
// NaN-like and deep values.
inline nlohmann::json hostile_json_value(FuzzRng& rng) {
  static const std::vector<nlohmann::json> kValues = {
      nullptr, true, 0, -1, 1, 2147483647, 2147483648LL, -2147483649LL, 9223372036854775807LL,
      18446744073709551615ULL, 1e308, -1e-45, 0.5, "", "\xff\xfe", "%d%d%s%n", nlohmann::json::array(),
      nlohmann::json::array({-1, 1 << 30}), nlohmann::json::object(), nlohmann::json::parse(R"({"a": [[[[[[1]]]]]]})")};
  return fuzz_pick(rng, kValues);
}

// Every node below the root of `doc`, as JSON pointers.
inline void json_nodes(const nlohmann::json& node, const nlohmann::json::json_pointer& path,
                       std::vector<nlohmann::json::json_pointer>& out) {
  if (!path.empty()) out.push_back(path);
  if (node.is_object()) {
    for (const auto& [key, child] : node.items()) json_nodes(child, path / key, out);
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) json_nodes(node[i], path / i, out);
  }
}

// One JSON-level edit of `doc` (replace, remove or swap nodes), dumped; or a byte edit of its text.
inline std::string mutate_json(FuzzRng& rng, nlohmann::json doc) {
  std::vector<nlohmann::json::json_pointer> nodes;
  json_nodes(doc, nlohmann::json::json_pointer(), nodes);
  if (nodes.empty() || fuzz_pick(rng, 4) == 0) return mutate_bytes(rng, doc.dump());
  const nlohmann::json::json_pointer& target = fuzz_pick(rng, nodes);
  switch (fuzz_pick(rng, 3)) {
    case 0:
      doc[target] = hostile_json_value(rng);
      break;
    case 1: {
      nlohmann::json& parent = doc[target.parent_pointer()];
      if (parent.is_object()) parent.erase(target.back());
      break;
    }
    default: {
      const nlohmann::json::json_pointer& other = fuzz_pick(rng, nodes);
      // A node swapped with one of its own descendants or ancestors would dangle; copy instead.
      doc[target] = nlohmann::json(doc[other]);
      break;
    }
  }
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace onnx_genai::testing
