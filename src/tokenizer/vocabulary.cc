#include "tokenizer/vocabulary.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace onnx_genai::tokenizer {
namespace {

// Tokens average ~7 bytes, so the hash mixes eight bytes at a time with a multiply-xorshift
// (splitmix64's finalizer) instead of hashing byte by byte.
uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint32_t hash_token(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ s.size();
  const char* p = s.data();
  size_t n = s.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    h = mix(h ^ word);
  }
  uint64_t tail = 0;
  if (n > 0) std::memcpy(&tail, p, n);  // p may be null when n == 0
  return static_cast<uint32_t>(mix(h ^ tail));
}

size_t capacity_for(size_t count) {
  size_t capacity = 16;
  while (capacity * 3 < count * 4) capacity *= 2;
  return capacity;
}

}  // namespace

void Vocabulary::reserve(size_t tokens, size_t bytes) {
  arena_.reserve(bytes);
  tokens_.reserve(tokens);
  if (capacity_for(tokens) > slots_.size()) rehash(capacity_for(tokens));
}

size_t Vocabulary::probe(std::string_view token, uint32_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.id < 0 || (slot.hash == hash && text(slot.key) == token)) return i;
  }
}

void Vocabulary::rehash(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{0, -1, {}});
  const size_t mask = capacity - 1;
  for (const Slot& slot : old) {
    if (slot.id < 0) continue;
    size_t i = slot.hash & mask;
    while (slots_[i].id >= 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

Status Vocabulary::resize(int64_t size) {
  if (size < 0 || size > kMaxId) return OG_ERROR("vocabulary size ", size, " is out of range [0, ", kMaxId, "]");
  if (static_cast<size_t>(size) > tokens_.size()) tokens_.resize(static_cast<size_t>(size));
  return Status::ok();
}

Status Vocabulary::set(std::string_view token, int64_t id) { return set_many({&token, 1}, {&id, 1}); }

Status Vocabulary::set_many(std::span<const std::string_view> tokens, std::span<const int64_t> ids) {
  int64_t max_id = -1;
  size_t bytes = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || ids[k] >= kMaxId) return OG_ERROR("token id ", ids[k], " is out of range [0, ", kMaxId, ")");
    max_id = std::max(max_id, ids[k]);
    bytes += tokens[k].size();
  }
  if (arena_.size() + bytes > std::numeric_limits<uint32_t>::max()) return OG_ERROR("vocabulary text exceeds 4 GiB");
  OG_RETURN_IF_ERROR(resize(max_id + 1));
  if ((count_ + tokens.size()) * 4 > slots_.size() * 3) rehash(capacity_for(count_ + tokens.size()) * 2);
  visit_prefetched(tokens, [&](size_t k, uint32_t hash) {
    Slot& slot = slots_[probe(tokens[k], hash)];
    if (slot.id < 0) {
      slot = Slot{hash, 0, Span{static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(tokens[k].size())}};
      arena_.append(tokens[k]);
      ++count_;
    }
    slot.id = static_cast<int32_t>(ids[k]);
    tokens_[ids[k]] = slot.key;
  });
  return Status::ok();
}

int32_t Vocabulary::find(std::string_view token) const {
  if (slots_.empty()) return -1;
  return slots_[probe(token, hash_token(token))].id;
}

void Vocabulary::find_many(std::span<const std::string_view> tokens, std::span<int32_t> ids) const {
  if (slots_.empty()) {
    std::fill(ids.begin(), ids.end(), -1);
    return;
  }
  visit_prefetched(tokens, [&](size_t k, uint32_t hash) { ids[k] = slots_[probe(tokens[k], hash)].id; });
}

template <typename Visit>
void Vocabulary::visit_prefetched(std::span<const std::string_view> tokens, Visit&& visit) const {
  // Per group: hash every token and prefetch its home slot; then prefetch the text each of
  // those slots points to; then visit (probing mostly from cache).
  constexpr size_t kGroup = 64;
  uint32_t hashes[kGroup];
  const size_t mask = slots_.size() - 1;
  for (size_t first = 0; first < tokens.size(); first += kGroup) {
    const size_t count = std::min(kGroup, tokens.size() - first);
    for (size_t k = 0; k < count; ++k) {
      hashes[k] = hash_token(tokens[first + k]);
      __builtin_prefetch(&slots_[hashes[k] & mask]);
    }
    for (size_t k = 0; k < count; ++k) {
      const Slot& slot = slots_[hashes[k] & mask];
      if (slot.id >= 0) __builtin_prefetch(arena_.data() + slot.key.offset);
    }
    for (size_t k = 0; k < count; ++k) visit(first + k, hashes[k]);
  }
}

}  // namespace onnx_genai::tokenizer
