// Token strings and ids: the model's vocabulary with added tokens laid over it.
// Loading a 150k-token vocabulary is on the load-time budget (< 150 ms), so there is no
// allocation per token: the token texts live in one string arena, id -> token is a dense table
// of arena spans, and token -> id is an open-addressing hash table over the same spans.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "onnx_genai/status.h"

namespace onnx_genai::tokenizer {

class Vocabulary {
 public:
  // Ids index dense tables, so they are bounded; real vocabularies stay below 300k.
  static constexpr int64_t kMaxId = int64_t{1} << 24;

  // Pre-sizes for about `tokens` entries holding `bytes` of token text (both only hints).
  void reserve(size_t tokens, size_t bytes);
  // Maps token -> id and id -> token; a later call wins in both directions (an earlier token
  // of this id still finds it). Fails on an id outside [0, kMaxId).
  Status set(std::string_view token, int64_t id);
  // set() for each (tokens[k], ids[k]), with the memory accesses of a batch overlapped as in
  // find_many(). Sets nothing when an id is out of range.
  Status set_many(std::span<const std::string_view> tokens, std::span<const int64_t> ids);
  // Makes ids below `size` valid; ids without a token read as "".
  Status resize(int64_t size);

  // -1 when absent.
  int32_t find(std::string_view token) const;
  // find() for each of `tokens` into `ids` (same size). The table is larger than the cache, so
  // the lookups' memory accesses are issued together (prefetched) instead of one miss at a time.
  void find_many(std::span<const std::string_view> tokens, std::span<int32_t> ids) const;
  // "" when `id` is out of range or has no token.
  std::string_view token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return {};
    return std::string_view(arena_).substr(tokens_[id].offset, tokens_[id].length);
  }
  // Largest id + 1.
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }

  int32_t unk_id = -1;  // -1 when the model has no unknown token

 private:
  struct Span {
    uint32_t offset = 0;
    uint32_t length = 0;
  };
  struct Slot {
    uint32_t hash;  // low bits of the key's hash: picks the bucket, filters compares
    int32_t id;     // -1: empty
    Span key;
  };

  std::string_view text(Span span) const { return std::string_view(arena_).substr(span.offset, span.length); }
  // The slot holding `token`, or the empty slot where it would go.
  size_t probe(std::string_view token, uint32_t hash) const;
  void rehash(size_t capacity);
  // Calls visit(k, hash of tokens[k]) for each token in order, prefetching a group ahead.
  template <typename Visit>
  void visit_prefetched(std::span<const std::string_view> tokens, Visit&& visit) const;

  std::string arena_;
  std::vector<Span> tokens_;  // id -> token text
  std::vector<Slot> slots_;   // power-of-two size, at most 3/4 full
  size_t count_ = 0;
};

}  // namespace onnx_genai::tokenizer
