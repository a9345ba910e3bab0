// ConstraintCache (include/onnx_genai/constraints.h).
#include <algorithm>
#include <list>
#include <mutex>

#include "onnx_genai/constraints.h"

namespace onnx_genai {

struct ConstraintCache::Entries {
  struct Entry {
    ConstraintSpec spec;
    std::shared_ptr<CompiledConstraint> compiled;
  };
  static bool same(const ConstraintSpec& a, const ConstraintSpec& b) {
    return a.kind == b.kind && a.compact_json == b.compact_json && a.text == b.text;
  }
  size_t capacity;
  mutable std::mutex mutex;
  std::list<Entry> recent;  // most recently used first; a few entries, so searched in order
  size_t hits = 0;
};

ConstraintCache::ConstraintCache(std::shared_ptr<const ConstraintVocabulary> vocabulary, size_t capacity)
    : vocabulary_(std::move(vocabulary)), entries_(std::make_unique<Entries>()) {
  entries_->capacity = std::max<size_t>(capacity, 1);
}

ConstraintCache::~ConstraintCache() = default;

Result<std::shared_ptr<CompiledConstraint>> ConstraintCache::compile(const ConstraintSpec& spec) {
  Entries& e = *entries_;
  const auto find = [&] {
    return std::find_if(e.recent.begin(), e.recent.end(), [&](const Entries::Entry& x) { return Entries::same(x.spec, spec); });
  };
  {
    std::lock_guard lock(e.mutex);
    if (const auto it = find(); it != e.recent.end()) {
      e.recent.splice(e.recent.begin(), e.recent, it);
      ++e.hits;
      return it->compiled;
    }
  }
  // Compiled without the lock: a large schema must not hold up requests with cached ones. Two
  // requests meeting a new spec at once may both compile it; the first one kept wins.
  OG_ASSIGN_OR_RETURN(std::shared_ptr<CompiledConstraint> compiled, CompiledConstraint::compile(spec, vocabulary_));
  std::lock_guard lock(e.mutex);
  if (const auto it = find(); it != e.recent.end()) return it->compiled;
  e.recent.push_front(Entries::Entry{spec, compiled});
  if (e.recent.size() > e.capacity) e.recent.pop_back();
  return compiled;
}

size_t ConstraintCache::hits() const {
  std::lock_guard lock(entries_->mutex);
  return entries_->hits;
}

}  // namespace onnx_genai
