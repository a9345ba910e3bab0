// The grammar as a byte automaton, determinized lazily (as a regex engine's lazy DFA is).
//
// A parser configuration is a stack of grammar positions: the top is the next symbol to match,
// each frame below is where to continue when the rule above it ends. Stacks are hash-consed
// (a node is a position plus the id of the node below), so equal stacks have equal ids and a
// set of stacks, the nondeterministic parser's state, is a sorted vector of ids. Each distinct
// set gets a state number; its 256 successors are computed on first use and kept, so text the
// parser has seen before (the inside of a string, a repeated array item) costs one table
// lookup per byte. A reference in tail position returns straight to its caller's caller, so
// repetition by right recursion keeps stacks, and therefore states, from growing.
//
// Not thread-safe: the owner (CompiledConstraint, include/onnx_genai/constraints.h) serializes access.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "constraints/grammar.h"

namespace onnx_genai::constraints {

class Automaton {
 public:
  static constexpr int32_t kDead = -1;
  // Bounds on what one grammar may make the parser hold; past them a step fails (hostile or
  // highly ambiguous grammars) rather than exhausting memory.
  static constexpr size_t kMaxStacksPerState = 4096;
  static constexpr size_t kMaxNodes = size_t{1} << 22;
  static constexpr size_t kMaxStates = size_t{1} << 18;

  explicit Automaton(std::shared_ptr<const Grammar> grammar);

  // The state before any byte.
  Result<int32_t> start();
  // The state after `byte`, or kDead when no sentence continues that way.
  Result<int32_t> next(int32_t state, uint8_t byte) {
    if (state == kDead) return kDead;  // the empty language starts dead
    const int32_t cached = (*transitions_[static_cast<size_t>(state)])[byte];
    if (cached != kUnknown) return cached;
    return compute_next(state, byte);
  }
  using Row = std::array<int32_t, 256>;
  // A state's successors by byte, kUnknown where not computed yet (the mask walk reads these
  // directly). Rows stay where they are while states are added.
  const Row& row(int32_t state) const { return *transitions_[static_cast<size_t>(state)]; }
  static constexpr int32_t kUnknown = -2;
  // Whether the text so far is a whole sentence.
  bool accepting(int32_t state) const { return state != kDead && states_[static_cast<size_t>(state)].accepting; }
  size_t state_count() const { return states_.size(); }

 private:
  struct Node {
    int32_t position;
    int32_t below;  // node id, or -1 at the bottom
  };
  struct State {
    std::vector<int32_t> stacks;  // sorted node ids, each with a byte class on top
    bool accepting = false;
  };
  struct VectorHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };

  Result<int32_t> compute_next(int32_t state, uint8_t byte);
  Result<int32_t> node(int32_t position, int32_t below);
  // Expands (position, below) until byte classes are on top, adding those stacks to `out`.
  Status close(int32_t position, int32_t below, std::vector<int32_t>& out, bool& accepting);
  Result<int32_t> intern(std::vector<int32_t> stacks, bool accepting);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<State> states_;
  std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> state_ids_[2];  // by accepting
  // state -> byte -> state, kDead or kUnknown; a row per state, so that adding a state never
  // copies the others (a mask computed while the table grows would stall on the copy).
  std::vector<std::unique_ptr<std::array<int32_t, 256>>> transitions_;
  // Scratch of close(), kept to save allocations: frames to expand, and those expanded.
  std::vector<std::pair<int32_t, int32_t>> work_;
  std::unordered_set<uint64_t> seen_;
  int32_t start_ = kUnknown;
};

}  // namespace onnx_genai::constraints
