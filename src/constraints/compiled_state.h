// What a CompiledConstraint shares between its matchers, across threads: the lazily built
// automaton and the token masks of the states seen so far.
//
// Many requests with one schema (a server's clients) walk the same states at once, so neither
// may wait on the other for long: the automaton's known transitions are read without a lock
// (Automaton::known_next), the mutex is taken only to compute a new one, and each state's mask
// is computed by one thread while those needing it too wait for that one, not for every mask.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "constraints/automaton.h"
#include "constraints/token_trie.h"

namespace onnx_genai::constraints {

struct CompiledState {
  explicit CompiledState(std::shared_ptr<const Grammar> grammar) : automaton(std::move(grammar)) {}

  // The successor of `state` by `byte`: without the lock when known, else computed under it.
  Result<int32_t> next(int32_t state, uint8_t byte) {
    const int32_t known = automaton.known_next(state, byte);
    if (known != Automaton::kUnknown) return known;
    std::lock_guard lock(mutex);
    return automaton.next(state, byte);
  }

  // A state's mask without stop tokens, computed once (the first thread to ask computes it).
  struct Mask {
    std::once_flag once;
    Status status = Status::ok();
    std::vector<uint64_t> words;
    bool asked = false;  // again, since the cache was last full (under masks_mutex)
  };
  Result<std::shared_ptr<const Mask>> mask(int32_t state, const TokenTrie& trie);
  void drop_unasked_masks();  // under masks_mutex

  std::mutex mutex;  // taken by every Automaton call but known_next / row / accepting
  Automaton automaton;
  std::mutex masks_mutex;
  // Masks kept at most (19 KiB each at a 152k vocabulary; tests set fewer); past it, those not
  // asked for again since the cache was last full are dropped.
  size_t max_cached_masks = 2048;
  std::unordered_map<int32_t, std::shared_ptr<Mask>> masks;
};

// The tokens whose bytes the automaton accepts from `state`, by one preorder pass over the trie
// that skips every subtree whose first byte is refused; the tokens the grammar names alone by
// whether the state takes them, not by their bytes; the ids of the token sets the state takes
// besides (stop tokens only there). Takes `shared.mutex` once per round of successors it must
// compute (those met in one pass).
Status walk_token_trie(CompiledState& shared, const TokenTrie& trie, int32_t state, std::vector<uint64_t>& mask);

}  // namespace onnx_genai::constraints
