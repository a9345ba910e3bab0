// What a CompiledConstraint shares between its matchers: the lazily built automaton and the
// token masks of the states seen so far, behind one mutex.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "constraints/automaton.h"
#include "constraints/token_trie.h"

namespace onnx_genai::constraints {

struct CompiledState {
  // Masks kept at most (19 KiB each at a 152k vocabulary); past it the cache starts over.
  static constexpr size_t kMaxCachedMasks = 2048;

  explicit CompiledState(std::shared_ptr<const Grammar> grammar) : automaton(std::move(grammar)) {}

  std::mutex mutex;
  Automaton automaton;
  std::unordered_map<int32_t, std::vector<uint64_t>> masks;  // state -> mask without stop tokens
};

// The tokens whose bytes the automaton accepts from `state` (stop tokens not included), by one
// preorder pass over the trie that skips every subtree whose first byte is refused; the tokens
// the grammar names by whether the state takes them, not by their bytes.
Status walk_token_trie(Automaton& automaton, const TokenTrie& trie, int32_t state, std::vector<uint64_t>& mask);

}  // namespace onnx_genai::constraints
