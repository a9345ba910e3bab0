// An open-addressing hash map from 64-bit keys to 32-bit values, for the automaton's hottest
// lookups (a stack node by its frame; the frames one closure expanded): a key and its value
// share one 16-byte slot of one array, so a lookup is one probe sequence and usually one cache
// miss, and an insertion allocates nothing (std::unordered_map allocates a node per entry; the
// node lookups were a third of the time of computing a new state's mask).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace onnx_genai::constraints {

class FlatMap64 {
 public:
  // ~0 marks a free slot: no key may be all ones.
  static constexpr uint64_t kFree = ~uint64_t{0};

  const int32_t* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kFree) return nullptr;
    }
  }
  // The value of `key`, inserted as `value` when absent (second: whether it was).
  std::pair<int32_t*, bool> try_emplace(uint64_t key, int32_t value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return {&slots_[i].value, false};
      if (slots_[i].key == kFree) {
        slots_[i] = Slot{key, value};
        ++size_;
        return {&slots_[i].value, true};
      }
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key = kFree;
    int32_t value = 0;
  };
  // Fibonacci hashing: the top bits of key x 2^64 / phi.
  size_t home(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    const size_t capacity = old.empty() ? 1024 : old.size() * 2;
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64 - static_cast<int>(__builtin_ctzll(capacity));
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != kFree) try_emplace(s.key, s.value);
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace onnx_genai::constraints
