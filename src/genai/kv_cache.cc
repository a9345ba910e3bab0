#include "genai/kv_cache.h"

#include <algorithm>
#include <deque>

namespace onnx_genai::genai {

namespace {

// Smallest first allocation unless KvCacheOptions::initial_capacity says otherwise: tiny steps
// should not reallocate every few tokens.
constexpr int64_t kDefaultFirstCapacity = 64;
constexpr int64_t kMaxBytes = int64_t{1} << 50;

}  // namespace

Result<KvCache> KvCache::create(const KvCacheLayout& layout, const KvCacheOptions& options) {
  constexpr int64_t kMaxDim = int64_t{1} << 20;
  if (layout.entries == 0 || layout.batch <= 0 || layout.heads <= 0 || layout.head_size <= 0 || layout.batch > kMaxDim ||
      layout.heads > kMaxDim || layout.head_size > kMaxDim) {
    return OG_ERROR("KV cache: needs at least one entry and batch, heads and head size in [1, 2^20], got ", layout.entries,
                    " entries, batch ", layout.batch, ", heads ", layout.heads, ", head size ", layout.head_size);
  }
  if (options.initial_capacity < 0) {
    return OG_ERROR("KV cache: initial capacity must be >= 0, got ", options.initial_capacity);
  }
  if (options.preallocate && layout.max_length <= 0) {
    return OG_ERROR("KV cache: pre-allocating needs the model's context length, which its config does not give");
  }
  KvCache cache(layout);
  cache.first_capacity_ = options.initial_capacity > 0 ? options.initial_capacity : kDefaultFirstCapacity;
  cache.current_.resize(layout.entries);
  cache.next_.resize(layout.shared ? 0 : layout.entries);
  const int64_t initial = options.preallocate ? layout.max_length : options.initial_capacity;
  if (initial > 0) {
    OG_RETURN_IF_ERROR(cache.reserve(initial));
    cache.growths_ = 0;
  }
  return cache;
}

Result<KvCache::Buffer> KvCache::allocate(int64_t positions) const {
  // Sizes come from configs: refuse products that would overflow before multiplying them.
  const int64_t per_position = layout_.batch * layout_.heads * layout_.head_size;
  if (positions > kMaxBytes / 8 / per_position) {
    return OG_ERROR("KV cache: ", positions, " positions of ", per_position, " elements are too many to allocate");
  }
  const size_t size = bytes(layout_.batch * row_elements(positions));
  Allocator& memory = *layout_.memory;
  auto* data = static_cast<std::byte*>(memory.allocate(size));
  if (data == nullptr) {
    return OG_ERROR("KV cache: cannot allocate ", size, " bytes for ", positions, " positions on ",
                    memory.device().to_string(), " (", memory.free_bytes(), " bytes free)");
  }
  Buffer buffer(data, [&memory](std::byte* p) { memory.deallocate(p); });
  // Zeroed: attention may read past a row's length (as zero-weighted keys), never garbage NaNs.
  OG_RETURN_IF_ERROR(memory.zero(data, size));
  return buffer;
}

std::byte* KvCache::element(const Buffer& buffer, int64_t index) const {
  return buffer.get() + bytes(index);
}

Status KvCache::reserve(int64_t positions) {
  if (positions <= capacity_) return Status::ok();
  int64_t grown = std::max({positions, 2 * capacity_, first_capacity_});
  if (layout_.max_length > 0) grown = std::min(grown, std::max(layout_.max_length, positions));
  const int64_t bh = layout_.batch * layout_.heads, d = layout_.head_size;
  for (size_t e = 0; e < current_.size(); ++e) {
    OG_ASSIGN_OR_RETURN(Buffer bigger, allocate(grown));
    if (current_[e] && length_ > 0) {
      if (layout_.shared) {  // the stride changes: move each head's stored positions
        OG_RETURN_IF_ERROR(layout_.memory->copy_rows(bigger.get(), bytes(grown * d), current_[e].get(),
                                                     bytes(capacity_ * d), bytes(length_ * d), static_cast<size_t>(bh)));
      } else {  // laid out at the length's stride, which does not change
        const size_t all = bytes(bh * length_ * d);
        OG_RETURN_IF_ERROR(layout_.memory->copy_rows(bigger.get(), all, current_[e].get(), all, all, 1));
      }
    }
    current_[e] = std::move(bigger);
    if (!layout_.shared) {
      OG_ASSIGN_OR_RETURN(next_[e], allocate(grown));
    }
  }
  capacity_ = grown;
  ++growths_;
  return Status::ok();
}

Tensor KvCache::past(size_t entry, int64_t first, int64_t rows) const {
  const int64_t positions = stride();
  return Tensor::view(layout_.dtype, Shape{rows, layout_.heads, positions, layout_.head_size},
                      element(current_[entry], first * row_elements(positions)), nullptr, layout_.memory->device());
}

Tensor KvCache::present(size_t entry, int64_t first, int64_t rows, int64_t fresh) const {
  if (layout_.shared) return past(entry, first, rows);
  const int64_t positions = length_ + fresh;
  return Tensor::view(layout_.dtype, Shape{rows, layout_.heads, positions, layout_.head_size},
                      element(next_[entry], first * row_elements(positions)), nullptr, layout_.memory->device());
}

void KvCache::advance(int64_t new_length) {
  if (!layout_.shared) std::swap(current_, next_);
  length_ = new_length;
}

Status KvCache::rewind(int64_t length) {
  if (length >= length_) return Status::ok();
  const int64_t bh = layout_.batch * layout_.heads, d = layout_.head_size;
  if (!layout_.shared && length > 0 && bh > 1) {
    // From stride length_ to stride `length`: each head's first rows move down (head 0 stays).
    for (const Buffer& buffer : current_) {
      OG_RETURN_IF_ERROR(layout_.memory->copy_rows(element(buffer, length * d), bytes(length * d),
                                                   element(buffer, length_ * d), bytes(length_ * d), bytes(length * d),
                                                   static_cast<size_t>(bh - 1)));
    }
  }
  length_ = length;
  return Status::ok();
}

Status KvCache::copy_row(int64_t dst, int64_t src) {
  const int64_t positions = stride(), d = layout_.head_size;
  const size_t pitch = bytes(positions * d);
  for (size_t e = 0; e < current_.size(); ++e) {
    const std::byte* from = src < 0 ? scratch_[e].get() : element(current_[e], src * row_elements(positions));
    std::byte* to = dst < 0 ? scratch_[e].get() : element(current_[e], dst * row_elements(positions));
    OG_RETURN_IF_ERROR(layout_.memory->copy_rows(to, pitch, from, pitch, bytes(length_ * d),
                                                 static_cast<size_t>(layout_.heads)));
  }
  return Status::ok();
}

Status KvCache::gather_rows(std::span<const int64_t> sources) {
  const auto rows = static_cast<size_t>(layout_.batch);
  if (sources.size() != rows) return OG_ERROR("KV cache: gather wants ", rows, " sources, got ", sources.size());
  for (const int64_t source : sources) {
    if (source < 0 || source >= layout_.batch) return OG_ERROR("KV cache: gather source ", source, " is not a row");
  }
  if (length_ == 0) return Status::ok();
  // A row may be overwritten once every other row that reads it has been written: start from the
  // rows nobody reads, and let each write release its source.
  std::vector<int64_t> readers(rows, 0);
  for (size_t i = 0; i < rows; ++i) {
    if (sources[i] != static_cast<int64_t>(i)) ++readers[static_cast<size_t>(sources[i])];
  }
  std::vector<bool> written(rows, false);
  std::deque<size_t> ready;
  for (size_t i = 0; i < rows; ++i) {
    if (sources[i] != static_cast<int64_t>(i) && readers[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    const size_t i = ready.front();
    ready.pop_front();
    const auto source = static_cast<size_t>(sources[i]);
    OG_RETURN_IF_ERROR(copy_row(static_cast<int64_t>(i), sources[i]));
    written[i] = true;
    if (--readers[source] == 0 && sources[source] != static_cast<int64_t>(source) && !written[source]) {
      ready.push_back(source);
    }
  }
  // What is left are cycles (each row read by exactly the next one): park one row, rotate the rest.
  for (size_t start = 0; start < rows; ++start) {
    if (written[start] || sources[start] == static_cast<int64_t>(start)) continue;
    // One row per entry at the capacity's stride, which no layout's stride exceeds; kept across
    // steps (a device allocation per step would synchronize the device).
    if (scratch_capacity_ < capacity_) {
      scratch_.clear();
      Allocator& memory = *layout_.memory;
      const size_t size = bytes(row_elements(capacity_));
      for (size_t e = 0; e < current_.size(); ++e) {
        auto* data = static_cast<std::byte*>(memory.allocate(size));
        if (data == nullptr) return OG_ERROR("KV cache: cannot allocate ", size, " bytes of scratch to reorder rows");
        scratch_.emplace_back(data, [&memory](std::byte* p) { memory.deallocate(p); });
      }
      scratch_capacity_ = capacity_;
    }
    OG_RETURN_IF_ERROR(copy_row(-1, static_cast<int64_t>(start)));
    size_t row = start;
    while (sources[row] != static_cast<int64_t>(start)) {
      OG_RETURN_IF_ERROR(copy_row(static_cast<int64_t>(row), sources[row]));
      written[row] = true;
      row = static_cast<size_t>(sources[row]);
    }
    OG_RETURN_IF_ERROR(copy_row(static_cast<int64_t>(row), -1));
    written[row] = true;
  }
  return Status::ok();
}

}  // namespace onnx_genai::genai
