#include "constraints/automaton.h"

#include <algorithm>

namespace onnx_genai::constraints {

size_t Automaton::VectorHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
  for (const int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001B3ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

Automaton::Automaton(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {}

Result<int32_t> Automaton::node(int32_t position, int32_t below) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) | static_cast<uint32_t>(below);
  const auto [it, inserted] = node_ids_.emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) {
    if (nodes_.size() >= kMaxNodes) {
      node_ids_.erase(it);
      return OG_ERROR("grammar: the parser needs more than ", kMaxNodes, " stack frames (nesting too deep)");
    }
    nodes_.push_back(Node{position, below});
  }
  return it->second;
}

Status Automaton::close(int32_t position, int32_t below, std::vector<int32_t>& out, bool& accepting) {
  const std::vector<int32_t>& code = grammar_->code;
  std::vector<std::pair<int32_t, int32_t>>& work = work_;
  work.assign(1, {position, below});
  while (!work.empty()) {
    auto [pos, stack] = work.back();
    work.pop_back();
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(stack);
    if (!seen_.insert(key).second) continue;
    const int32_t c = code[static_cast<size_t>(pos)];
    if (c == Grammar::kEnd) {
      if (stack < 0) {
        accepting = true;
      } else {
        work.emplace_back(nodes_[static_cast<size_t>(stack)].position, nodes_[static_cast<size_t>(stack)].below);
      }
    } else if (c >= 0) {
      OG_ASSIGN_OR_RETURN(const int32_t id, node(pos, stack));
      out.push_back(id);
    } else {
      // A reference in tail position returns to this frame's caller directly (no frame for
      // "the end of this alternative"), which keeps repetition from growing the stack.
      int32_t ret = stack;
      if (code[static_cast<size_t>(pos) + 1] != Grammar::kEnd) {
        OG_ASSIGN_OR_RETURN(ret, node(pos + 1, stack));
      }
      for (const int32_t start : grammar_->alternatives[static_cast<size_t>(Grammar::rule_of(c))]) {
        work.emplace_back(start, ret);
      }
    }
    if (out.size() > kMaxStacksPerState) {
      return OG_ERROR("grammar: more than ", kMaxStacksPerState, " parses alive at once (the grammar is too ambiguous)");
    }
  }
  return Status::ok();
}

Result<int32_t> Automaton::intern(std::vector<int32_t> stacks, bool accepting) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.empty() && !accepting) return kDead;
  auto& ids = state_ids_[accepting ? 1 : 0];
  auto it = ids.find(stacks);
  if (it != ids.end()) return it->second;
  if (states_.size() >= kMaxStates) {
    return OG_ERROR("grammar: the parser reached more than ", kMaxStates, " distinct states");
  }
  const auto id = static_cast<int32_t>(states_.size());
  ids.emplace(stacks, id);
  states_.push_back(State{std::move(stacks), accepting});
  transitions_.push_back(std::make_unique<std::array<int32_t, 256>>());
  transitions_.back()->fill(kUnknown);
  return id;
}

Result<int32_t> Automaton::start() {
  if (start_ != kUnknown) return start_;
  std::vector<int32_t> stacks;
  bool accepting = false;
  seen_.clear();
  OG_RETURN_IF_ERROR(close(0, -1, stacks, accepting));
  OG_ASSIGN_OR_RETURN(start_, intern(std::move(stacks), accepting));
  return start_;
}

Result<int32_t> Automaton::compute_next(int32_t state, uint8_t byte) {
  std::vector<int32_t> stacks;
  bool accepting = false;
  // Copied: close() may add states' nodes, and intern() grows states_.
  const std::vector<int32_t> from = states_[static_cast<size_t>(state)].stacks;
  seen_.clear();  // shared by the closures of all stacks: each (position, below) expands once
  for (const int32_t id : from) {
    const Node n = nodes_[static_cast<size_t>(id)];
    const int32_t cls = grammar_->code[static_cast<size_t>(n.position)];
    if (!grammar_->classes[static_cast<size_t>(cls)].test(byte)) continue;
    OG_RETURN_IF_ERROR(close(n.position + 1, n.below, stacks, accepting));
  }
  OG_ASSIGN_OR_RETURN(const int32_t next, intern(std::move(stacks), accepting));
  (*transitions_[static_cast<size_t>(state)])[byte] = next;
  return next;
}

}  // namespace onnx_genai::constraints
