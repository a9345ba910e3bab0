// FlatMap64 (the automaton's node and closure tables) against std::unordered_map on keys that
// collide in their low bits, their high bits, and at random, through several growths.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "constraints/flat_map.h"

namespace onnx_genai::constraints {
namespace {

TEST(FlatMap64, AgreesWithUnorderedMap) {
  std::mt19937_64 rng(7);
  FlatMap64 map;
  std::unordered_map<uint64_t, int32_t> reference;
  const auto key_of = [&](int i) -> uint64_t {
    switch (i % 3) {
      case 0: return static_cast<uint64_t>(i) << 32;  // frames: positions in the high half
      case 1: return static_cast<uint64_t>(i & 0xFF) | (static_cast<uint64_t>(i) << 40);
      default: return rng() >> 1;
    }
  };
  for (int i = 0; i < 50000; ++i) {
    const uint64_t key = key_of(i);
    const auto value = static_cast<int32_t>(rng() % 1000);
    const auto [slot, inserted] = map.try_emplace(key, value);
    const auto [it, expected] = reference.try_emplace(key, value);
    ASSERT_EQ(inserted, expected) << "key " << key;
    ASSERT_EQ(*slot, it->second) << "key " << key;
    if (i % 7 == 0) {  // values may change in place
      *slot = i;
      it->second = i;
    }
  }
  ASSERT_EQ(map.size(), reference.size());
  for (const auto& [key, value] : reference) {
    const int32_t* found = map.find(key);
    ASSERT_NE(found, nullptr) << "key " << key;
    EXPECT_EQ(*found, value);
  }
  for (int i = 0; i < 10000; ++i) {
    const uint64_t absent = (rng() >> 1) | (uint64_t{1} << 62);
    if (!reference.contains(absent)) {
      EXPECT_EQ(map.find(absent), nullptr);
    }
  }
  EXPECT_EQ(FlatMap64().find(42), nullptr);
}

}  // namespace
}  // namespace onnx_genai::constraints
