// The KV cache the generator owns and binds to the decoder's past inputs and present outputs.
//
// Each cache entry (a layer's keys, or its values) is [batch, heads, capacity, head_size]: one
// sequence's head is a run of `capacity` positions, so the stride stays fixed until the capacity
// grows. Capacity starts at what the first step needs, at least KvCacheOptions::initial_capacity
// (default 64), or at the whole max_length when pre-allocating, and grows geometrically (doubling),
// capped at max_length; growing copies the stored positions once into the larger buffer.
//
// Two disciplines (decoder_io.h):
//   shared         past and present are the same tensor [rows, heads, capacity, head_size]: the
//                  graph (GroupQueryAttention) writes the new positions in place
//   concatenated   past is [rows, heads, length, head_size] in one buffer and the graph writes
//                  present [rows, heads, length + fresh, head_size] into a second one; after the
//                  run the two swap. Both buffers are laid out at the current length's stride.
//
// rewind(length) forgets positions >= length (speculative decoding); a concatenated cache is
// re-laid out at the shorter stride, moving each head's rows down once.
//
// The storage comes from KvCacheLayout::memory (host, or the GPU the session runs on); growing and
// rewinding copy through that allocator, between runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "onnx_genai/status.h"
#include "onnx_genai/tensor.h"

namespace onnx_genai::genai {

struct KvCacheOptions {
  bool preallocate = false;      // reserve max_length positions at creation (needs a max_length)
  int64_t initial_capacity = 0;  // smallest first reservation in positions; 0 = 64
};

struct KvCacheLayout {
  size_t entries = 0;  // caches bound per run (2 per layer)
  DType dtype = DType::kF32;
  int64_t batch = 1, heads = 1, head_size = 1;
  bool shared = false;     // present is written into past's storage
  int64_t max_length = 0;  // positions the cache may ever need; 0 = unbounded
  Allocator* memory = &cpu_allocator();  // where the cache lives: the session's device
};

class KvCache {
 public:
  static Result<KvCache> create(const KvCacheLayout& layout, const KvCacheOptions& options);

  int64_t capacity() const { return capacity_; }  // positions per sequence held by the storage
  int64_t length() const { return length_; }      // positions stored (the longest row's)
  int64_t growths() const { return growths_; }    // reallocations since creation

  // Makes room for `positions` positions, keeping [0, length()).
  Status reserve(int64_t positions);
  // Tensors for a run over batch rows [first, first + rows) that adds `fresh` positions after
  // length(). Shared caches bind the whole capacity for both.
  Tensor past(size_t entry, int64_t first, int64_t rows) const;
  Tensor present(size_t entry, int64_t first, int64_t rows, int64_t fresh) const;
  // After the run(s) of one step: the cache now holds `new_length` positions (concatenated caches
  // switch to the buffer present was written to).
  void advance(int64_t new_length);
  // Forgets positions >= `length` (no-op when already shorter).
  Status rewind(int64_t length);
  // Beam search's reorder: batch row i takes row sources[i]'s stored positions (one entry per
  // row; rows may share a source, a row no one names is dropped). In place, through the storage's
  // allocator (so on the device for a device cache): only rows whose source differs are copied,
  // and a cycle of rows trading places goes through one row of scratch.
  Status gather_rows(std::span<const int64_t> sources);

 private:
  using Buffer = std::shared_ptr<std::byte>;

  explicit KvCache(const KvCacheLayout& layout) : layout_(layout) {}
  Result<Buffer> allocate(int64_t positions) const;
  // Copies the stored positions of batch row `src` over row `dst` in every entry; -1 for either
  // is scratch_ (laid out at the current stride).
  Status copy_row(int64_t dst, int64_t src);
  int64_t row_elements(int64_t positions) const { return layout_.heads * positions * layout_.head_size; }
  std::byte* element(const Buffer& buffer, int64_t index) const;
  size_t bytes(int64_t elements) const { return static_cast<size_t>(dtype_storage_bytes(layout_.dtype, elements)); }
  // The stride (positions per head) the data in the current buffer is laid out at.
  int64_t stride() const { return layout_.shared ? capacity_ : length_; }

  KvCacheLayout layout_;
  int64_t first_capacity_ = 0;  // smallest capacity the first reservation takes
  int64_t capacity_ = 0, length_ = 0, growths_ = 0;
  std::vector<Buffer> current_;  // one per entry
  std::vector<Buffer> next_;     // concatenated caches: where present goes
  std::vector<Buffer> scratch_;  // gather_rows: one row per entry, made on first need
  int64_t scratch_capacity_ = 0;  // the capacity scratch_ was sized for
};

}  // namespace onnx_genai::genai
